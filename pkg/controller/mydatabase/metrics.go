package mydatabase

import (
	"slices"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"k8s.io/client-go/tools/cache"

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

	instanceLabels = []string{"namespace", "database", "instance"}
	instanceReady  = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "mydb_instance",
		Name:           "ready",
		Help:           "1 when the instance serves the role mydb gave it, 0 otherwise, as its manager last reported.",
		StabilityLevel: metrics.ALPHA,
	}, instanceLabels)
	instanceLagSeconds = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "mydb_instance",
		Name:           "replication_lag_seconds",
		Help:           "How far a replica is behind its primary in time, as its manager last reported.",
		StabilityLevel: metrics.ALPHA,
	}, instanceLabels)
	instanceLagBytes = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem:      "mydb_instance",
		Name:           "replication_lag_bytes",
		Help:           "How much WAL a Postgres replica has yet to replay, as its manager last reported.",
		StabilityLevel: metrics.ALPHA,
	}, instanceLabels)

	primaryChanges = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem:      "mydb_controller",
		Name:           "primary_changes_total",
		Help:           "Switchovers and failovers the controller carried out or gave up, by kind (switchover, failover) and result (completed, aborted, forced).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"namespace", "database", "kind", "result"})
	primaryChangeSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: "mydb_controller",
		Name:      "primary_change_duration_seconds",
		Help: "How long a primary change took: a switchover from its request to the promotion decision, " +
			"a failover from the primary first seen unready to the promotion decision.",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 12),
		StabilityLevel: metrics.ALPHA,
	}, []string{"kind", "result"})

	registerMetrics sync.Once
)

// series are the per-instance metrics the controller set.
var series instanceSeries

// instanceSeries remembers which instances of each database have series,
// so the series of an instance that is gone go too.
type instanceSeries struct {
	mu    sync.Mutex
	names map[cache.ObjectName][]string
}

// observeInstances sets the instance series of db from the managers'
// reports (nil for a manager that did not answer) and deletes those of
// instances it no longer has; no instances deletes them all.
func (s *instanceSeries) observeInstances(db cache.ObjectName, instances []examplev1.InstanceStatus, reports []*api.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	current := make([]string, 0, len(instances))
	for i, in := range instances {
		current = append(current, in.Name)
		labels := []string{db.Namespace, db.Name, in.Name}
		ready := 0.0
		if in.Ready {
			ready = 1
		}
		instanceReady.WithLabelValues(labels...).Set(ready)
		var r *api.Status
		if i < len(reports) {
			r = reports[i]
		}
		setLag(labels, r)
	}
	for _, name := range s.names[db] {
		if !slices.Contains(current, name) {
			for _, g := range []*metrics.GaugeVec{instanceReady, instanceLagSeconds, instanceLagBytes} {
				g.DeleteLabelValues(db.Namespace, db.Name, name)
			}
		}
	}
	if len(current) == 0 {
		delete(s.names, db)
		return
	}
	if s.names == nil {
		s.names = map[cache.ObjectName][]string{}
	}
	s.names[db] = current
}

// reset deletes every instance series.
func (s *instanceSeries) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range []*metrics.GaugeVec{instanceReady, instanceLagSeconds, instanceLagBytes} {
		g.Reset()
	}
	s.names = nil
}

// observeLag sets an instance's lag as a line of its health stream says
// it, between polls: only an instance observeInstances knows of, so a line
// of a pod just gone does not bring its series back.
func (s *instanceSeries) observeLag(db cache.ObjectName, pod string, h api.Health) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.names[db], pod) {
		return
	}
	setLag([]string{db.Namespace, db.Name, pod}, &api.Status{LagBytes: h.LagBytes, LagSeconds: h.LagSeconds})
}

// setLag sets an instance's lag gauges from r (deletes them where r says
// none).
func setLag(labels []string, r *api.Status) {
	setOrDelete(instanceLagSeconds, labels, r, func(r *api.Status) *float64 { return r.LagSeconds })
	setOrDelete(instanceLagBytes, labels, r, func(r *api.Status) *float64 {
		if r.LagBytes == nil {
			return nil
		}
		b := float64(*r.LagBytes)
		return &b
	})
}

func setOrDelete(g *metrics.GaugeVec, labels []string, r *api.Status, value func(*api.Status) *float64) {
	if r == nil || value(r) == nil {
		g.DeleteLabelValues(labels...)
		return
	}
	g.WithLabelValues(labels...).Set(*value(r))
}

// RegisterMetrics adds the controller's metrics to the server's /metrics.
func RegisterMetrics() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(reconcileDuration, instanceReady, instanceLagSeconds, instanceLagBytes, primaryChanges, primaryChangeSeconds)
	})
}

func observeReconcile(d time.Duration, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	reconcileDuration.WithLabelValues(result).Observe(d.Seconds())
}

// observePrimaryChange counts a switchover or failover and its duration.
func observePrimaryChange(db *examplev1.MyDatabase, kind, result string, d time.Duration) {
	primaryChanges.WithLabelValues(db.Namespace, db.Name, kind, result).Inc()
	primaryChangeSeconds.WithLabelValues(kind, result).Observe(d.Seconds())
}
