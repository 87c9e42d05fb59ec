package instance

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestStatusSamples(t *testing.T) {
	lag, lagBytes := 1.5, int64(4096)
	archived := time.Unix(1700000000, 0)
	values := func(s api.Status) map[string]float64 {
		out := map[string]float64{}
		for _, sample := range StatusSamples(s) {
			out[sample.Name] = sample.Value
		}
		return out
	}
	replica := values(api.Status{Engine: "postgres", Role: api.RoleReplica, Ready: true, EngineRunning: true, Streaming: true,
		LagSeconds: &lag, LagBytes: &lagBytes, Restarts: 2})
	for name, want := range map[string]float64{"mydb_instance_ready": 1, "mydb_instance_primary": 0, "mydb_replication_streaming": 1,
		"mydb_replication_lag_seconds": 1.5, "mydb_replication_lag_bytes": 4096, "mydb_engine_restarts_total": 2, "mydb_engine_running": 1} {
		if got, ok := replica[name]; !ok || got != want {
			t.Errorf("replica: %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if _, ok := replica["mydb_replication_sync_replicas"]; ok {
		t.Error("a replica reports sync replicas")
	}
	primary := values(api.Status{Engine: "mariadb", Role: api.RolePrimary, Ready: true, EngineRunning: true, Synchronous: true, SyncReplicas: 1,
		Archive: &api.ArchiveStatus{Configured: true, Archived: 7, Pending: 3, LastArchivedTime: &archived}})
	for name, want := range map[string]float64{"mydb_instance_primary": 1, "mydb_replication_synchronous": 1, "mydb_replication_sync_replicas": 1,
		"mydb_wal_archive_archived_total": 7, "mydb_wal_archive_pending_files": 3, "mydb_wal_archive_last_archived_timestamp_seconds": 1700000000} {
		if got, ok := primary[name]; !ok || got != want {
			t.Errorf("primary: %s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"mydb_replication_lag_seconds", "mydb_replication_streaming", "mydb_wal_archive_last_failure_timestamp_seconds"} {
		if _, ok := primary[name]; ok {
			t.Errorf("primary: %s present", name)
		}
	}
}

// countingMetricsReader counts the reads that reach the engine.
type countingMetricsReader struct {
	reads atomic.Int32
	err   error
}

func (r *countingMetricsReader) Metrics(context.Context) ([]Sample, error) {
	r.reads.Add(1)
	time.Sleep(50 * time.Millisecond)
	return []Sample{{Name: "pg_up", Value: 1}}, r.err
}

func TestAFloodOfScrapesReadsTheEngineOnceASecond(t *testing.T) {
	var share metricsShare
	reader := &countingMetricsReader{}
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			samples, err := share.read(context.Background(), metricsReadAge, reader.Metrics)
			if err != nil || len(samples) != 1 {
				t.Errorf("read: %v, %v", samples, err)
			}
		}()
	}
	wg.Wait()
	if got := reader.reads.Load(); got != 1 {
		t.Errorf("200 scrapes at once read the engine %d times, want 1", got)
	}
	time.Sleep(metricsReadAge + 10*time.Millisecond)
	reader.err = errors.New("engine gone")
	if _, err := share.read(context.Background(), metricsReadAge, reader.Metrics); err == nil || reader.reads.Load() != 2 {
		t.Errorf("a scrape after a second: err %v, reads %d; want a new read and its error", err, reader.reads.Load())
	}
}

func TestSamplesBecomeMetrics(t *testing.T) {
	for _, s := range []Sample{
		{Name: "mysql_global_status_commands_total", Type: Counter, Value: 3, Labels: []string{"command", "commit"}},
		{Name: "mysql_global_status_uptime", Type: Untyped, Value: 9},
		{Name: "pg_up", Value: 1},
	} {
		m, err := s.constMetric()
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if _, ok := m.(prometheus.Metric); !ok {
			t.Fatalf("%s: not a metric", s.Name)
		}
	}
	if _, err := (Sample{Name: "x", Labels: []string{"odd"}}).constMetric(); err == nil {
		t.Error("an odd label list made a metric")
	}
}
