// Package runner holds what every mydb controller does the same way: event
// handlers that leave the shared informers when a leader's term ends, and
// workers that drain a rate-limited queue.
package runner

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Handlers are event handlers added to shared informers, removed together:
// the informers outlive a controller (a replica that loses the lease keeps
// its caches warm), so its handlers must not.
type Handlers struct {
	regs map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration
}

// Add adds handler to inf.
func (h *Handlers) Add(inf cache.SharedIndexInformer, handler cache.ResourceEventHandler) error {
	reg, err := inf.AddEventHandler(handler)
	if err != nil {
		return err
	}
	if h.regs == nil {
		h.regs = map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration{}
	}
	h.regs[inf] = reg
	return nil
}

// RemoveAll removes every handler Add added.
func (h *Handlers) RemoveAll() {
	for inf, reg := range h.regs {
		_ = inf.RemoveEventHandler(reg)
	}
	h.regs = nil
}

// Run waits until every informer has synced, queues every key initial
// returns (everything the caches hold is due once: a new leader takes over
// from wherever the last one stopped), then runs workers until ctx is done.
func Run[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], workers int,
	sync func(context.Context, K) error, initial func() ([]K, error), informers ...cache.SharedIndexInformer) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx)
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		queue.ShutDown()
		return fmt.Errorf("failed to wait for caches to sync")
	}
	if initial != nil {
		keys, err := initial()
		if err != nil {
			queue.ShutDown()
			return err
		}
		for _, key := range keys {
			queue.Add(key)
		}
	}
	logger.V(2).Info("Starting workers", "count", workers)
	RunWorkers(ctx, queue, workers, sync)
	return nil
}

// Keys are the names of objs, for Run's initial keys.
func Keys[T metav1.Object](objs []T) []cache.ObjectName {
	keys := make([]cache.ObjectName, 0, len(objs))
	for _, obj := range objs {
		keys = append(keys, cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
	return keys
}

// RunWorkers runs workers goroutines that call sync for each key of queue
// until ctx is done, then shuts the queue down. A key whose sync fails is
// retried with the queue's backoff; one that succeeds is forgotten.
func RunWorkers[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], workers int, sync func(context.Context, K) error) {
	defer queue.ShutDown()
	for i := 0; i < workers; i++ {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for ProcessNext(ctx, queue, sync) {
			}
		}, time.Second)
	}
	<-ctx.Done()
}

// ProcessNext takes the next key off queue and syncs it: a key whose sync
// fails (or panics) is retried with the queue's backoff, one that succeeds is
// forgotten. It returns false once the queue is shut down.
func ProcessNext[K comparable](ctx context.Context, queue workqueue.TypedRateLimitingInterface[K], sync func(context.Context, K) error) bool {
	key, shutdown := queue.Get()
	if shutdown {
		return false
	}
	defer queue.Done(key)
	if err := recovered(ctx, key, sync); err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Error syncing; requeuing for later retry", "key", key)
		queue.AddRateLimited(key)
		return true
	}
	queue.Forget(key)
	return true
}

// recovered is sync(ctx, key), with a panic turned into an error: one bad
// object backs off like any failing one instead of taking down the server,
// and then every next leader.
func recovered[K comparable](ctx context.Context, key K, sync func(context.Context, K) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic while syncing %v: %v\n%s", key, r, debug.Stack())
		}
	}()
	return sync(ctx, key)
}
