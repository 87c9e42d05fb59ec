package instance

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// statusProbeTimeout bounds the engine probe behind a status read, and the
// read of the engine's figures behind a scrape.
const statusProbeTimeout = 2 * time.Second

// sharedRead lets every reader of something the engine answers (its state
// for the status over HTTP: the kubelet's probes, the controller, anyone
// else who can reach the pod; its figures for /metrics) share one read at
// a time. However many ask at once, the engine sees at most one of their
// reads in flight, on one of the admin pool's connections, so a flood of
// requests can neither exhaust the connections the control loop needs nor
// slow the probes until the primary reads unready and is failed over. A
// reader that arrives while a read runs gets that read's result, which is
// at most one read's duration older than its request; one that accepts a
// result of a bounded age gets the last one within it.
type sharedRead[T any] struct {
	group singleflight.Group

	mu      sync.Mutex
	last    T
	lastErr error
	lastAt  time.Time
}

// probeShare shares the engine's probes.
type probeShare = sharedRead[Probe]

// cachedProbeAge is how old a probe result /readyz may answer with.
const cachedProbeAge = time.Second

// read runs read, or joins the one in flight, or, with maxAge set, answers
// with the last result when it ended no more than maxAge ago. The read is
// not bound to ctx (a reader that goes away does not fail the others); ctx
// bounds only this reader's wait.
func (s *sharedRead[T]) read(ctx context.Context, maxAge time.Duration, read func(context.Context) (T, error)) (T, error) {
	if maxAge > 0 {
		s.mu.Lock()
		v, err, at := s.last, s.lastErr, s.lastAt
		s.mu.Unlock()
		if !at.IsZero() && time.Since(at) <= maxAge {
			return v, err
		}
	}
	ch := s.group.DoChan("read", func() (any, error) {
		rctx, cancel := context.WithTimeout(context.Background(), statusProbeTimeout)
		defer cancel()
		v, err := read(rctx)
		s.mu.Lock()
		s.last, s.lastErr, s.lastAt = v, err, time.Now()
		s.mu.Unlock()
		return v, err
	})
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, r.Err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
