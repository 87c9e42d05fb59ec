//go:build engines

package engines

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// testMetrics scrapes every instance's /metrics as Prometheus would (TLS
// verified against the database's CA, no client certificate) and checks the
// figures against what the engine did: commits counted, each replica's lag
// and streaming, the primary's view of its standbys, sizes.
func testMetrics(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	start := time.Now()
	primary := scrape(t, p)
	fig.add("metrics: one scrape of the primary %s, %d series", time.Since(start).Round(time.Millisecond), seriesCount(primary))
	up := "pg_up"
	if c.spec.name != "postgres" {
		up = "mysql_up"
	}
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{up, nil, 1},
		{"mydb_instance_primary", nil, 1},
		{"mydb_instance_ready", nil, 1},
		{"mydb_engine_running", nil, 1},
		{"mydb_instance_info", []string{"engine", c.spec.name, "role", string(api.RolePrimary)}, 1},
	} {
		if got, ok := sampleValue(primary, want.name, want.labels...); !ok || got != want.value {
			t.Errorf("primary: %s%v = %v (present %v), want %v", want.name, want.labels, got, ok, want.value)
		}
	}
	if used, ok := sampleValue(primary, "mydb_volume_used_bytes"); !ok || used <= 0 {
		t.Errorf("primary: mydb_volume_used_bytes = %v (present %v)", used, ok)
	}

	// Commits: each engine's counter grows by at least what the
	// application committed (PostgreSQL's statistics reach the view within
	// its flush interval, about a second; an idle session's within 10 s).
	database := c.secrets[instance.SecretDatabase]
	commits, commitLabels := "pg_stat_database_xact_commit", []string{"datname", database}
	if c.spec.name != "postgres" {
		commits, commitLabels = "mysql_global_status_handlers_total", []string{"handler", "commit"}
	}
	before, ok := sampleValue(primary, commits, commitLabels...)
	if !ok {
		t.Fatalf("primary: no %s%v", commits, commitLabels)
	}
	app := p.app()
	mustExec(t, app, "CREATE TABLE metric_commits (id int PRIMARY KEY)")
	const n = 50
	for i := range n {
		mustExec(t, app, fmt.Sprintf("INSERT INTO metric_commits VALUES (%d)", i))
	}
	deadline := time.Now().Add(20 * time.Second)
	var after float64
	for {
		after, _ = sampleValue(scrape(t, p), commits, commitLabels...)
		if after-before >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if after-before < n {
		t.Errorf("%s%v grew by %v after %d commits, want at least %d", commits, commitLabels, after-before, n, n)
	}
	fig.add("metrics: %s grew by %v for %d commits", commits, after-before, n)

	primary = scrape(t, p)
	if c.spec.name == "postgres" {
		if size, ok := sampleValue(primary, "pg_database_size_bytes", "datname", database); !ok || size <= 0 {
			t.Errorf("pg_database_size_bytes{datname=%q} = %v (present %v)", database, size, ok)
		}
		if got := seriesOf(primary, "pg_stat_replication_pg_wal_lsn_diff"); got != len(replicas) {
			t.Errorf("the primary shows %d pg_stat_replication_pg_wal_lsn_diff series, want one per replica (%d)", got, len(replicas))
		}
		if wal, ok := sampleValue(primary, "mydb_wal_bytes_total"); !ok || wal <= 0 {
			t.Errorf("mydb_wal_bytes_total = %v (present %v)", wal, ok)
		}
	} else {
		if files, ok := sampleValue(primary, "mysql_binlog_files"); !ok || files < 1 {
			t.Errorf("mysql_binlog_files = %v (present %v)", files, ok)
		}
		if _, ok := sampleValue(primary, "mydb_database_size_bytes", "database", database); !ok {
			t.Errorf("no mydb_database_size_bytes{database=%q}", database)
		}
		if got, ok := sampleValue(primary, "mysql_global_status_threads_connected"); !ok || got < 1 {
			t.Errorf("mysql_global_status_threads_connected = %v (present %v)", got, ok)
		}
	}

	for _, r := range replicas {
		fams := scrape(t, r)
		for _, want := range []struct {
			name  string
			value float64
		}{{up, 1}, {"mydb_instance_primary", 0}, {"mydb_replication_streaming", 1}, {"mydb_instance_ready", 1}} {
			if got, ok := sampleValue(fams, want.name); !ok || got != want.value {
				t.Errorf("%s: %s = %v (present %v), want %v", r.name, want.name, got, ok, want.value)
			}
		}
		lag, ok := sampleValue(fams, "mydb_replication_lag_seconds")
		if !ok || lag < 0 {
			t.Errorf("%s: mydb_replication_lag_seconds = %v (present %v)", r.name, lag, ok)
		}
		engineLag := "pg_replication_lag_seconds"
		if c.spec.name == "postgres" {
			if got, ok := sampleValue(fams, "pg_replication_is_replica"); !ok || got != 1 {
				t.Errorf("%s: pg_replication_is_replica = %v (present %v)", r.name, got, ok)
			}
		} else {
			engineLag = "mysql_slave_status_seconds_behind_master"
			if got, ok := sampleValue(fams, "mysql_slave_status_slave_io_running", "channel_name", "", "connection_name", "", "master_host", p.host); !ok || got != 1 {
				t.Errorf("%s: mysql_slave_status_slave_io_running{master_host=%q} = %v (present %v)", r.name, p.host, got, ok)
			}
		}
		if got := seriesOf(fams, engineLag); got != 1 {
			t.Errorf("%s: %d %s series, want 1", r.name, got, engineLag)
		}
		fig.add("metrics: %s lag %.3f s, %d series", r.name, lag, seriesCount(fams))
	}

	// A client that presents a certificate of another CA is no different:
	// the port asks for none. A plain-HTTP client gets no figures.
	plain := &http.Client{Timeout: 3 * time.Second}
	if resp, err := plain.Get("http://" + p.metricsAddr + api.PathMetrics); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP got 200 from the metrics port")
		}
		resp.Body.Close()
	}
}

// scrape GETs n's /metrics the way Prometheus does with the database's CA.
func scrape(t *testing.T, n *node) map[string]*dto.MetricFamily {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pki.Pool(n.c.ca.CA.Cert), ServerName: n.name}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + n.metricsAddr + api.PathMetrics)
	if err != nil {
		t.Fatalf("%s: scraping /metrics: %v", n.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: /metrics answered %s", n.name, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s: /metrics is not Prometheus' text format: %v", n.name, err)
	}
	return fams
}

// sampleValue is the value of the series of name whose labels include the
// given name, value pairs.
func sampleValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	fam, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(labels); i += 2 {
			if v, ok := have[labels[i]]; !ok && labels[i+1] != "" || v != labels[i+1] {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Untyped != nil:
			return m.GetUntyped().GetValue(), true
		}
	}
	return 0, false
}

func seriesOf(fams map[string]*dto.MetricFamily, name string) int {
	if fam, ok := fams[name]; ok {
		return len(fam.GetMetric())
	}
	return 0
}

func seriesCount(fams map[string]*dto.MetricFamily) int {
	total := 0
	for _, f := range fams {
		total += len(f.GetMetric())
	}
	return total
}
