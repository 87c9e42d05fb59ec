package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// errLeaseMayHavePassed is what a write gets that the fence held back.
var errLeaseMayHavePassed = errors.New("this replica's controller lease may have passed to another replica: the write is not sent")

var (
	fencedWrites = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      "mydb_controller",
		Name:           "fenced_writes_total",
		Help:           "Writes the controllers did not send because this replica's lease may have passed to another replica.",
		StabilityLevel: metrics.ALPHA,
	})
	registerFenceMetrics sync.Once
)

// leaseFence lets the controllers' writes out only while this replica
// certainly holds the lease by its own clock. The elector stops a term
// only once a renewal fails, and ends the term's context after it has
// released the lease: a replica that was frozen (SIGSTOP, a paused VM, a
// long GC) past the lease's expiry wakes with its workers running on stale
// caches while another replica leads, and without the fence they write
// before the elector even notices.
//
// Each successful acquisition or renewal opens the fence until the renew
// deadline after the moment it was sent: the other replicas count the
// lease duration from when they saw that renewal, which is later, so the
// lease duration minus the renew deadline (5 s by default) is left for
// clocks running at different rates and for a write on the wire. A write
// the fence lets out carries the fence's end as its deadline.
type leaseFence struct {
	clock clock.Clock
	mu    sync.Mutex
	until time.Time // zero when closed
}

func newLeaseFence(c clock.Clock) *leaseFence {
	registerFenceMetrics.Do(func() { legacyregistry.MustRegister(fencedWrites) })
	return &leaseFence{clock: c}
}

// openUntil lets writes out until the given moment (or a later one already set).
func (f *leaseFence) openUntil(until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until.After(f.until) {
		f.until = until
	}
}

func (f *leaseFence) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.until = time.Time{}
}

// deadline is the end of the fence's opening, and whether it is open now.
func (f *leaseFence) deadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until, f.clock.Now().Before(f.until)
}

// endWhenShut calls end once the fence is shut, its opening having run
// out with no renewal or the lease released, unless ctx ends first. The
// elector would end the term only once its renewals have failed for the
// renew deadline, counted from after it wakes.
func (f *leaseFence) endWhenShut(ctx context.Context, end func()) {
	for {
		until, open := f.deadline()
		if !open {
			end()
			return
		}
		timer := f.clock.NewTimer(until.Sub(f.clock.Now()))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C():
		}
	}
}

// wrap is a transport.WrapperFunc: every request but reads goes through the fence.
func (f *leaseFence) wrap(next http.RoundTripper) http.RoundTripper {
	return &fencedTransport{fence: f, next: next}
}

type fencedTransport struct {
	fence *leaseFence
	next  http.RoundTripper
}

func (t *fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	until, open := t.fence.deadline()
	if !open {
		fencedWrites.Inc()
		return nil, errLeaseMayHavePassed
	}
	ctx, cancel := context.WithDeadline(req.Context(), until)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a request's context once its response is read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	defer b.cancel()
	return b.ReadCloser.Close()
}

// fencedLock is the Lease lock, opening the fence on every write that
// makes or keeps this replica the holder and closing it on any other
// (the release). It also releases only a Lease this replica holds: the
// elector's release checks the holder it last observed, not the one it
// has just read, so a replica that wakes from a freeze and ends its term
// before its elector has seen the new holder would otherwise empty the
// new holder's Lease and could take it back.
type fencedLock struct {
	resourcelock.Interface
	fence         *leaseFence
	renewDeadline time.Duration
	// holder is whom the Lease named when it was last read; an update
	// carries that read's resourceVersion, so it applies to that holder's
	// Lease or fails with a conflict.
	holder string
}

func (l *fencedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r, raw, err := l.Interface.Get(ctx)
	if err == nil {
		l.holder = r.HolderIdentity
	}
	return r, raw, err
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, r, func() error { return l.Interface.Create(ctx, r) })
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, r, func() error { return l.Interface.Update(ctx, r) })
}

func (l *fencedLock) write(ctx context.Context, r resourcelock.LeaderElectionRecord, write func() error) error {
	holding := r.HolderIdentity == l.Identity()
	if !holding {
		l.fence.close()
		if l.holder != l.Identity() {
			klog.FromContext(ctx).Info("Not releasing the controller lease: another replica holds it", "holder", l.holder, "identity", l.Identity())
			return nil
		}
	}
	sent := l.fence.clock.Now()
	if err := write(); err != nil {
		return err
	}
	l.holder = r.HolderIdentity
	if holding {
		l.fence.openUntil(sent.Add(l.renewDeadline))
	}
	return nil
}
