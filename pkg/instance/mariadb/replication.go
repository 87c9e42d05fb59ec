package mariadb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Follow implements instance.Engine: fence writes, and unless the server
// already replicates from t's primary, point it there with GTID
// positioning. A fresh clone first takes its GTID position from the backup.
func (e *Engine) Follow(ctx context.Context, t instance.Topology) error {
	db, err := e.admin()
	if err != nil {
		return err
	}
	var readOnly bool
	if err := db.QueryRowContext(ctx, "SELECT @@read_only").Scan(&readOnly); err != nil {
		return err
	}
	if !readOnly {
		if err := mysqlfamily.Exec(ctx, db, e.dialect.FenceStatements()...); err != nil {
			return err
		}
	}
	if err := e.adoptCloneGTID(ctx); err != nil {
		return err
	}
	row, err := mysqlfamily.QueryRowMap(ctx, db, e.dialect.ReplicaStatusQuery())
	if err != nil {
		return err
	}
	rs := e.dialect.ParseReplicaStatus(row)
	if rs.IORunning == "No" && rs.IOErrno == mysqlfamily.ErrSourceCannotServe && rs.Host == t.PrimaryHost && rs.Port == t.PrimaryPort {
		return fmt.Errorf("%w: %s", instance.ErrMustReclone, rs.LastError)
	}
	if rs.Host == t.PrimaryHost && rs.Port == t.PrimaryPort && rs.User == instance.ReplicationUser && rs.IORunning != "No" && rs.SQLRunning == "Yes" {
		return nil
	}
	pw, err := e.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	e.cfg.Log.Info("pointing the replica at the primary", "primary", t.Primary, "host", t.PrimaryHost, "port", t.PrimaryPort, "wasFollowing", rs.Host, "lastError", rs.LastError)
	return mysqlfamily.Exec(ctx, db, e.dialect.FollowStatements(mysqlfamily.Source{
		Host: t.PrimaryHost, Port: t.PrimaryPort, User: instance.ReplicationUser, Password: pw,
	})...)
}

// adoptCloneGTID sets gtid_slave_pos to a fresh clone's backup position,
// once: the file goes only after the server persisted the position (in
// mysql.gtid_slave_pos), and before replication starts, so a crash in
// between can neither skip the step nor rewind a replica that applied more.
func (e *Engine) adoptCloneGTID(ctx context.Context) error {
	path := filepath.Join(e.DataDir(), cloneGTIDFile)
	gtid, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	db, err := e.admin()
	if err != nil {
		return err
	}
	if err := mysqlfamily.Exec(ctx, db, "STOP SLAVE", "RESET SLAVE ALL",
		"SET GLOBAL gtid_slave_pos = "+mysqlfamily.QuoteString(strings.TrimSpace(string(gtid)))); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		return err
	}
	return instance.SyncDir(e.DataDir())
}

// Promote implements instance.Engine: let the SQL thread apply what the IO
// thread already received (bounded), then stop replicating and take writes.
func (e *Engine) Promote(ctx context.Context) error {
	db, err := e.admin()
	if err != nil {
		return err
	}
	row, err := mysqlfamily.QueryRowMap(ctx, db, e.dialect.ReplicaStatusQuery())
	if err != nil {
		return err
	}
	if rs := e.dialect.ParseReplicaStatus(row); rs.Configured {
		if err := mysqlfamily.Exec(ctx, db, "STOP SLAVE IO_THREAD"); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := instance.PollUntil(wctx, 100*time.Millisecond, func() error {
			row, err := mysqlfamily.QueryRowMap(wctx, db, e.dialect.ReplicaStatusQuery())
			if err != nil {
				return err
			}
			if rs := e.dialect.ParseReplicaStatus(row); !rs.AppliedAll && rs.SQLRunning == "Yes" {
				return fmt.Errorf("relay log not applied yet")
			}
			return nil
		})
		if err != nil {
			e.cfg.Log.Warn("promoting before the relay log is applied", "err", err)
		}
	}
	return mysqlfamily.Exec(ctx, db, e.dialect.PromoteStatements()...)
}
