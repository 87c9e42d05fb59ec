package mydatabase

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
