package main

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/test/stats"
)

// results holds every figure of a run as samples, one per repetition, under
// a key such as "create/c16/aggregated/rate". The report quotes the median.
type results struct {
	mu      sync.Mutex
	samples map[string][]float64
	notes   map[string]string
}

func newResults() *results {
	return &results{samples: map[string][]float64{}, notes: map[string]string{}}
}

func (r *results) add(key string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples[key] = append(r.samples[key], v)
}

func (r *results) note(key, v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes[key] = v
}

// med returns the median of a key's samples and whether it has any.
func (r *results) med(key string) (float64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.samples[key]
	if len(s) == 0 {
		return 0, false
	}
	return median(s), true
}

func (r *results) n(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.samples[key])
}

func median(s []float64) float64 {
	c := append([]float64(nil), s...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// addLatencies records the p50 and p99 (in milliseconds) of one repetition.
func (r *results) addLatencies(prefix string, lats []time.Duration) {
	sortDurations(lats)
	r.add(prefix+"/p50", ms(stats.Percentile(lats, 50)))
	r.add(prefix+"/p99", ms(stats.Percentile(lats, 99)))
}

func sortDurations(d []time.Duration) {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fmtMs prints milliseconds with a precision that suits their size.
func fmtMs(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func fmtBytes(v float64) string {
	if v < 0 {
		return "-" + fmtBytes(-v)
	}
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", v)
	}
}

// rotate returns s rotated left by k, so that no target always runs first.
func rotate[T any](s []T, k int) []T {
	if len(s) == 0 {
		return s
	}
	k %= len(s)
	return append(append([]T(nil), s[k:]...), s[:k]...)
}
