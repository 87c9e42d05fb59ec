package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mydb-dev/mydb/test/stats"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
)

// scenarioWatch opens -watchers watches on a namespace, creates
// -watch-events objects in it one after the other, and measures for every
// delivery the time from the create request being sent to the ADDED event
// arriving at a watcher.
func (e *env) scenarioWatch(ctx context.Context) error {
	names := []string{tAggregated, tDirect, tCRD}
	nss := map[string]string{}
	for _, tn := range names {
		ns, err := e.namespace(ctx, "watch-"+tn)
		if err != nil {
			return err
		}
		nss[tn] = ns
	}
	for rep := 0; rep < e.o.reps; rep++ {
		for _, tn := range rotate(names, rep) {
			lats, missing, err := e.watchOnce(ctx, e.targets[tn], nss[tn], fmt.Sprintf("w%d", rep))
			if err != nil {
				return fmt.Errorf("watch %s: %w", tn, err)
			}
			e.res.addLatencies("watch/"+tn, lats)
			e.res.add("watch/"+tn+"/missing", float64(missing))
			e.logf("watch %-10s rep %d: %d deliveries, p50 %s p99 %s, %d missing", tn, rep, len(lats),
				fmtMs(ms(stats.Percentile(lats, 50))), fmtMs(ms(stats.Percentile(lats, 99))), missing)
			if err := e.targets[tn].deleteAll(ctx, nss[tn]); err != nil {
				return err
			}
			e.waitControllerIdle(ctx)
		}
	}
	return nil
}

func (e *env) watchOnce(ctx context.Context, t target, ns, prefix string) ([]time.Duration, int, error) {
	var sent sync.Map // name -> time.Time
	var mu sync.Mutex
	var lats []time.Duration
	var delivered atomic.Int64
	want := int64(e.o.watchers * e.o.watchEvents)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < e.o.watchers; i++ {
		w, err := t.watch(wctx, ns)
		if err != nil {
			return nil, 0, err
		}
		wg.Add(1)
		go func(w watch.Interface) {
			defer wg.Done()
			defer w.Stop()
			local := make([]time.Duration, 0, e.o.watchEvents)
			defer func() {
				mu.Lock()
				lats = append(lats, local...)
				mu.Unlock()
			}()
			for {
				select {
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					now := time.Now()
					if ev.Type != watch.Added {
						continue
					}
					m, err := meta.Accessor(ev.Object)
					if err != nil {
						continue
					}
					if at, ok := sent.Load(m.GetName()); ok {
						local = append(local, now.Sub(at.(time.Time)))
						delivered.Add(1)
					}
				case <-wctx.Done():
					return
				}
			}
		}(w)
	}
	for i := 0; i < e.o.watchEvents; i++ {
		name := fmt.Sprintf("%s-%05d", prefix, i)
		sent.Store(name, time.Now())
		if err := t.create(ctx, ns, name); err != nil {
			return nil, 0, err
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for delivered.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	return lats, int(want - int64(len(lats))), nil
}
