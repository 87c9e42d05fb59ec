package manager

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// recordingTransport answers every request and remembers what reached it.
type recordingTransport struct {
	methods   []string
	deadlines []time.Time
}

func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.methods = append(t.methods, req.Method)
	deadline, _ := req.Context().Deadline()
	t.deadlines = append(t.deadlines, deadline)
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

func request(t *testing.T, rt http.RoundTripper, method string) error {
	t.Helper()
	req, err := http.NewRequest(method, "https://127.0.0.1/apis/apps/v1/namespaces/a/statefulsets/db", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// TestFenceLetsWritesOutOnlyWithinTheRenewDeadline: a write goes out only
// before the renew deadline has passed since the last renewal was sent,
// carrying that moment as its deadline; reads always go out; a replica
// that wakes after its lease expired sends no write.
func TestFenceLetsWritesOutOnlyWithinTheRenewDeadline(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := newLeaseFence(clk)
	next := &recordingTransport{}
	rt := fence.wrap(next)

	if err := request(t, rt, http.MethodPatch); !errors.Is(err, errLeaseMayHavePassed) {
		t.Fatalf("a write before any renewal: %v, want it held back", err)
	}
	lock := &fencedLock{Interface: leaseLock(t, "replica-a", ""), fence: fence, renewDeadline: 10 * time.Second}
	renew := func() {
		t.Helper()
		if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a", LeaseDurationSeconds: 15}); err != nil {
			t.Fatal(err)
		}
	}
	renew()
	sent := clk.Now()
	clk.Step(9 * time.Second)
	if err := request(t, rt, http.MethodPatch); err != nil {
		t.Fatalf("a write 9s after a renewal: %v", err)
	}
	if got := next.deadlines[len(next.deadlines)-1]; !got.Equal(sent.Add(10 * time.Second)) {
		t.Errorf("the write's deadline is %v, want the renew deadline after the renewal, %v", got, sent.Add(10*time.Second))
	}

	// Frozen for 20 s: the lease has passed to another replica.
	clk.Step(20 * time.Second)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := request(t, rt, method); !errors.Is(err, errLeaseMayHavePassed) {
			t.Errorf("a %s after the lease expired: %v, want it held back", method, err)
		}
	}
	if err := request(t, rt, http.MethodGet); err != nil {
		t.Errorf("a read after the lease expired: %v", err)
	}
	if want := []string{http.MethodPatch, http.MethodGet}; strings.Join(next.methods, " ") != strings.Join(want, " ") {
		t.Errorf("requests sent: %v, want %v", next.methods, want)
	}

	// A renewal opens it again; the release closes it at once.
	renew()
	if err := request(t, rt, http.MethodPost); err != nil {
		t.Fatalf("a write after a renewal: %v", err)
	}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if err := request(t, rt, http.MethodPost); !errors.Is(err, errLeaseMayHavePassed) {
		t.Errorf("a write after the release: %v, want it held back", err)
	}
}

// TestFailedRenewalKeepsTheFenceWhereItWas: a renewal the API server
// refused (another replica took the lease) opens nothing.
func TestFailedRenewalKeepsTheFenceWhereItWas(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := newLeaseFence(clk)
	lock := &fencedLock{Interface: &failingLock{Interface: leaseLock(t, "replica-a", "")}, fence: fence, renewDeadline: 10 * time.Second}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{HolderIdentity: "replica-a"}); err == nil {
		t.Fatal("the failing lock accepted an update")
	}
	if _, open := fence.deadline(); open {
		t.Error("a failed renewal opened the fence")
	}
}

type failingLock struct{ resourcelock.Interface }

func (l *failingLock) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return errors.New("the object has been modified")
}

// TestReleaseLeavesAnotherReplicasLease: a replica that wakes after
// another took its lease, and ends its term before its elector has seen
// that, does not empty the other's Lease.
func TestReleaseLeavesAnotherReplicasLease(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := newLeaseFence(clk)
	fence.openUntil(clk.Now().Add(10 * time.Second))
	lock := &fencedLock{Interface: leaseLock(t, "replica-a", "replica-b"), fence: fence, renewDeadline: 10 * time.Second}
	// What the elector's release does: read, then write an empty holder.
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(context.Background(), resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	r, _, err := lock.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.HolderIdentity != "replica-b" || r.LeaseDurationSeconds != 15 {
		t.Errorf("after replica-a's release the Lease names %q for %ds, want replica-b's 15s", r.HolderIdentity, r.LeaseDurationSeconds)
	}
	if _, open := fence.deadline(); open {
		t.Error("the release left the fence open")
	}
}

// leaseLock is identity's Lease lock on a fake cluster whose Lease holder
// holds (none when empty), read once.
func leaseLock(t *testing.T, identity, holder string) resourcelock.Interface {
	t.Helper()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "mydb-system", Name: "mydb-controller"}}
	if holder != "" {
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: ptr.To[int32](15)}
	}
	client := k8sfake.NewClientset(lease)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, "mydb-system", "mydb-controller",
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	// Update needs the Lease it last read.
	if _, _, err := lock.Get(context.Background()); err != nil {
		t.Fatal(err)
	}
	return lock
}

// TestShutFenceEndsTheTerm: the term ends once the fence's opening runs
// out with no renewal, not while renewals keep it open, and never after
// the term ended by itself.
func TestShutFenceEndsTheTerm(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fence := newLeaseFence(clk)
	fence.openUntil(clk.Now().Add(10 * time.Second))
	ended := make(chan struct{})
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		fence.endWhenShut(context.Background(), func() { close(ended) })
	}()
	waitForTimer := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("endWhenShut set no timer")
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Renewed before the opening ran out: the term goes on.
	waitForTimer()
	fence.openUntil(clk.Now().Add(15 * time.Second))
	clk.Step(10 * time.Second)
	waitForTimer()
	select {
	case <-ended:
		t.Fatal("the term ended while renewals kept the fence open")
	default:
	}
	// Frozen past the renewed opening.
	clk.Step(20 * time.Second)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the term did not end once the fence's opening ran out")
	}
	<-returned

	ctx, cancel := context.WithCancel(context.Background())
	fence.openUntil(clk.Now().Add(10 * time.Second))
	done := make(chan struct{})
	go func() {
		defer close(done)
		fence.endWhenShut(ctx, func() { t.Error("a term that had ended was ended again") })
	}()
	waitForTimer()
	cancel()
	<-done
}
