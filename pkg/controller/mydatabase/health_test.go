package mydatabase

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// fakeHealth plays managers' health streams: each WatchHealth call takes
// the next stream of its host, sends its lines, and ends with its error
// (or when ctx ends).
type fakeHealth struct {
	mu      sync.Mutex
	streams map[string]chan api.Health
	opened  map[string]int
	closed  map[string]int
	// credentials is the credentials' ID each host's last stream used.
	credentials map[string]string
}

func (f *fakeHealth) stream(host string) chan api.Health {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams == nil {
		f.streams, f.opened, f.closed, f.credentials = map[string]chan api.Health{}, map[string]int{}, map[string]int{}, map[string]string{}
	}
	if f.streams[host] == nil {
		f.streams[host] = make(chan api.Health)
	}
	return f.streams[host]
}

// breakStream ends host's stream (as a killed manager's does); the next
// WatchHealth opens another.
func (f *fakeHealth) breakStream(host string) {
	ch := f.stream(host)
	f.mu.Lock()
	delete(f.streams, host)
	f.mu.Unlock()
	close(ch)
}

func (f *fakeHealth) WatchHealth(ctx context.Context, host string, auth api.Auth, seen func(api.Health)) error {
	ch := f.stream(host)
	f.mu.Lock()
	f.opened[host]++
	f.credentials[host] = ""
	if auth.Credentials != nil {
		f.credentials[host] = auth.Credentials.ID
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.closed[host]++
		f.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case h, ok := <-ch:
			if !ok {
				return errors.New("connection reset by peer")
			}
			seen(h)
		}
	}
}

func (f *fakeHealth) counts(host string) (opened, closed int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened[host], f.closed[host]
}

