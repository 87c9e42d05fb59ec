//go:build engines

package engines

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
	"github.com/mydb-dev/mydb/pkg/pki/pkitest"
)

// testCARotation plays the controller's three steps of a rotation of the
// database's CA (pkg/carotation) on the mounted Secret files, as the
// kubelet updates a projected volume, and checks what each engine does:
// every manager reports the new bundle, then a certificate of the new
// issuer, which its engine serves (verified against the new root alone)
// without a restart; a session opened before answers; a client
// certificate of the old root is refused by the managers; and replicas
// that reconnect to the primary after the old root is gone verify its new
// certificate and stream.
func testCARotation(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	nodes := append([]*node{p}, replicas...)
	before := map[string]api.Status{}
	for _, n := range nodes {
		s, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		before[n.name] = s
	}
	held, err := p.app().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var one int
	if err := held.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	old, next := c.ca, pkitest.New()
	oldRoot, newRoot := pki.Fingerprint(old.CA.Cert), pki.Fingerprint(next.CA.Cert)
	secretsDir := filepath.Join(c.dir, "secrets")
	write := func(issuer *pki.KeyPair, roots ...*x509.Certificate) {
		t.Helper()
		key, err := issuer.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		// Each file by a rename: a manager never reads half of one.
		for name, data := range map[string][]byte{"ca.crt": pki.EncodeCerts(roots...), "issuer.crt": issuer.CertPEM(), "issuer.key": key} {
			tmp := filepath.Join(secretsDir, "."+name+".new")
			c.writeFile(tmp, string(data), 0o600)
			if err := os.Rename(tmp, filepath.Join(secretsDir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitAll := func(what string, done func(*api.Certificates) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for _, n := range nodes {
			n.waitStatus(time.Minute, what, func(s api.Status) bool { return s.Certificates != nil && done(s.Certificates) })
		}
		return time.Since(start)
	}
	start := time.Now()

	// 1. Both roots trusted; the old one still signs.
	write(old.Issuer, old.CA.Cert, next.CA.Cert)
	introduced := waitAll("trusting both roots", func(c *api.Certificates) bool { return slices.Equal(c.Roots, []string{oldRoot, newRoot}) })

	// 2. The new root signs: a new issuer; the managers mint certificates
	// of it, and the engines serve them. The controller meanwhile trusts
	// both roots.
	oldController := c.controller
	// IDs name the roots: the managers' client keeps a connection per ID,
	// across the suites of every engine.
	c.controller = &api.Credentials{ID: "rotation/both-roots/" + oldRoot + "+" + newRoot, Roots: pki.Pool(old.CA.Cert, next.CA.Cert), Certificate: oldController.Certificate}
	write(next.Issuer, next.CA.Cert, old.CA.Cert)
	switched := waitAll("a certificate of the new issuer", func(c *api.Certificates) bool { return c.Issuer == pki.Fingerprint(next.Issuer.Cert) })
	c.ca, c.controller = next, next.Controller()
	for _, n := range nodes {
		deadline := time.Now().Add(30 * time.Second)
		for {
			// Verified against the new root alone (c.ca), for n's name.
			_, err := servedCertificate(c, n)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's engine does not serve a certificate of the new root 30 s after its manager minted one: %v", n.name, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	// 3. The old root goes.
	write(next.Issuer, next.CA.Cert)
	retired := waitAll("trusting the new root alone", func(c *api.Certificates) bool { return slices.Equal(c.Roots, []string{newRoot}) })
	took := time.Since(start)

	// The old root's controller certificate, presented to a manager this
	// client verifies against the new root: the manager refuses it.
	stale := &api.Credentials{ID: "rotation/old-certificate/" + oldRoot + "+" + newRoot, Roots: pki.Pool(next.CA.Cert), Certificate: oldController.Certificate}
	if code := getAs(p.statusAddr, p.name, api.PathStatus, c.ca, stale); code != 0 {
		t.Errorf("GET %s with the old root's controller certificate: %d, want the handshake refused", api.PathStatus, code)
	}
	if code := getAs(p.statusAddr, p.name, api.PathStatus, c.ca, c.controller); code != 200 {
		t.Errorf("GET %s with the new root's controller certificate: %d, want 200", api.PathStatus, code)
	}
	if err := held.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the session opened before the rotation: %v (the engine restarted?)", err)
	}
	for _, n := range nodes {
		s, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		if was := before[n.name]; s.EnginePID != was.EnginePID || s.Restarts != was.Restarts {
			t.Errorf("%s: engine pid %d -> %d, restarts %d -> %d: the engine restarted", n.name, was.EnginePID, s.EnginePID, was.Restarts, s.Restarts)
		}
	}

	// The replicas connect to the primary again, now trusting the new root
	// alone, and stream.
	reconnect := time.Now()
	endReplicationConnections(t, c, p)
	mustExec(t, p.app(), "INSERT INTO kept VALUES (8101, 'after CA rotation')")
	for _, r := range replicas {
		waitRow(t, r, 8101, time.Minute)
	}
	checkReplicationOverVerifiedTLS(t, c, p, replicas)
	fig.add("CA rotated in three steps without a restart: %s (both roots trusted %s, new issuer served %s, old root dropped %s after each step's files; the manager reads them every %s); replicas reconnected under the new root alone in %s",
		took.Round(100*time.Millisecond), introduced.Round(100*time.Millisecond), switched.Round(100*time.Millisecond), retired.Round(100*time.Millisecond),
		"5s", time.Since(reconnect).Round(100*time.Millisecond))
}

// endReplicationConnections ends the primary's side of every replica's
// connection; the replicas connect again by themselves.
func endReplicationConnections(t *testing.T, c *cluster, p *node) {
	t.Helper()
	const senders = "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
	switch c.spec.name {
	case "postgres":
		if _, err := p.superuser(t, "postgres").Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_replication"); err != nil {
			t.Fatal(err)
		}
	case "mariadb":
		db, err := mariadbRoot(p)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		rows, err := db.Query(senders)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			if _, err := db.Exec(fmt.Sprintf("KILL %d", id)); err != nil {
				t.Fatal(err)
			}
		}
	case "mysql":
		out, err := p.adminSQL(senders)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range strings.Fields(out) {
			if _, err := p.adminSQL("KILL " + id); err != nil {
				t.Fatal(err)
			}
		}
	}
}
