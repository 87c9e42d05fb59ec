package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/test/stats"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// scenarioReconcile measures mydb's controller as a user sees it: the time
// from a MyDatabase's create request (through the aggregator) to its
// StatefulSet's ADDED event on a watch. The burst creates -reconcile-n
// objects from -concurrency clients at once; the paced run creates
// -reconcile-paced-n at -reconcile-rate per second.
func (e *env) scenarioReconcile(ctx context.Context) error {
	type run struct {
		key  string
		n    int
		rate float64
	}
	runs := []run{{"burst", e.o.reconcileN, 0}}
	if e.o.reconcilePacedN > 0 && e.o.reconcileRate > 0 {
		runs = append(runs, run{"paced", e.o.reconcilePacedN, e.o.reconcileRate})
	}
	for rep := 0; rep < e.o.reconcileReps; rep++ {
		for _, r := range runs {
			key := "reconcile/" + r.key
			lats, total, stsRate, err := e.reconcileOnce(ctx, fmt.Sprintf("reconcile-%s-%d", r.key, rep), key, r.n, r.rate, rep == 0 && r.rate == 0)
			if err != nil {
				return fmt.Errorf("reconcile %s: %w", r.key, err)
			}
			e.res.addLatencies(key, lats)
			e.res.add(key+"/max", ms(lats[len(lats)-1]))
			e.res.add(key+"/total", ms(total))
			e.res.add(key+"/sts-rate", stsRate)
			e.logf("reconcile %s rep %d: %d MyDatabases, create->StatefulSet p50 %s p99 %s, all after %s, StatefulSets at %.1f/s",
				r.key, rep, r.n, fmtMs(ms(stats.Percentile(lats, 50))), fmtMs(ms(stats.Percentile(lats, 99))), fmtMs(ms(total)), stsRate)
			// the children and their pods must be gone before the next run
			e.deleteNamespaces(ctx, 10*time.Minute)
		}
	}
	return nil
}

// reconcileOnce creates n MyDatabases (paced at rate per second when rate
// > 0) and returns, sorted, each one's create -> StatefulSet latency, the
// time until all StatefulSets existed and the rate at which they appeared.
// It records under key the status writes each database cost until it was
// rolled out (countStatusWrites).
func (e *env) reconcileOnce(ctx context.Context, purpose, key string, n int, rate float64, profile bool) ([]time.Duration, time.Duration, float64, error) {
	ns, err := e.namespace(ctx, purpose)
	if err != nil {
		return nil, 0, 0, err
	}
	w, err := e.kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	defer w.Stop()
	dbWatch, err := e.directDB.ExampleV1().MyDatabases(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	defer dbWatch.Stop()
	writes := countStatusWrites(dbWatch, n)
	defer func() {
		select {
		case c := <-writes:
			e.recordStatusWrites(key, c, n)
		case <-time.After(3 * time.Minute):
			e.logf("%s: not every MyDatabase had rolled out within 3 min of its StatefulSet; status writes not counted", purpose)
		case <-ctx.Done():
		}
	}()

	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	seen := make(map[string]time.Time, n)
	errs := make(chan error, e.o.concurrency)
	sem := make(chan struct{}, e.o.concurrency)
	start := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			if rate > 0 {
				if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
					time.Sleep(d)
				}
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func(name string) {
				defer func() { <-sem }()
				db := &examplev1.MyDatabase{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, Replicas: ptr.To[int32](1),
						StorageSize: resource.MustParse("1Gi")},
				}
				t := time.Now()
				mu.Lock()
				created[name] = t
				mu.Unlock()
				if _, err := e.aggDB.ExampleV1().MyDatabases(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}(fmt.Sprintf("db-%05d", i))
		}
	}()
	if profile {
		go e.goroutineProfile(ctx, start)
	}

	var first time.Time
	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, 0, 0, fmt.Errorf("statefulset watch closed after %d of %d", len(seen), n)
			}
			if ev.Type != watch.Added {
				continue
			}
			sts := ev.Object.(*appsv1.StatefulSet)
			if _, dup := seen[sts.Name]; dup {
				return nil, 0, 0, fmt.Errorf("statefulset %s added twice", sts.Name)
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			seen[sts.Name] = now
		case err := <-errs:
			return nil, 0, 0, err
		case <-ctx.Done():
			return nil, 0, 0, fmt.Errorf("%d of %d statefulsets after %s: %w", len(seen), n, time.Since(start), ctx.Err())
		}
	}
	total := time.Since(start)

	mu.Lock()
	defer mu.Unlock()
	latencies := make([]time.Duration, 0, n)
	var last time.Time
	for name, t := range seen {
		latencies = append(latencies, t.Sub(created[name]))
		if t.After(last) {
			last = t
		}
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	stsRate := 0.0
	if d := last.Sub(first).Seconds(); d > 0 {
		stsRate = float64(n-1) / d
	}
	return latencies, total, stsRate, nil
}

