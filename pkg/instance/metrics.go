package instance

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// MetricType is a Sample's Prometheus type.
type MetricType int

const (
	Gauge MetricType = iota
	Counter
	// Untyped is what the widely used exporters declare for some figures
	// (mysqld_exporter's global status): kept, so queries that rely on it
	// see the same.
	Untyped
)

// Sample is one figure for /metrics. Drivers name theirs as the engine's
// widely used exporter does (postgres_exporter, mysqld_exporter), so the
// dashboards and alerts written for it work; the manager's own are
// mydb_*.
type Sample struct {
	Name, Help string
	Type       MetricType
	// Labels are name, value pairs.
	Labels []string
	Value  float64
}

// MetricsReader is implemented by drivers that read their engine's figures
// for /metrics: connections, transactions, sizes, replication. It may be
// called concurrently with the Manager's loop.
type MetricsReader interface {
	Metrics(ctx context.Context) ([]Sample, error)
}

// metricsReadAge is how old the figures a scrape gets may be: however many
// scrape at once or however often, the engine answers at most one read of
// them a second, on one of the admin connections.
const metricsReadAge = time.Second

// metricsShare shares the reads of the engine's figures: each scrape gets
// figures at most metricsReadAge old.
type metricsShare = sharedRead[[]Sample]

// upMetric is the exporter's name for "the engine answered the scrape".
func upMetric(engine string) string {
	if engine == "postgres" {
		return "pg_up"
	}
	return "mysql_up"
}

// samples are everything /metrics shows: the manager's own figures from
// its status, the volume's, and the engine's.
func (m *Manager) samples(ctx context.Context) []Sample {
	s := m.status(ctx, cachedProbeAge)
	out := StatusSamples(s)
	if used, size, err := volumeUsage(m.opts.DataRoot); err == nil {
		out = append(out,
			Sample{Name: "mydb_volume_used_bytes", Help: "Bytes in use on the instance's data volume.", Value: float64(used)},
			Sample{Name: "mydb_volume_size_bytes", Help: "The size of the instance's data volume.", Value: float64(size)})
	}
	reader, ok := m.driver.(MetricsReader)
	if !ok {
		return out
	}
	up := Sample{Name: upMetric(m.opts.Engine), Help: "Whether the engine answered the last read of its figures (1) or not (0)."}
	if s.EngineRunning {
		engine, err := m.metrics.read(ctx, metricsReadAge, reader.Metrics)
		if err == nil {
			up.Value = 1
			out = append(out, engine...)
		} else {
			m.log.Debug("reading the engine's figures", "err", err)
		}
	}
	return append(out, up)
}

