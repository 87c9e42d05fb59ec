// Package stats has the one percentile the test suites and the bench
// report figures with.
package stats

import (
	"math"
	"slices"
	"time"
)

// Percentile is the p-th percentile (p in 0-100) of ds by the nearest-rank
// method: the smallest value that at least p percent of ds are at or below.
// ds need not be sorted and is left as it is; it is 0 for no values.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
