// Package fakeconn is a mysqlfamily.Conn for tests: it records the
// statements run and answers queries from a function, so the engines'
// statement sequences and decisions are tested without a server.
package fakeconn

import (
	"context"
	"sync"
)

// Conn is a fake admin connection.
type Conn struct {
	mu       sync.Mutex
	executed []string
	queries  []string
	closed   bool
	// Row answers a query (nil: no row).
	Row func(query string) map[string]string
	// Rows answers a query of every row (nil: none).
	Rows func(query string) []map[string]string
	// Fail, when set, makes the statement it returns an error for fail;
	// the statements after it in the same Exec do not run.
	Fail func(stmt string) error
	// OnExec runs after each statement that succeeded.
	OnExec func(stmt string)
}

// Exec implements mysqlfamily.Conn.
func (c *Conn) Exec(_ context.Context, stmts ...string) error {
	for _, s := range stmts {
		if c.Fail != nil {
			if err := c.Fail(s); err != nil {
				return err
			}
		}
		c.mu.Lock()
		c.executed = append(c.executed, s)
		c.mu.Unlock()
		if c.OnExec != nil {
			c.OnExec(s)
		}
	}
	return nil
}

// QueryRow implements mysqlfamily.Conn.
func (c *Conn) QueryRow(_ context.Context, query string) (map[string]string, error) {
	c.record(query)
	if c.Row == nil {
		return nil, nil
	}
	return c.Row(query), nil
}

// QueryRows implements mysqlfamily.Conn.
func (c *Conn) QueryRows(_ context.Context, query string) ([]map[string]string, error) {
	c.record(query)
	if c.Rows == nil {
		return nil, nil
	}
	return c.Rows(query), nil
}

func (c *Conn) record(query string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries = append(c.queries, query)
}

// Ping implements mysqlfamily.Conn.
func (c *Conn) Ping(context.Context) error { return nil }

// Close implements mysqlfamily.Conn.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// Executed returns the statements run so far and forgets them.
func (c *Conn) Executed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.executed
	c.executed = nil
	return e
}

// Queries returns the queries asked so far.
func (c *Conn) Queries() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.queries...)
}
