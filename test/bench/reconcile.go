package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// runReconcile creates n MyDatabases from concurrency clients and measures,
// for each, the time from the create request to the StatefulSet's ADDED
// event on a watch: the controller's reaction time as a user sees it.
func runReconcile(ctx context.Context, cfg *rest.Config, n, concurrency int, out io.Writer) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	mydb, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := fmt.Sprintf("bench-reconcile-%d", time.Now().Unix())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()

	w, err := kube.AppsV1().StatefulSets(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()

	var mu sync.Mutex
	created := make(map[string]time.Time, n)
	seen := make(map[string]time.Time, n)
	names := make(chan string)
	go func() {
		defer close(names)
		for i := 0; i < n; i++ {
			select {
			case names <- fmt.Sprintf("db-%05d", i):
			case <-ctx.Done():
				return
			}
		}
	}()
	start := time.Now()
	errs := make(chan error, concurrency)
	var wg sync.WaitGroup
	for c := 0; c < concurrency; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				db := &examplev1.MyDatabase{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, Replicas: ptr.To[int32](1),
						StorageSize: resource.MustParse("1Gi")},
				}
				t := time.Now()
				if _, err := mydb.ExampleV1().MyDatabases(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				created[name] = t
				mu.Unlock()
			}
		}()
	}

	for len(seen) < n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("statefulset watch closed after %d of %d", len(seen), n)
			}
			if ev.Type != watch.Added {
				continue
			}
			sts := ev.Object.(*appsv1.StatefulSet)
			if _, dup := seen[sts.Name]; dup {
				return fmt.Errorf("statefulset %s added twice", sts.Name)
			}
			seen[sts.Name] = time.Now()
		case err := <-errs:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%d of %d statefulsets after %s: %w", len(seen), n, time.Since(start), ctx.Err())
		}
	}
	total := time.Since(start)
	wg.Wait()

	latencies := make([]time.Duration, 0, n)
	for name, t := range seen {
		latencies = append(latencies, t.Sub(created[name]))
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	fmt.Fprintf(out, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(out, "| MyDatabases | %d (%d clients) |\n", n, concurrency)
	fmt.Fprintf(out, "| create -> StatefulSet p50 | %s |\n", percentile(latencies, 0.50).Round(time.Millisecond))
	fmt.Fprintf(out, "| create -> StatefulSet p99 | %s |\n", percentile(latencies, 0.99).Round(time.Millisecond))
	fmt.Fprintf(out, "| create -> StatefulSet max | %s |\n", latencies[len(latencies)-1].Round(time.Millisecond))
	fmt.Fprintf(out, "| all %d StatefulSets exist after | %s |\n", n, total.Round(time.Millisecond))
	return nil
}

// percentile returns the p-quantile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
