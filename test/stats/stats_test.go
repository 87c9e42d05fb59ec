package stats

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range n {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	unsorted := ms(5, 1, 4, 2, 3, 10, 9, 8, 7, 6)
	for _, tc := range []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 99, 7 * time.Millisecond},
		{unsorted, 50, 5 * time.Millisecond},
		{unsorted, 99, 10 * time.Millisecond},
		{unsorted, 100, 10 * time.Millisecond},
		{unsorted, 10, 1 * time.Millisecond},
		{unsorted, 11, 2 * time.Millisecond},
		{unsorted, 0, 1 * time.Millisecond},
	} {
		if got := Percentile(tc.ds, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %s, want %s", tc.ds, tc.p, got, tc.want)
		}
	}
	if unsorted[0] != 5*time.Millisecond {
		t.Error("Percentile sorted its argument")
	}
}
