package postgres

import (
	"context"

	"github.com/mydb-dev/mydb/pkg/instance"
)

var _ instance.SyncReplicator = (*Driver)(nil)

// SyncStandbyNames is the primary's synchronous_standby_names in Sync mode:
// a commit waits for any one standby to have flushed it. The walsenders'
// application_name is the standby's instance name (see conninfo); "*"
// matches every standby, so the primary needs no list of the replicas and
// nothing changes when they do.
const SyncStandbyNames = "ANY 1 (*)"

// syncStatements are what SetSynchronous runs to turn synchronous
// replication on or off; synchronous_commit on waits for the standby's
// flush (not its replay: a promoted standby replays all it flushed).
func syncStatements(on bool) []string {
	if on {
		return []string{
			"ALTER SYSTEM SET synchronous_standby_names = " + quoteLiteral(SyncStandbyNames),
			"ALTER SYSTEM SET synchronous_commit = 'on'",
			"SELECT pg_reload_conf()",
		}
	}
	return []string{
		"ALTER SYSTEM RESET synchronous_standby_names",
		"ALTER SYSTEM RESET synchronous_commit",
		"SELECT pg_reload_conf()",
	}
}

// SetSynchronous implements instance.SyncReplicator: ALTER SYSTEM and a
// reload when the setting differs. A reload does not cut sessions: commits
// waiting for a standby return once synchronous_standby_names is empty.
func (d *Driver) SetSynchronous(ctx context.Context, on bool) error {
	pool, err := d.adminPool()
	if err != nil {
		return err
	}
	var names, commit string
	if err := pool.QueryRow(ctx, "SELECT current_setting('synchronous_standby_names'), current_setting('synchronous_commit')").
		Scan(&names, &commit); err != nil {
		return err
	}
	if on == (names != "") && (!on || (names == SyncStandbyNames && commit == "on")) {
		return nil
	}
	d.cfg.Log.Info("synchronous replication", "on", on)
	for _, s := range syncStatements(on) {
		if _, err := pool.Exec(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// ReloadTLS implements instance.TLSReloader: PostgreSQL reads its
// certificate files again on a configuration reload.
func (d *Driver) ReloadTLS(ctx context.Context) error {
	pool, err := d.adminPool()
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, "SELECT pg_reload_conf()")
	return err
}
