package instance

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// statusProbeTimeout bounds the engine probe behind a status read.
const statusProbeTimeout = 2 * time.Second

// probeShare lets every reader of the status over HTTP (the kubelet's
// probes, the controller, anyone else who can reach the pod) share one
// engine probe at a time. However many ask at once, the engine sees at most
// one of their probes in flight, on one of the admin pool's connections,
// so a flood of status requests can neither exhaust the connections the
// control loop needs nor slow the probes until the primary reads unready
// and is failed over. A reader that arrives while a probe runs gets that
// probe's result, which is at most one probe's duration older than its
// request.
type probeShare struct {
	group singleflight.Group

	// The last probe's result and when it ended, for readers that accept
	// one of a bounded age (the kubelet's readiness probe, which anyone who
	// reaches the pod can send too).
	mu      sync.Mutex
	last    Probe
	lastErr error
	lastAt  time.Time
}

// cachedProbeAge is how old a probe result /readyz may answer with.
const cachedProbeAge = time.Second

// probe runs driver's probe, or joins the one in flight, or, with maxAge
// set, answers with the last result when it ended no more than maxAge ago.
// The probe is not bound to ctx (a reader that goes away does not fail the
// others); ctx bounds only this reader's wait.
func (s *probeShare) probe(ctx context.Context, driver Driver, maxAge time.Duration) (Probe, error) {
	if maxAge > 0 {
		s.mu.Lock()
		p, err, at := s.last, s.lastErr, s.lastAt
		s.mu.Unlock()
		if !at.IsZero() && time.Since(at) <= maxAge {
			return p, err
		}
	}
	ch := s.group.DoChan("probe", func() (any, error) {
		pctx, cancel := context.WithTimeout(context.Background(), statusProbeTimeout)
		defer cancel()
		p, err := driver.Probe(pctx)
		s.mu.Lock()
		s.last, s.lastErr, s.lastAt = p, err, time.Now()
		s.mu.Unlock()
		return p, err
	})
	select {
	case r := <-ch:
		p, _ := r.Val.(Probe)
		return p, r.Err
	case <-ctx.Done():
		return Probe{}, ctx.Err()
	}
}
