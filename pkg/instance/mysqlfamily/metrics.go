package mysqlfamily

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

var _ instance.MetricsReader = (*Server)(nil)

// ErrNoBinaryLogging is ER_NO_BINARY_LOGGING: SHOW BINARY LOGS on a server
// that writes none.
const ErrNoBinaryLogging = 1381

// Metrics implements instance.MetricsReader with mysqld_exporter's names and
// labels, so its dashboards work for MariaDB and MySQL alike:
// mysql_global_status_* (Com_* as mysql_global_status_commands_total,
// Handler_* as mysql_global_status_handlers_total),
// mysql_global_variables_max_connections, mysql_slave_status_* on a replica
// (the names of SHOW SLAVE STATUS, which dashboards query, for MySQL's
// SHOW REPLICA STATUS too), mysql_binlog_*; and mydb_database_size_bytes.
func (s *Server) Metrics(ctx context.Context) ([]instance.Sample, error) {
	c, err := s.Admin()
	if err != nil {
		return nil, err
	}
	status, err := c.QueryRows(ctx, "SHOW GLOBAL STATUS")
	if err != nil {
		return nil, fmt.Errorf("global status: %w", err)
	}
	out := GlobalStatusSamples(status)
	vars, err := c.QueryRow(ctx, "SELECT @@global.max_connections AS max_connections, @@global.read_only AS read_only")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"max_connections", "read_only"} {
		if v, err := strconv.ParseFloat(vars[name], 64); err == nil {
			out = append(out, instance.Sample{Name: "mysql_global_variables_" + name, Help: "The " + name + " setting.", Value: v})
		}
	}
	rs, err := s.replicaStatus(ctx, c)
	if err != nil {
		return nil, err
	}
	out = append(out, ReplicaStatusSamples(rs)...)
	binlogs, err := c.QueryRows(ctx, "SHOW BINARY LOGS")
	switch {
	case isErrno(err, ErrNoBinaryLogging):
	case err != nil:
		return nil, fmt.Errorf("binary logs: %w", err)
	default:
		out = append(out, BinlogSamples(binlogs)...)
	}
	sizes, err := c.QueryRows(ctx, `SELECT s.schema_name AS name, COALESCE(SUM(t.data_length + t.index_length), 0) AS size
		FROM information_schema.SCHEMATA s LEFT JOIN information_schema.TABLES t ON t.table_schema = s.schema_name
		WHERE s.schema_name NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')
		GROUP BY s.schema_name ORDER BY s.schema_name`)
	if err != nil {
		return nil, fmt.Errorf("database sizes: %w", err)
	}
	for _, row := range sizes {
		if v, err := strconv.ParseFloat(row["size"], 64); err == nil {
			out = append(out, instance.Sample{Name: "mydb_database_size_bytes", Value: v, Labels: []string{"database", row["name"]},
				Help: "The database's tables and indexes (MySQL refreshes these figures every information_schema_stats_expiry)."})
		}
	}
	return out, nil
}

// GlobalStatusSamples are SHOW GLOBAL STATUS's numeric rows as
// mysqld_exporter exports them.
func GlobalStatusSamples(rows []map[string]string) []instance.Sample {
	var out []instance.Sample
	for _, row := range rows {
		name, value := row["Variable_name"], row["Value"]
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		lower := strings.ToLower(name)
		switch {
		case strings.HasPrefix(lower, "com_"):
			out = append(out, instance.Sample{Name: "mysql_global_status_commands_total", Help: "Statements run, by command (Com_*).",
				Type: instance.Counter, Value: v, Labels: []string{"command", strings.TrimPrefix(lower, "com_")}})
		case strings.HasPrefix(lower, "handler_"):
			out = append(out, instance.Sample{Name: "mysql_global_status_handlers_total", Help: "Storage engine handler calls, by handler (Handler_*): commit counts transactions committed.",
				Type: instance.Counter, Value: v, Labels: []string{"handler", strings.TrimPrefix(lower, "handler_")}})
		case validMetricName(lower):
			out = append(out, instance.Sample{Name: "mysql_global_status_" + lower, Help: "Generic metric from SHOW GLOBAL STATUS.",
				Type: instance.Untyped, Value: v})
		}
	}
	return out
}

// ReplicaStatusSamples are a replica's mysql_slave_status_* figures
// (nothing on a server that replicates from no one).
func ReplicaStatusSamples(rs ReplicaStatus) []instance.Sample {
	if !rs.Configured {
		return nil
	}
	labels := []string{"channel_name", "", "connection_name", "", "master_host", rs.Host}
	yes := func(state string) float64 {
		if state == "Yes" {
			return 1
		}
		return 0
	}
	out := []instance.Sample{
		{Name: "mysql_slave_status_slave_io_running", Help: "Whether the replica's IO thread runs (1) or not (0).", Value: yes(rs.IORunning), Labels: labels},
		{Name: "mysql_slave_status_slave_sql_running", Help: "Whether the replica's SQL thread runs (1) or not (0).", Value: yes(rs.SQLRunning), Labels: labels},
	}
	if rs.SecondsBehind != nil {
		out = append(out, instance.Sample{Name: "mysql_slave_status_seconds_behind_master", Help: "How far the replica's applied data is behind its source, in seconds.",
			Value: *rs.SecondsBehind, Labels: labels})
	}
	return out
}

// BinlogSamples are SHOW BINARY LOGS's files as mysqld_exporter counts them.
func BinlogSamples(rows []map[string]string) []instance.Sample {
	var size float64
	for _, row := range rows {
		v, _ := strconv.ParseFloat(row["File_size"], 64)
		size += v
	}
	out := []instance.Sample{
		{Name: "mysql_binlog_size_bytes", Help: "The binary logs' combined size.", Value: size},
		{Name: "mysql_binlog_files", Help: "How many binary log files there are.", Value: float64(len(rows))},
	}
	if len(rows) > 0 {
		last := rows[len(rows)-1]["Log_name"]
		if i := strings.LastIndexByte(last, '.'); i >= 0 {
			if n, err := strconv.ParseFloat(last[i+1:], 64); err == nil {
				out = append(out, instance.Sample{Name: "mysql_binlog_file_number", Help: "The number of the binary log file written now.", Value: n})
			}
		}
	}
	return out
}

// validMetricName tells whether s may follow a metric name's prefix.
func validMetricName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}
