package runner

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
}

func TestProcessNextRetriesFailuresAndForgetsSuccesses(t *testing.T) {
	q := newQueue()
	defer q.ShutDown()
	calls := 0
	sync := func(_ context.Context, key string) error {
		calls++
		if calls == 1 {
			return errors.New("conflict")
		}
		return nil
	}
	q.Add("db")
	if !ProcessNext(context.Background(), q, sync) {
		t.Fatal("queue shut down")
	}
	if n := q.NumRequeues("db"); n != 1 {
		t.Fatalf("after a failure the key was requeued %d times, want 1", n)
	}
	// The retry arrives after the backoff.
	if !ProcessNext(context.Background(), q, sync) {
		t.Fatal("queue shut down")
	}
	if calls != 2 || q.NumRequeues("db") != 0 || q.Len() != 0 {
		t.Errorf("calls %d, requeues %d, queued %d; want the retry to succeed and be forgotten", calls, q.NumRequeues("db"), q.Len())
	}
}

func TestProcessNextRecoversAPanic(t *testing.T) {
	q := newQueue()
	defer q.ShutDown()
	q.Add("bad")
	ProcessNext(context.Background(), q, func(context.Context, string) error {
		var m map[string]int
		m["x"]++ // a nil map write panics
		return nil
	})
	if n := q.NumRequeues("bad"); n != 1 {
		t.Errorf("a panicking key was requeued %d times, want 1 (backed off like a failure)", n)
	}
}

func TestRecoveredNamesTheKeyAndPanic(t *testing.T) {
	err := recovered(context.Background(), "ns/db", func(context.Context, string) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "panic while syncing ns/db: boom") {
		t.Errorf("recovered() = %v", err)
	}
}

func TestRunWorkersStopsAndShutsTheQueueDown(t *testing.T) {
	q := newQueue()
	var synced atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunWorkers(ctx, q, 2, func(context.Context, string) error { synced.Add(1); return nil })
	}()
	q.Add("a")
	q.Add("b")
	deadline := time.Now().Add(5 * time.Second)
	for synced.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if synced.Load() != 2 {
		t.Fatalf("synced %d keys, want 2", synced.Load())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunWorkers did not return")
	}
	if !q.ShuttingDown() {
		t.Error("the queue was not shut down")
	}
}
