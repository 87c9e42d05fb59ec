//go:build engines

package engines

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// credentialsUnderTest carries a credential made before the promotion to
// the step after it, which checks the new primary expires it.
type credentialsUnderTest struct {
	beforePromotion *api.Credential
}

// newCredential has p's manager make a user of role for the Kubernetes user
// who, as mydb-apiserver does for mydatabases/credentials.
func newCredential(t *testing.T, p *node, who string, role api.CredentialRole, life time.Duration) *api.Credential {
	t.Helper()
	client, host := p.manager()
	req := api.CredentialRequest{
		User: api.CredentialUser(who, fmt.Sprint(time.Now().UnixNano())), Role: role, ValidUntil: time.Now().Add(life).Truncate(time.Second),
		Requester: api.Requester{Username: who, Groups: []string{"system:authenticated"}, RequestID: "engine-suite"},
	}
	cred, err := client.CreateCredential(context.Background(), host, p.auth(), req)
	if err != nil {
		t.Fatalf("credential for %s: %v", who, err)
	}
	return cred
}

// openConn is one session of user on n, as a client holding it open.
func openConn(t *testing.T, n *node, cred *api.Credential) (*sql.Conn, error) {
	t.Helper()
	return login(t, n, cred.User, cred.Password, n.c.secrets[instance.SecretDatabase])
}

// canLogIn tells whether cred logs in on n, holding no connection after.
func canLogIn(t *testing.T, n *node, cred *api.Credential) error {
	t.Helper()
	db, err := n.c.spec.openApp(n.host, n.port, cred.User, cred.Password, n.c.secrets[instance.SecretDatabase])
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// testCredentials: a readwrite user works as the application user; a
// readonly one reads on the primary and on a replica (the user
// replicated) and writes nothing; at its expiry no login succeeds anywhere
// and the sessions it held end within the managers' bound.
func testCredentials(t *testing.T, c *cluster, p *node, replicas []*node, later *credentialsUnderTest, fig *figures) {
	r := replicas[0]
	rw := newCredential(t, p, "alice@example.com", api.CredentialReadWrite, time.Hour)
	conn, err := openConn(t, p, rw)
	if err != nil {
		t.Fatalf("the readwrite user cannot log in: %v", err)
	}
	ctx := context.Background()
	for _, s := range []string{"CREATE TABLE made_by_credential (id int PRIMARY KEY)", "INSERT INTO made_by_credential VALUES (1)"} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("the readwrite user: %s: %v", s, err)
		}
	}
	conn.Close()
	// What it made is the application's: the application user reads it
	// (and in Postgres owns it), whatever happens to the short-lived user.
	var n int
	if err := p.app().QueryRow("SELECT count(*) FROM made_by_credential").Scan(&n); err != nil || n != 1 {
		t.Fatalf("the application user reads %d rows of the credential's table: %v", n, err)
	}
	if c.spec.name == "postgres" {
		var owner string
		if err := p.app().QueryRow("SELECT tableowner FROM pg_tables WHERE tablename = 'made_by_credential'").Scan(&owner); err != nil ||
			owner != c.secrets[instance.SecretUsername] {
			t.Errorf("the table's owner is %q (%v), want the application user", owner, err)
		}
	}

	life := 12 * time.Second
	ro := newCredential(t, p, "system:serviceaccount:reports:nightly", api.CredentialReadOnly, life)
	validUntil := time.Now().Add(life).Truncate(time.Second)
	held := map[string]*sql.Conn{}
	for _, in := range []*node{p, r} {
		var conn *sql.Conn
		// The replica has the user once it replayed its creation.
		deadline := time.Now().Add(30 * time.Second)
		for {
			conn, err = openConn(t, in, ro)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("%s: the readonly user cannot log in: %v", in.name, err)
		}
		var rows int
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM made_by_credential").Scan(&rows); err != nil || rows != 1 {
			t.Errorf("%s: the readonly user reads %d rows: %v", in.name, rows, err)
		}
		held[in.name] = conn
	}
	for _, s := range []string{"INSERT INTO made_by_credential VALUES (2)", "CREATE TABLE not_allowed (id int)", "DROP TABLE made_by_credential"} {
		if _, err := held[p.name].ExecContext(ctx, s); err == nil {
			t.Errorf("the readonly user ran %s on the primary", s)
		}
	}

	// Expiry: the sessions end within the managers' bound on the primary
	// and the replica, and no login succeeds after.
	ended := map[string]time.Duration{}
	deadline := validUntil.Add(instance.CredentialExpiryInterval + 10*time.Second)
	for len(ended) < len(held) && time.Now().Before(deadline) {
		for name, conn := range held {
			if _, done := ended[name]; done {
				continue
			}
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := conn.QueryRowContext(qctx, "SELECT 1").Scan(new(int))
			cancel()
			if err != nil {
				ended[name] = time.Since(validUntil)
				if ended[name] < 0 {
					t.Errorf("%s: the session ended %s before the credential expired: %v", name, -ended[name], err)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	for name := range held {
		d, ok := ended[name]
		if !ok {
			t.Errorf("%s: the expired user's session is still open %s after its expiry", name, time.Since(validUntil).Round(time.Second))
			continue
		}
		fig.add("an expired credential's session on the %s ended %.1fs after its expiry (bound %s)",
			map[bool]string{true: "primary", false: "replica"}[name == p.name], d.Seconds(), instance.CredentialExpiryInterval)
	}
	for _, in := range []*node{p, r} {
		if err := canLogIn(t, in, ro); err == nil {
			t.Errorf("%s: the expired user still logs in", in.name)
		}
	}
	if err := canLogIn(t, p, rw); err != nil {
		t.Errorf("the readwrite user, an hour from its expiry, no longer logs in: %v", err)
	}
}

// testCredentialExpiresAfterPromotion: a credential the old primary made
// expires on the new one (its record replicated), which drops it.
func testCredentialExpiresAfterPromotion(t *testing.T, newPrimary *node, later *credentialsUnderTest) {
	cred := later.beforePromotion
	if cred == nil {
		t.Fatal("no credential was made before the promotion")
	}
	if time.Now().Before(cred.ValidUntil) {
		if err := canLogIn(t, newPrimary, cred); err != nil {
			t.Errorf("before its expiry, the credential does not log in on the new primary: %v", err)
		}
	}
	deadline := cred.ValidUntil.Add(instance.CredentialExpiryInterval + 10*time.Second)
	var err error
	for {
		// Asked at least once, however late this step runs.
		err = canLogIn(t, newPrimary, cred)
		if err != nil && time.Now().After(cred.ValidUntil) || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err == nil {
		t.Fatal("the credential still logs in on the new primary after its expiry")
	}
	if newPrimary.c.spec.name == "postgres" {
		// Past VALID UNTIL the engine refuses the login by itself; the
		// manager drops the role too.
		var n int
		app := newPrimary.app()
		for deadline := time.Now().Add(instance.CredentialExpiryInterval + 10*time.Second); time.Now().Before(deadline); {
			if err := app.QueryRow("SELECT count(*) FROM pg_roles WHERE rolname = $1", cred.User).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Errorf("the new primary did not drop the expired role %s", cred.User)
	}
}
