package instance

import (
	"context"
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
}

// probe runs driver's probe, or joins the one in flight. The probe is not
// bound to ctx (a reader that goes away does not fail the others); ctx
// bounds only this reader's wait.
func (s *probeShare) probe(ctx context.Context, driver Driver) (Probe, error) {
	ch := s.group.DoChan("probe", func() (any, error) {
		pctx, cancel := context.WithTimeout(context.Background(), statusProbeTimeout)
		defer cancel()
		return driver.Probe(pctx)
	})
	select {
	case r := <-ch:
		p, _ := r.Val.(Probe)
		return p, r.Err
	case <-ctx.Done():
		return Probe{}, ctx.Err()
	}
}