// StatusSamples are the manager's figures of an instance's status.
func StatusSamples(s api.Status) []Sample {
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	out := []Sample{
		{Name: "mydb_instance_info", Help: "The instance's engine and role (1).", Value: 1,
			Labels: []string{"engine", s.Engine, "role", string(s.Role)}},
		{Name: "mydb_instance_ready", Help: "Whether the instance serves its role: a primary takes writes, a replica streams within the lag bounds.", Value: flag(s.Ready)},
		{Name: "mydb_instance_primary", Help: "Whether the instance is the primary (1) or not (0).", Value: flag(s.Role == api.RolePrimary)},
		{Name: "mydb_instance_fenced", Help: "Whether the instance refuses writes because another is to be the primary.", Value: flag(s.Fenced)},
		{Name: "mydb_engine_running", Help: "Whether the engine's server process runs.", Value: flag(s.EngineRunning)},
		{Name: "mydb_engine_restarts_total", Help: "How often the engine's server exited without being asked to and was started again.", Type: Counter, Value: float64(s.Restarts)},
	}
	if s.Role == api.RoleReplica {
		out = append(out, Sample{Name: "mydb_replication_streaming", Help: "Whether the replica streams from its primary.", Value: flag(s.Streaming)})
		if s.LagSeconds != nil {
			out = append(out, Sample{Name: "mydb_replication_lag_seconds", Help: "How far the replica's applied data is behind its primary, in time.", Value: *s.LagSeconds})
		}
		if s.LagBytes != nil {
			out = append(out, Sample{Name: "mydb_replication_lag_bytes", Help: "How much WAL the replica has received and not yet replayed (PostgreSQL).", Value: float64(*s.LagBytes)})
		}
	}
	if s.Role == api.RolePrimary && s.EngineRunning {
		out = append(out,
			Sample{Name: "mydb_replication_synchronous", Help: "Whether the primary's commits wait for a replica (Sync replication).", Value: flag(s.Synchronous)},
			Sample{Name: "mydb_replication_sync_replicas", Help: "How many replicas acknowledge the primary's commits now.", Value: float64(s.SyncReplicas)})
	}
	if a := s.Archive; a != nil {
		out = append(out,
			Sample{Name: "mydb_wal_archive_configured", Help: "Whether the manager knows where to archive the WAL.", Value: flag(a.Configured)},
			Sample{Name: "mydb_wal_archive_archived_total", Help: "WAL files this manager archived.", Type: Counter, Value: float64(a.Archived)},
			Sample{Name: "mydb_wal_archive_failed_total", Help: "Attempts to archive a WAL file that failed.", Type: Counter, Value: float64(a.Failed)},
			Sample{Name: "mydb_wal_archive_pending_files", Help: "Closed WAL files waiting to be archived: the archive's lag, in files.", Value: float64(a.Pending)})
		for _, t := range []struct {
			name, help string
			at         *time.Time
		}{
			{"mydb_wal_archive_last_archived_timestamp_seconds", "When the last WAL file archived was handed over.", a.LastArchivedTime},
			{"mydb_wal_archive_last_failure_timestamp_seconds", "When the last attempt to archive failed.", a.LastFailureTime},
			{"mydb_wal_archive_last_recoverable_timestamp_seconds", "The commit time of the latest transaction known to be in the archive: a restore may target any time before it.", a.LastRecoverableTime},
		} {
			if t.at != nil {
				out = append(out, Sample{Name: t.name, Help: t.help, Value: float64(t.at.UnixMilli()) / 1000})
			}
		}
	}
	if c := s.Certificates; c != nil && !c.NotAfter.IsZero() {
		out = append(out, Sample{Name: "mydb_certificate_expiry_timestamp_seconds", Help: "When the instance's certificate expires (it is renewed at two thirds of its life).",
			Value: float64(c.NotAfter.Unix())})
	}
	return out
}

// volumeUsage is the used and total bytes of the file system at path.
func volumeUsage(path string) (used, size uint64, err error) {
	if path == "" {
		return 0, 0, errors.New("no data root")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	size = st.Blocks * uint64(st.Bsize)
	return size - st.Bfree*uint64(st.Bsize), size, nil
}

// sampleCollector hands a Manager's samples to a Prometheus registry. It
// describes nothing ahead (an unchecked collector): the engine's figures
// are known only once read.
type sampleCollector struct{ m *Manager }

func (sampleCollector) Describe(chan<- *prometheus.Desc) {}

func (c sampleCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*statusProbeTimeout)
	defer cancel()
	for _, s := range c.m.samples(ctx) {
		metric, err := s.constMetric()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(prometheus.NewDesc(s.Name, s.Help, nil, nil), err)
			continue
		}
		ch <- metric
	}
}

func (s Sample) constMetric() (prometheus.Metric, error) {
	if len(s.Labels)%2 != 0 {
		return nil, fmt.Errorf("%s: labels must come in name, value pairs", s.Name)
	}
	var names, values []string
	for i := 0; i < len(s.Labels); i += 2 {
		names = append(names, s.Labels[i])
		values = append(values, s.Labels[i+1])
	}
	valueType := prometheus.GaugeValue
	switch s.Type {
	case Counter:
		valueType = prometheus.CounterValue
	case Untyped:
		valueType = prometheus.UntypedValue
	}
	return prometheus.NewConstMetric(prometheus.NewDesc(s.Name, s.Help, names, nil), valueType, s.Value, values...)
}

// serveMetrics starts the metrics server: GET /metrics over TLS with the
// instance's certificate, to anyone who reaches the port (Prometheus has no
// certificate of the database's CA). Nothing in it is secret; every
// scrape is answered from figures at most a second old, so a flood of
// scrapes costs the engine one read a second.
func (m *Manager) serveMetrics() (*http.Server, error) {
	registry := prometheus.NewRegistry()
	if err := registry.Register(sampleCollector{m}); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+api.PathMetrics, promhttp.HandlerFor(registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4, Timeout: 10 * time.Second}))
	ln, err := net.Listen("tcp", m.opts.MetricsAddress)
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return m.opts.Identity.Certificate()
	}}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("metrics server", "err", err)
		}
	}()
	return srv, nil
}
