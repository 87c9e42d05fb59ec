//go:build engines

package engines

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// reconcileObjects gives p's manager req as the controller does and waits
// for its report of it; it answers the results and how long the
// reconciliation took.
func reconcileObjects(t *testing.T, p *node, req api.ObjectsRequest) (map[string]string, time.Duration) {
	t.Helper()
	client, host := p.manager()
	start := time.Now()
	if _, err := client.ReconcileObjects(context.Background(), host, p.auth(), req); err != nil {
		t.Fatalf("POST %s: %v", api.PathObjects, err)
	}
	var report *api.ObjectsReport
	waitFor(t, time.Minute, "report of "+req.Hash, func() error {
		s, err := p.status()
		if err != nil {
			return err
		}
		if report = s.Objects; report == nil || report.Running || report.ResultsHash != req.Hash {
			return fmt.Errorf("report %+v", report)
		}
		return nil
	})
	took := time.Since(start)
	errs := map[string]string{}
	for _, r := range report.Results {
		if r.Error != "" {
			errs[string(r.Kind)+" "+r.Name] = r.Error
		}
	}
	if got, want := len(report.Results), len(req.Databases)+len(req.Roles); got != want {
		t.Errorf("%d results for %d databases and roles", got, want)
	}
	return errs, took
}

// login opens a session of user on database of n, or says why it cannot.
func login(t *testing.T, n *node, user, password, database string) (*sql.Conn, error) {
	t.Helper()
	db, err := n.c.spec.openApp(n.host, n.port, user, password, database)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if err := conn.PingContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

func mustLogin(t *testing.T, n *node, user, password, database string) *sql.Conn {
	t.Helper()
	conn, err := login(t, n, user, password, database)
	if err != nil {
		t.Fatalf("%s: %s cannot log in to %s: %v", n.name, user, database, err)
	}
	return conn
}

func execAll(conn *sql.Conn, stmts ...string) error {
	for _, s := range stmts {
		if _, err := conn.ExecContext(context.Background(), s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// testObjects: the databases and roles of a request appear on the primary
// with the privileges it says, replicate, change (a password, a level of
// access) and go (a role with its session, a database with its data),
// and an object the engine refuses is reported without stopping the rest.
func testObjects(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	ctx := context.Background()
	app := c.secrets[instance.SecretDatabase]
	appUser, appPassword := c.secrets[instance.SecretUsername], c.secrets[instance.SecretPassword]
	client, host := replicas[0].manager()
	if _, err := client.ReconcileObjects(ctx, host, replicas[0].auth(), api.ObjectsRequest{Hash: "r"}); !errors.Is(err, api.ErrBusy) {
		t.Errorf("a replica took databases and roles: %v, want 409", err)
	}

	first := api.ObjectsRequest{Hash: "h1",
		Databases: []api.DatabaseObject{{Name: "orders", Owner: "alice"}, {Name: "stock"}},
		Roles: []api.RoleObject{
			{Name: "alice", Password: "alice-1", ConnectionLimit: 2},
			{Name: "bob", Password: "bob-1", Privileges: map[string]api.Access{"orders": api.AccessReadOnly, app: api.AccessReadOnly}},
		}}
	errs, took := reconcileObjects(t, p, first)
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	fig.add("roles and databases: 2 databases and 2 roles made in %s", took.Round(time.Millisecond))

	alice := mustLogin(t, p, "alice", "alice-1", "orders")
	if err := execAll(alice, "CREATE TABLE items (id int PRIMARY KEY, name varchar(20))", "INSERT INTO items VALUES (1, 'one')"); err != nil {
		t.Fatalf("the owner of orders: %v", err)
	}
	bob := mustLogin(t, p, "bob", "bob-1", "orders")
	var n int
	// Made after the grant: readable by default.
	if err := bob.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 1 {
		t.Errorf("bob (ReadOnly) reads %d rows of a table alice made after the grant: %v", n, err)
	}
	for _, s := range []string{"INSERT INTO items VALUES (2, 'two')", "CREATE TABLE bobs (id int)", "DROP TABLE items"} {
		if err := execAll(bob, s); err == nil {
			t.Errorf("bob (ReadOnly) ran %s", s)
		}
	}
	if _, err := login(t, p, "bob", "bob-1", "stock"); err == nil {
		t.Errorf("bob logged in to stock, where he has no privilege")
	}
	if _, err := login(t, p, "alice", "alice-1", "stock"); err == nil {
		t.Errorf("alice logged in to stock, where she has no privilege")
	}
	owner := mustLogin(t, p, appUser, appPassword, "stock")
	if err := execAll(owner, "CREATE TABLE shelves (id int)"); err != nil {
		t.Errorf("the application user, stock's owner: %v", err)
	}
	// alice holds one session; a second is her limit, a third is refused.
	second := mustLogin(t, p, "alice", "alice-1", "orders")
	if _, err := login(t, p, "alice", "alice-1", "orders"); err == nil {
		t.Errorf("alice opened a third session past her limit of 2")
	}
	second.Close()

	// The replicas have the roles and the data.
	for _, r := range replicas {
		waitFor(t, 30*time.Second, r.name+"'s copy of orders.items for bob", func() error {
			conn, err := login(t, r, "bob", "bob-1", "orders")
			if err != nil {
				return err
			}
			defer conn.Close()
			return conn.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n)
		})
	}

	// The same request again (the controller's resend, every ten
	// minutes): PostgreSQL writes no role that is already as asked, and
	// MariaDB nothing at all (its binlog position stays; MySQL sets its
	// salted password again, which it cannot compare).
	if c.spec.name == "mariadb" {
		position := func() string {
			var pos string
			if err := p.app().QueryRow("SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
				t.Fatal(err)
			}
			return pos
		}
		before := position()
		again := first
		again.Hash = "h1-again"
		if errs, _ := reconcileObjects(t, p, again); len(errs) > 0 {
			t.Fatalf("the same request again: %v", errs)
		}
		if after := position(); after != before {
			t.Errorf("the same request again wrote to the binlog: %s -> %s", before, after)
		}
	}
	if c.spec.name == "postgres" {
		rowVersion := func() string {
			var xmin string
			if err := p.superuser(t, "").QueryRow("SELECT xmin::text FROM pg_authid WHERE rolname = 'alice'").Scan(&xmin); err != nil {
				t.Fatal(err)
			}
			return xmin
		}
		before := rowVersion()
		again := first
		again.Hash = "h1-again"
		if errs, _ := reconcileObjects(t, p, again); len(errs) > 0 {
			t.Fatalf("the same request again: %v", errs)
		}
		if after := rowVersion(); after != before {
			t.Errorf("alice's pg_authid row was written again (xmin %s -> %s) by the same request", before, after)
		}
	}

	// A new password and more access for bob; alice's session stays.
	second2 := first
	second2.Hash = "h2"
	second2.Roles = []api.RoleObject{first.Roles[0],
		{Name: "bob", Password: "bob-2", Privileges: map[string]api.Access{"orders": api.AccessReadWrite}}}
	if errs, _ := reconcileObjects(t, p, second2); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	if _, err := login(t, p, "bob", "bob-1", "orders"); err == nil {
		t.Errorf("bob's old password still logs in")
	}
	bob2 := mustLogin(t, p, "bob", "bob-2", "orders")
	if err := execAll(bob2, "INSERT INTO items VALUES (2, 'two')", "UPDATE items SET name = 'uno' WHERE id = 1"); err != nil {
		t.Errorf("bob (ReadWrite): %v", err)
	}
	if err := execAll(bob2, "CREATE TABLE bobs (id int)"); err == nil {
		t.Errorf("bob (ReadWrite) made a table")
	}
	if _, err := login(t, p, "bob", "bob-2", app); err == nil {
		t.Errorf("bob logged in to %s, whose access the request took away", app)
	}
	if err := alice.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 2 {
		t.Errorf("alice's session after the change: %d rows, %v", n, err)
	}

	// bob goes with his session, stock with its table; one database the
	// engine refuses is reported and the rest is done.
	bad := api.DatabaseObject{Name: "badly_collated", Collation: "no_such_collation"}
	third := api.ObjectsRequest{Hash: "h3",
		Databases: []api.DatabaseObject{first.Databases[0], {Name: "stock", Absent: true}, bad},
		Roles:     []api.RoleObject{first.Roles[0], {Name: "bob", Absent: true}}}
	errs, took = reconcileObjects(t, p, third)
	if len(errs) != 1 || !strings.Contains(errs["database badly_collated"], "no_such_collation") {
		t.Errorf("results: %v, want only badly_collated refused, naming the collation", errs)
	}
	fig.add("roles and databases: a role and a database dropped in %s", took.Round(time.Millisecond))
	if err := bob2.QueryRowContext(ctx, "SELECT 1").Scan(&n); err == nil {
		t.Errorf("bob's session outlived his role")
	}
	if _, err := login(t, p, "bob", "bob-2", "orders"); err == nil {
		t.Errorf("bob logs in after his role was dropped")
	}
	if _, err := login(t, p, appUser, appPassword, "stock"); err == nil {
		t.Errorf("stock is still there")
	}
	if err := alice.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 2 {
		t.Errorf("orders after the drops: %d rows, %v", n, err)
	}
	alice.Close()
	owner.Close()
}
