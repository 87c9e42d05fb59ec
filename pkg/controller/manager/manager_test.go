package manager

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	componentbaseconfig "k8s.io/component-base/config"
)

// fakeController runs until its context ends, or fails after failAfter.
type fakeController struct {
	failAfter time.Duration
	running   *atomic.Int32
	maxSeen   *atomic.Int32
	closed    atomic.Bool
}

func (c *fakeController) Run(ctx context.Context, _ int) error {
	n := c.running.Add(1)
	defer c.running.Add(-1)
	for {
		old := c.maxSeen.Load()
		if n <= old || c.maxSeen.CompareAndSwap(old, n) {
			break
		}
	}
	if c.failAfter > 0 {
		select {
		case <-time.After(c.failAfter):
			return errors.New("cannot list widgets")
		case <-ctx.Done():
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

func (c *fakeController) Close() { c.closed.Store(true) }

func testManager(t *testing.T) (*Manager, *record.FakeRecorder, *k8sfake.Clientset) {
	t.Helper()
	client := k8sfake.NewClientset()
	recorder := record.NewFakeRecorder(100)
	m := &Manager{
		config: Config{Workers: 1, Identity: "replica-a", LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:   true,
			LeaseDuration: metav1.Duration{Duration: 600 * time.Millisecond},
			RenewDeadline: metav1.Duration{Duration: 400 * time.Millisecond},
			RetryPeriod:   metav1.Duration{Duration: 100 * time.Millisecond},
			ResourceLock:  resourcelock.LeasesResourceLock, ResourceName: "mydb-controller", ResourceNamespace: "mydb-system",
		}},
		leaseClient: client,
		recorder:    recorder,
	}
	return m, recorder, client
}

// TestFailingControllerEndsTheTerm: a controller that fails stops its
// siblings, gives the lease up with a Warning, and the replica stands again;
// the terms never overlap.
func TestFailingControllerEndsTheTerm(t *testing.T) {
	m, recorder, client := testManager(t)
	var running, maxSeen atomic.Int32
	var mu sync.Mutex
	var built []*fakeController
	terms := make(chan struct{}, 10)
	m.build = func(context.Context) (map[string]controller, error) {
		good := &fakeController{running: &running, maxSeen: &maxSeen}
		bad := &fakeController{failAfter: 150 * time.Millisecond, running: &running, maxSeen: &maxSeen}
		mu.Lock()
		built = append(built, good, bad)
		mu.Unlock()
		terms <- struct{}{}
		return map[string]controller{"good": good, "bad": bad}, nil
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.runElected(ctx)
	}()
	for i := 0; i < 2; i++ {
		select {
		case <-terms:
		case <-time.After(10 * time.Second):
			t.Fatalf("term %d never started", i+1)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runElected did not return after its context ended")
	}

	// Two controllers per term: more than two at once means two terms overlapped.
	if got := maxSeen.Load(); got > 2 {
		t.Errorf("%d controllers ran at once: two terms overlapped", got)
	}
	mu.Lock()
	for i, c := range built[:2] {
		if !c.closed.Load() {
			t.Errorf("controller %d of the failed term was not closed", i)
		}
	}
	mu.Unlock()
	var warning string
	for len(recorder.Events) > 0 {
		if ev := <-recorder.Events; strings.HasPrefix(ev, "Warning ControllerFailed") {
			warning = ev
		}
	}
	if !strings.Contains(warning, "replica-a gave up the lease") || !strings.Contains(warning, "cannot list widgets") {
		t.Errorf("want a ControllerFailed warning naming the replica and the error, got %q", warning)
	}
	lease, err := client.CoordinationV1().Leases("mydb-system").Get(context.Background(), "mydb-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the lease is still held by %q after the replica stopped", *h)
	}
}

// TestTermThatEndedBeforeItBeganRunsNothing: a leadership callback that
// starts late, after its term was lost, builds no controllers.
func TestTermThatEndedBeforeItBeganRunsNothing(t *testing.T) {
	m, _, _ := testManager(t)
	m.build = func(context.Context) (map[string]controller, error) {
		t.Error("controllers were built for a term that had ended")
		return nil, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.lead(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLeadReturnsTheFirstFailure: lead ends every controller of its term
// when one fails and says which one.
func TestLeadReturnsTheFirstFailure(t *testing.T) {
	m, _, _ := testManager(t)
	var running, maxSeen atomic.Int32
	good := &fakeController{running: &running, maxSeen: &maxSeen}
	m.build = func(context.Context) (map[string]controller, error) {
		return map[string]controller{"good": good, "backup": &fakeController{failAfter: time.Millisecond, running: &running, maxSeen: &maxSeen}}, nil
	}
	err := m.lead(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the backup controller: cannot list widgets") {
		t.Fatalf("lead() = %v, want the backup controller's failure", err)
	}
	if running.Load() != 0 || !good.closed.Load() {
		t.Errorf("after a failure %d controllers still run; closed: %v", running.Load(), good.closed.Load())
	}
}

// switchGate is a gate a test opens and closes.
type switchGate struct {
	mu      sync.Mutex
	open    bool
	changed chan struct{}
}

func (g *switchGate) Verified() (bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open, g.changed
}

func (g *switchGate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
	close(g.changed)
	g.changed = make(chan struct{})
}

// TestClosedGateHoldsTheControllers: while the storage guard's gate is
// closed no controller runs; one that runs stops when it closes, and new
// ones start when it opens again.
func TestClosedGateHoldsTheControllers(t *testing.T) {
	m, _, _ := testManager(t)
	gate := &switchGate{changed: make(chan struct{})}
	m.config.Gate = gate
	var running, maxSeen, builds atomic.Int32
	m.build = func(context.Context) (map[string]controller, error) {
		builds.Add(1)
		return map[string]controller{"a": &fakeController{running: &running, maxSeen: &maxSeen}}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.lead(ctx) }()

	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if builds.Load() != 0 {
		t.Fatal("controllers were built while the gate was closed")
	}
	gate.set(true)
	eventually("the controllers to run", func() bool { return running.Load() == 1 })
	gate.set(false)
	eventually("the controllers to stop", func() bool { return running.Load() == 0 })
	time.Sleep(100 * time.Millisecond)
	if builds.Load() != 1 {
		t.Fatalf("%d builds while closed, want the first one only", builds.Load())
	}
	gate.set(true)
	eventually("the controllers to run again", func() bool { return running.Load() == 1 && builds.Load() == 2 })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("lead: %v", err)
	}
}