// A stream that breaks makes the controller look at the database at once
// and says since when the instance is lost; a poll that finds it ready
// clears that; a pod gone closes its stream.
func TestHealthStreamsSayLossesBetweenPolls(t *testing.T) {
	fake := &fakeHealth{}
	enqueued := make(chan cache.ObjectName, 10)
	clockNow := now
	var mu sync.Mutex
	h := &healthWatches{client: fake, enqueue: func(k cache.ObjectName) { enqueued <- k },
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clockNow }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.start(ctx)
	db := cache.ObjectName{Namespace: "default", Name: "shop"}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop-0", UID: "pod-1"}, Status: corev1.PodStatus{PodIP: "10.0.0.1"}}
	h.watch(db, pod, api.Auth{Name: "shop-0"})
	h.watch(db, pod, api.Auth{Name: "shop-0"}) // each poll asks again: one stream
	ready := api.Health{Ready: true, Role: api.RolePrimary, Primary: "shop-0", EngineRunning: true}
	send := func(x api.Health) {
		t.Helper()
		select {
		case fake.stream("10.0.0.1") <- x:
		case <-time.After(5 * time.Second):
			t.Fatal("nobody reads the stream")
		}
	}
	expectEnqueued := func(what string) {
		t.Helper()
		select {
		case k := <-enqueued:
			if k != db {
				t.Fatalf("%s: enqueued %v", what, k)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the database was not enqueued", what)
		}
	}
	expectQuiet := func(what string) {
		t.Helper()
		select {
		case <-enqueued:
			t.Fatalf("%s: enqueued", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	setClock := func(t time.Time) {
		mu.Lock()
		defer mu.Unlock()
		clockNow = t
	}
	send(ready)
	setClock(now.Add(time.Minute))
	send(ready)
	expectQuiet("ready, then ready again")
	if lost := h.lostSince(db); lost != nil {
		t.Fatalf("lost %v while ready", lost)
	}

	// A break 200 ms after the last line: lost then.
	setClock(now.Add(time.Minute + 200*time.Millisecond))
	fake.breakStream("10.0.0.1")
	expectEnqueued("the stream broke")
	if lost := h.lostSince(db); !lost["shop-0"].Equal(now.Add(time.Minute + 200*time.Millisecond)) {
		t.Fatalf("lostSince %v, want shop-0 since the break", lost)
	}
	// The stream comes back (healthRetry later) and says not ready.
	setClock(now.Add(2 * time.Minute))
	send(api.Health{Ready: false, Reason: "the engine is not running", Role: api.RolePrimary, Primary: "shop-0"})
	expectEnqueued("unready after the break")
	if lost := h.lostSince(db); !lost["shop-0"].Equal(now.Add(time.Minute + 200*time.Millisecond)) {
		t.Fatalf("lostSince %v, want still since the break", lost)
	}
	send(ready)
	expectEnqueued("ready again")
	if lost := h.lostSince(db); lost != nil {
		t.Fatalf("lost %v once ready again", lost)
	}
	// A stream noticed quiet (api.HealthDeadline after its last line):
	// lost when its next line was due.
	setClock(now.Add(3*time.Minute + api.HealthDeadline))
	fake.breakStream("10.0.0.1")
	expectEnqueued("broke again")
	if lost := h.lostSince(db); !lost["shop-0"].Equal(now.Add(2*time.Minute + api.HealthInterval)) {
		t.Fatalf("lostSince %v, want shop-0 since its next line was due", lost)
	}
	h.polled(db, []*corev1.Pod{pod}, map[string]bool{"shop-0": true})
	if lost := h.lostSince(db); lost != nil {
		t.Fatalf("lost %v after a poll found it ready", lost)
	}
	// A CA rotation changes the controller's credentials: the stream
	// opened with the old ones is replaced.
	before, _ := fake.counts("10.0.0.1")
	h.watch(db, pod, api.Auth{Name: "shop-0", Credentials: &api.Credentials{ID: "rotated"}})
	send(ready)
	fake.mu.Lock()
	used := fake.credentials["10.0.0.1"]
	fake.mu.Unlock()
	if opened, _ := fake.counts("10.0.0.1"); opened != before+1 || used != "rotated" {
		t.Fatalf("%d streams opened after new credentials (want %d), the last with credentials %q (want the rotated ones)", opened, before+1, used)
	}
	h.polled(db, nil, nil)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if opened, closed := fake.counts("10.0.0.1"); opened == closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stream of a pod gone is still open")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(healthRetry + 200*time.Millisecond)
	if opened, closed := fake.counts("10.0.0.1"); opened != 3 || closed != 3 {
		t.Errorf("%d streams opened, %d closed; want 3 (one, one after the first break, one with new credentials), none after the pod went", opened, closed)
	}
}

// A database whose every instance streams a digest is settled (polled only
// to resync); a digest that changes asks for a poll within the poll
// interval, not at once; a stream gone quiet, a lost instance or one
// without a stream is not settled. The positions the lines said outlive a
// lost instance, until the primary changes.
func TestHealthStreamsSettleADatabase(t *testing.T) {
	fake := &fakeHealth{}
	enqueued := make(chan cache.ObjectName, 10)
	soon := make(chan cache.ObjectName, 10)
	clockNow := now
	var mu sync.Mutex
	h := &healthWatches{client: fake, enqueue: func(k cache.ObjectName) { enqueued <- k }, soon: func(k cache.ObjectName) { soon <- k },
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clockNow }}
	setClock := func(t time.Time) {
		mu.Lock()
		defer mu.Unlock()
		clockNow = t
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.start(ctx)
	db := cache.ObjectName{Namespace: "default", Name: "shop"}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "shop-0", UID: "pod-0"}, Status: corev1.PodStatus{PodIP: "10.0.0.1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "shop-1", UID: "pod-1"}, Status: corev1.PodStatus{PodIP: "10.0.0.2"}},
	}
	send := func(host string, x api.Health) {
		t.Helper()
		select {
		case fake.stream(host) <- x:
		case <-time.After(5 * time.Second):
			t.Fatal("nobody reads the stream")
		}
	}
	// The line is read once the next send is taken; this one syncs.
	flush := func(host string, x api.Health) { t.Helper(); send(host, x); send(host, x) }
	h.watch(db, pods[0], api.Auth{Name: "shop-0"})
	if h.settled(db, pods) {
		t.Fatal("settled with no line from any instance")
	}
	primary := api.Health{Ready: true, Role: api.RolePrimary, Primary: "shop-0", EngineRunning: true, Digest: "d0",
		Position: &api.Position{Timeline: 1, LSN: "0/3000000"}}
	replica := api.Health{Ready: true, Role: api.RoleReplica, Primary: "shop-0", EngineRunning: true, Digest: "d1",
		Position: &api.Position{Timeline: 1, LSN: "0/2000000"}}
	flush("10.0.0.1", primary)
	if h.settled(db, pods) {
		t.Fatal("settled with no stream to shop-1")
	}
	h.watch(db, pods[1], api.Auth{Name: "shop-1"})
	flush("10.0.0.2", replica)
	if !h.settled(db, pods) {
		t.Fatal("not settled though every instance streams")
	}
	// Only the position moves: nothing to do.
	moved := replica
	moved.Position = &api.Position{Timeline: 1, LSN: "0/2800000"}
	flush("10.0.0.2", moved)
	select {
	case <-enqueued:
		t.Fatal("a position that moved enqueued the database")
	case <-soon:
		t.Fatal("a position that moved asked for a poll")
	default:
	}
	if p := h.positions(db)["shop-1"]; p.LSN != "0/2800000" {
		t.Errorf("shop-1's streamed position %+v, want 0/2800000", p)
	}
	// The digest changes (a backup finished, say): a poll within the
	// interval.
	changed := moved
	changed.Digest = "d1-backup-done"
	flush("10.0.0.2", changed)
	select {
	case k := <-soon:
		if k != db {
			t.Fatalf("asked a poll of %v", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a new digest asked for no poll")
	}
	select {
	case <-enqueued:
		t.Fatal("a new digest enqueued the database at once")
	default:
	}
	// A manager that predates digests cannot settle its database.
	old := changed
	old.Digest = ""
	flush("10.0.0.2", old)
	if h.settled(db, pods) {
		t.Fatal("settled with a stream that says no digest")
	}
	flush("10.0.0.2", changed)
	// A stream quiet for longer than its deadline is not settled, even
	// before its reader notices.
	setClock(now.Add(api.HealthDeadline + time.Second))
	if h.settled(db, pods) {
		t.Fatal("settled with streams silent past their deadline")
	}
	setClock(now)
	if !h.settled(db, pods) {
		t.Fatal("not settled again")
	}
	// shop-1 is lost: its last streamed position stays.
	fake.breakStream("10.0.0.2")
	select {
	case <-enqueued:
	case <-time.After(5 * time.Second):
		t.Fatal("a broken stream did not enqueue the database")
	}
	if h.settled(db, pods) {
		t.Fatal("settled with a lost instance")
	}
	if p := h.positions(db)["shop-1"]; p.LSN != "0/2800000" {
		t.Errorf("a lost instance's streamed position %+v, want its last, 0/2800000", p)
	}
	h.forgetPositions(db)
	if p := h.positions(db); p != nil {
		t.Errorf("positions %v after the primary changed", p)
	}
}

// A poll that finds an instance gone gives it the further of its last
// polled and its last streamed position.
func TestPositionMemoryTakesTheFurtherOfPollAndStream(t *testing.T) {
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "shop", UID: "db-1"}}
	var m positionMemory
	polled := []examplev1.InstanceStatus{{Name: "shop-1", Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/2000000"}}}
	m.carry(db, polled, nil)
	lost := []examplev1.InstanceStatus{{Name: "shop-1"}}
	m.carry(db, lost, map[string]api.Position{"shop-1": {Timeline: 1, LSN: "0/2800000"}})
	if p := lost[0].Position; p == nil || p.LSN != "0/2800000" {
		t.Fatalf("position %+v, want the streamed 0/2800000", p)
	}
	lost = []examplev1.InstanceStatus{{Name: "shop-1"}}
	m.carry(db, lost, map[string]api.Position{"shop-1": {Timeline: 1, LSN: "0/1000000"}})
	if p := lost[0].Position; p == nil || p.LSN != "0/2800000" {
		t.Fatalf("position %+v, want the remembered 0/2800000 over an older streamed one", p)
	}
}

// A manager its stream says is lost gets a short poll: a frozen one would
// otherwise hold the confirming poll, and the deciding one, for the whole
// status timeout each.
func TestALostInstanceIsPolledBriefly(t *testing.T) {
	if got := pollTimeout(false); got != statusTimeout {
		t.Errorf("an instance not lost: %s, want %s", got, statusTimeout)
	}
	if got := pollTimeout(true); got >= statusTimeout || got < api.HealthInterval {
		t.Errorf("a lost instance: %s, want below %s and at least a health interval (%s)", got, statusTimeout, api.HealthInterval)
	}
}

// An instance unready as a replica, then unready as the primary (a
// promotion's own moments), is lost as the primary only since the line
// that said the new role; a ready line clears the loss.
func TestAChangeOfRoleStartsTheLossAgain(t *testing.T) {
	fake := &fakeHealth{}
	clockNow := now
	var mu sync.Mutex
	h := &healthWatches{client: fake, enqueue: func(cache.ObjectName) {},
		now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clockNow }}
	setClock := func(t time.Time) { mu.Lock(); defer mu.Unlock(); clockNow = t }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.start(ctx)
	db := cache.ObjectName{Namespace: "default", Name: "shop"}
	h.watch(db, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop-1", UID: "pod-1"}, Status: corev1.PodStatus{PodIP: "10.0.0.2"}}, api.Auth{Name: "shop-1"})
	send := func(x api.Health) {
		t.Helper()
		for range 2 { // the second is taken once the first was read
			select {
			case fake.stream("10.0.0.2") <- x:
			case <-time.After(5 * time.Second):
				t.Fatal("nobody reads the stream")
			}
		}
	}
	send(api.Health{Ready: false, Role: api.RoleReplica, Primary: "shop-0"})
	setClock(now.Add(10 * time.Second))
	send(api.Health{Ready: false, Role: api.RoleReplica, Primary: "shop-0"})
	if lost := h.lostSince(db)["shop-1"]; !lost.Equal(now) {
		t.Fatalf("unready replica lost since %v, want since its first unready line %v", lost, now)
	}
	setClock(now.Add(20 * time.Second))
	send(api.Health{Ready: false, Role: api.RolePrimary, Primary: "shop-1"})
	if lost := h.lostSince(db)["shop-1"]; !lost.Equal(now.Add(20 * time.Second)) {
		t.Fatalf("after the promotion lost since %v, want since the first line as primary", lost)
	}
	send(api.Health{Ready: true, Role: api.RolePrimary, Primary: "shop-1"})
	if lost := h.lostSince(db); lost != nil {
		t.Fatalf("lost %v once ready", lost)
	}
}
