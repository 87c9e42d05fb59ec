package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mydb-dev/mydb/pkg/instance"
)

var _ instance.MetricsReader = (*Driver)(nil)

// databaseStats are pg_stat_database's columns postgres_exporter exports
// (pg_stat_database_<column>), and whether each only grows.
var databaseStats = []struct {
	column, help string
	counter      bool
}{
	{"numbackends", "Sessions connected to the database.", false},
	{"xact_commit", "Transactions committed in the database.", true},
	{"xact_rollback", "Transactions rolled back in the database.", true},
	{"blks_read", "Disk blocks read in the database.", true},
	{"blks_hit", "Disk blocks found in the buffer cache.", true},
	{"tup_returned", "Rows returned by queries in the database.", true},
	{"tup_fetched", "Rows fetched by queries in the database.", true},
	{"tup_inserted", "Rows inserted in the database.", true},
	{"tup_updated", "Rows updated in the database.", true},
	{"tup_deleted", "Rows deleted in the database.", true},
	{"conflicts", "Queries canceled by conflicts with recovery (standbys).", true},
	{"deadlocks", "Deadlocks detected in the database.", true},
	{"temp_bytes", "Bytes written to temporary files by queries.", true},
}

// Metrics implements instance.MetricsReader with postgres_exporter's names
// and labels: pg_stat_database_*, pg_database_size_bytes,
// pg_replication_lag_seconds and pg_replication_is_replica,
// pg_stat_replication_pg_wal_lsn_diff per standby, pg_stat_archiver_*,
// pg_postmaster_start_time_seconds, pg_settings_max_connections; and
// mydb_wal_bytes_total, the WAL position in bytes.
func (d *Driver) Metrics(ctx context.Context) ([]instance.Sample, error) {
	pool, err := d.adminPool()
	if err != nil {
		return nil, err
	}
	var out []instance.Sample
	add := func(name, help string, typ instance.MetricType, value float64, labels ...string) {
		out = append(out, instance.Sample{Name: name, Help: help, Type: typ, Value: value, Labels: labels})
	}

	var (
		inRecovery                 bool
		lag, walBytes, archiveAge  *float64
		started, maxConnections    float64
		archivedCount, failedCount int64
	)
	err = pool.QueryRow(ctx, `
		SELECT pg_is_in_recovery(),
		       CASE WHEN NOT pg_is_in_recovery() THEN 0
		            WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
		            ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp())) END::float8,
		       pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery()
		                            THEN greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())
		                            ELSE pg_current_wal_lsn() END, '0/0')::float8,
		       extract(epoch FROM pg_postmaster_start_time())::float8,
		       current_setting('max_connections')::float8,
		       a.archived_count, a.failed_count,
		       extract(epoch FROM now() - a.last_archived_time)::float8
		FROM pg_stat_archiver a`).
		Scan(&inRecovery, &lag, &walBytes, &started, &maxConnections, &archivedCount, &failedCount, &archiveAge)
	if err != nil {
		return nil, err
	}
	replica := 0.0
	if inRecovery {
		replica = 1
	}
	add("pg_replication_is_replica", "Whether the server is a standby (1) or not (0).", instance.Gauge, replica)
	if lag != nil {
		add("pg_replication_lag_seconds", "How far the standby's replay is behind, in time (0 when it replayed all it received, and on a primary).", instance.Gauge, *lag)
	}
	if walBytes != nil {
		add("mydb_wal_bytes_total", "The WAL position in bytes (the LSN): what a primary wrote, what a standby received or replayed; its rate is the WAL generation.", instance.Counter, *walBytes)
	}
	add("pg_postmaster_start_time_seconds", "When the server started, in seconds since the epoch.", instance.Gauge, started)
	add("pg_settings_max_connections", "The max_connections setting.", instance.Gauge, maxConnections)
	add("pg_stat_archiver_archived_count", "WAL files archived.", instance.Counter, float64(archivedCount))
	add("pg_stat_archiver_failed_count", "Attempts to archive a WAL file that failed.", instance.Counter, float64(failedCount))
	if archiveAge != nil {
		add("pg_stat_archiver_last_archive_age", "Seconds since the last WAL file was archived.", instance.Gauge, *archiveAge)
	}

	columns := ""
	for _, c := range databaseStats {
		columns += ", s." + c.column + "::float8"
	}
	rows, err := pool.Query(ctx, `SELECT d.oid::text, d.datname`+columns+`, pg_database_size(d.oid)::float8
		FROM pg_database d JOIN pg_stat_database s ON s.datid = d.oid
		WHERE NOT d.datistemplate AND d.datallowconn ORDER BY d.datname`)
	if err != nil {
		return nil, err
	}
	type database struct {
		oid, name string
		values    []float64
		size      float64
	}
	databases, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (database, error) {
		db := database{values: make([]float64, len(databaseStats))}
		dest := []any{&db.oid, &db.name}
		for i := range db.values {
			dest = append(dest, &db.values[i])
		}
		return db, row.Scan(append(dest, &db.size)...)
	})
	if err != nil {
		return nil, fmt.Errorf("pg_stat_database: %w", err)
	}
	for _, db := range databases {
		for i, c := range databaseStats {
			typ := instance.Gauge
			if c.counter {
				typ = instance.Counter
			}
			add("pg_stat_database_"+c.column, c.help, typ, db.values[i], "datid", db.oid, "datname", db.name)
		}
		add("pg_database_size_bytes", "The database's size on disk.", instance.Gauge, db.size, "datname", db.name)
	}

	if inRecovery {
		return out, nil
	}
	rows, err = pool.Query(ctx, `SELECT coalesce(application_name, ''), coalesce(host(client_addr), ''), coalesce(state, ''),
		coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn), 0)::float8
		FROM pg_stat_replication ORDER BY application_name`)
	if err != nil {
		return nil, err
	}
	type standby struct {
		name, addr, state string
		behind            float64
	}
	standbys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (standby, error) {
		var s standby
		return s, row.Scan(&s.name, &s.addr, &s.state, &s.behind)
	})
	if err != nil {
		return nil, fmt.Errorf("pg_stat_replication: %w", err)
	}
	for _, s := range standbys {
		add("pg_stat_replication_pg_wal_lsn_diff", "How many bytes of WAL the standby has yet to replay.", instance.Gauge, s.behind,
			"application_name", s.name, "client_addr", s.addr, "state", s.state)
	}
	return out, nil
}
