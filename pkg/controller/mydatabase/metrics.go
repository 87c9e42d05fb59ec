package mydatabase

import (
	"sync"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	// Registers workqueue depth, latency and retry metrics for every named queue.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

var (
	reconcileDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem:      "mydb_controller",
		Name:           "reconcile_duration_seconds",
		Help:           "Time to reconcile one MyDatabase, by result.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 15),
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	registerMetrics sync.Once
)

// RegisterMetrics adds the controller's metrics to the server's /metrics.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(reconcileDuration)
	})
}

func observeReconcile(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	reconcileDuration.WithLabelValues(result).Observe(d.Seconds())
}
