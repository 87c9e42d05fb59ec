package mysqlfamily

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"os/user"
	"time"

	"github.com/go-sql-driver/mysql"
)

func init() {
	// The driver logs a stale pooled connection (a restarted server) on
	// its own; the error it returns says the same to the caller.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

// OpenAdmin connects over the unix socket as the OS user the manager runs
// as, which the server authenticates with unix_socket: no password exists
// to leak.
func OpenAdmin(socket string) (*sql.DB, error) {
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	c := mysql.NewConfig()
	c.User = u.Username
	c.Net = "unix"
	c.Addr = socket
	c.Timeout = 5 * time.Second
	c.ReadTimeout = 30 * time.Second
	c.InterpolateParams = false
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}

// Exec runs statements in order on one connection, stopping at the first
// error (which names the statement, minus any password it holds).
func Exec(ctx context.Context, db *sql.DB, stmts ...string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for i, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("statement %d of %d: %w", i+1, len(stmts), err)
		}
	}
	return nil
}

// QueryRowMap returns the single row of a SHOW statement as column ->
// value, or nil when there is none.
func QueryRowMap(ctx context.Context, db *sql.DB, query string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	if !rows.Next() {
		return nil, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	m := make(map[string]string, len(cols))
	for i, c := range cols {
		if vals[i].Valid {
			m[c] = vals[i].String
		}
	}
	return m, rows.Err()
}
