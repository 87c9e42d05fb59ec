package plugin

import (
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

func TestFiguresLine(t *testing.T) {
	for _, c := range []struct {
		engine examplev1.Engine
		text   string
		want   string
	}{
		{examplev1.EnginePostgres, `# TYPE mydb_replication_lag_seconds gauge
mydb_replication_lag_seconds 0.25
# TYPE pg_stat_database_numbackends gauge
pg_stat_database_numbackends{datid="5",datname="postgres"} 2
pg_stat_database_numbackends{datid="16384",datname="shop"} 3
# TYPE pg_stat_database_xact_commit counter
pg_stat_database_xact_commit{datid="5",datname="postgres"} 100
pg_stat_database_xact_commit{datid="16384",datname="shop"} 23
# TYPE pg_database_size_bytes gauge
pg_database_size_bytes{datname="postgres"} 7340032
pg_database_size_bytes{datname="shop"} 1048576
# TYPE mydb_volume_used_bytes gauge
mydb_volume_used_bytes 250
# TYPE mydb_volume_size_bytes gauge
mydb_volume_size_bytes 1000
# TYPE mydb_engine_restarts_total counter
mydb_engine_restarts_total 0
`, "lag 0.25s, 5 connections, 123 commits, databases 8.0 MiB, volume 25% used"},
		{examplev1.EngineMariaDB, `# TYPE mysql_global_status_threads_connected untyped
mysql_global_status_threads_connected 4
# TYPE mysql_global_status_handlers_total counter
mysql_global_status_handlers_total{handler="commit"} 40
mysql_global_status_handlers_total{handler="rollback"} 2
# TYPE mydb_engine_restarts_total counter
mydb_engine_restarts_total 1
`, "4 connections, 40 commits, 1 engine restart"},
		{examplev1.EngineMySQL, "", "<no figures>"},
	} {
		parser := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(c.text))
		if err != nil {
			t.Fatal(err)
		}
		if got := figuresLine(c.engine, fams); got != c.want {
			t.Errorf("%s: %q, want %q", c.engine, got, c.want)
		}
	}
}