// countStatusWrites counts, from a watch started before the creates, the
// MODIFIED events of each MyDatabase up to the one that says it rolled out: nothing
// but the controller writes a MyDatabase in this scenario, and only its
// status. It sends the counts once n databases had rolled out.
func countStatusWrites(w watch.Interface, n int) <-chan []int {
	out := make(chan []int, 1)
	go func() {
		modified := map[string]int{}
		ready := map[string]bool{}
		var counts []int
		for ev := range w.ResultChan() {
			db, ok := ev.Object.(*examplev1.MyDatabase)
			if !ok || ev.Type != watch.Modified || ready[db.Name] {
				continue
			}
			modified[db.Name]++
			for _, c := range db.Status.Conditions {
				// kwok's pods run no engine: a database there is never
				// Ready, and its way ends when it has rolled out.
				if c.Type == examplev1.ConditionProgressing && c.Status == metav1.ConditionFalse && c.Reason == "RolloutComplete" {
					ready[db.Name] = true
					counts = append(counts, modified[db.Name])
				}
			}
			if len(counts) == n {
				out <- counts
				return
			}
		}
	}()
	return out
}

func (e *env) recordStatusWrites(key string, counts []int, n int) {
	sort.Ints(counts)
	sum := 0
	for _, c := range counts {
		sum += c
	}
	mean := float64(sum) / float64(len(counts))
	e.res.add(key+"/status-writes/mean", mean)
	e.res.add(key+"/status-writes/max", float64(counts[len(counts)-1]))
	e.logf("%s: status writes per MyDatabase from create to rolled out: mean %.2f, median %d, max %d (%d databases)",
		key, mean, counts[len(counts)/2], counts[len(counts)-1], n)
}

// goroutineProfile takes mydb-apiserver's goroutine profile a few seconds
// into the burst and counts where the controller's workers wait.
func (e *env) goroutineProfile(ctx context.Context, start time.Time) {
	time.Sleep(time.Until(start.Add(4 * time.Second)))
	raw, err := e.directREST.Get().AbsPath("/debug/pprof/goroutine").Param("debug", "1").DoRaw(ctx)
	if err != nil {
		e.logf("goroutine profile: %v", err)
		return
	}
	if e.o.profileDir != "" && os.MkdirAll(e.o.profileDir, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(e.o.profileDir, "goroutine-mydb-apiserver-reconcile.txt"), raw, 0o644)
	}
	// debug=1 groups identical stacks: "N @ 0x..." followed by the frames.
	head := regexp.MustCompile(`^(\d+) @`)
	var summary []string
	for _, block := range strings.Split(string(raw), "\n\n") {
		m := head.FindStringSubmatch(block)
		if m == nil || !strings.Contains(block, "pkg/controller/mydatabase") {
			continue
		}
		// the innermost frame of our own code and the innermost frame overall
		var inner, own string
		for _, line := range strings.Split(block, "\n") {
			if !strings.HasPrefix(line, "#\t") {
				continue
			}
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			if inner == "" {
				inner = f[2]
			}
			if own == "" && strings.Contains(f[2], "mydb-dev/mydb/pkg/controller") {
				own = f[2]
			}
		}
		via := ""
		if strings.Contains(block, "flowcontrol") {
			via = " (client-go rate limiter)"
		}
		summary = append(summary, fmt.Sprintf("%s goroutines in %s <- %s%s", m[1], shortFunc(inner), shortFunc(own), via))
	}
	e.res.note("profile/reconcile/goroutines", strings.Join(summary, "\n"))
}

func shortFunc(f string) string {
	if i := strings.LastIndex(f, "/"); i >= 0 {
		return f[i+1:]
	}
	return f
}
