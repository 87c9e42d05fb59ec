package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// FenceStops implements instance.Engine: read_only fences a running
// MariaDB (the application user has no READ_ONLY ADMIN), and the replicas
// keep reading its binlog until they have it all.
func (e *Engine) FenceStops() bool { return false }

// Fence implements instance.Engine: read_only (which waits for commits in
// progress), then end the application's sessions, so an open transaction
// cannot commit and clients reconnect (through the -rw Service, to the new
// primary); the position is the binlog's, which holds every commit.
func (e *Engine) Fence(ctx context.Context) (instance.Position, error) {
	db, err := e.admin()
	if err != nil {
		return instance.Position{}, err
	}
	if err := mysqlfamily.Exec(ctx, db, e.dialect.FenceStatements()...); err != nil {
		return instance.Position{}, err
	}
	app, err := e.cfg.Secrets.Get(instance.SecretUsername)
	if err != nil {
		return instance.Position{}, err
	}
	if err := killSessions(ctx, db, app); err != nil {
		return instance.Position{}, err
	}
	var pos sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return instance.Position{}, err
	}
	return instance.Position{GTID: pos.String}, nil
}

// killSessions ends every connection of user.
func killSessions(ctx context.Context, db *sql.DB, user string) error {
	rows, err := db.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ?", user)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		// 1094: the session ended by itself meanwhile.
		if _, err := db.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err != nil && !isErrno(err, errNoSuchThread) {
			return err
		}
	}
	return nil
}

// errNoSuchThread is ER_NO_SUCH_THREAD.
const errNoSuchThread = 1094

func isErrno(err error, n uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == n
}
