package mysqlfamily

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-sql-driver/mysql"
)

func init() {
	// go-sql-driver logs a stale pooled connection (a restarted server) on
	// its own; the error it returns says the same to the caller.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

// Conn is what the MariaDB and MySQL drivers do over the admin connection:
// run statements and read one row. SQLConn is the real one; tests give a
// fake that records the statements and answers the queries, so every
// statement sequence and decision is tested without a server.
type Conn interface {
	// Exec runs statements in order on one session, stopping at the first
	// error.
	Exec(ctx context.Context, stmts ...string) error
	// QueryRow returns the first row of query as column -> value (NULL
	// columns absent), or nil when there is no row.
	QueryRow(ctx context.Context, query string) (map[string]string, error)
	// QueryRows returns every row of query, each as QueryRow's.
	QueryRows(ctx context.Context, query string) ([]map[string]string, error)
	Ping(ctx context.Context) error
	Close() error
}

// SQLConn is a Conn over a database/sql pool.
type SQLConn struct{ DB *sql.DB }

// Exec implements Conn.
func (c SQLConn) Exec(ctx context.Context, stmts ...string) error { return Exec(ctx, c.DB, stmts...) }

// QueryRow implements Conn.
func (c SQLConn) QueryRow(ctx context.Context, query string) (map[string]string, error) {
	return QueryRowMap(ctx, c.DB, query)
}

// QueryRows implements Conn.
func (c SQLConn) QueryRows(ctx context.Context, query string) ([]map[string]string, error) {
	return QueryRowsMap(ctx, c.DB, query)
}

// Ping implements Conn.
func (c SQLConn) Ping(ctx context.Context) error { return c.DB.PingContext(ctx) }

// Close implements Conn.
func (c SQLConn) Close() error { return c.DB.Close() }

// OpenAdmin connects over the unix socket as user without a password: the
// server authenticates the manager's OS user by the socket's peer
// credentials (MariaDB unix_socket, MySQL auth_socket), so no admin
// password exists to leak.
func OpenAdmin(socket, user string) (Conn, error) { return OpenAdminFor(socket, user, 30*time.Second) }

// OpenAdminFor is OpenAdmin whose statements may each take up to
// readTimeout (0: no bound, for a statement as long as a backup's copy).
func OpenAdminFor(socket, user string, readTimeout time.Duration) (Conn, error) {
	c := mysql.NewConfig()
	c.User = user
	c.Net = "unix"
	c.Addr = socket
	c.Timeout = 5 * time.Second
	c.ReadTimeout = readTimeout
	c.InterpolateParams = false
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)
	return SQLConn{DB: db}, nil
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
	rows, err := queryRows(ctx, db, query, 1)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	return rows[0], nil
}

// QueryRowsMap returns every row of query as column -> value (NULL
// columns absent).
func QueryRowsMap(ctx context.Context, db *sql.DB, query string) ([]map[string]string, error) {
	return queryRows(ctx, db, query, 0)
}

// queryRows reads up to limit rows (0: all).
func queryRows(ctx context.Context, db *sql.DB, query string, limit int) ([]map[string]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for (limit == 0 || len(out) < limit) && rows.Next() {
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
		out = append(out, m)
	}
	return out, rows.Err()
}
