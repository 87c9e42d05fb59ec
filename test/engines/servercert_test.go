//go:build engines

package engines

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// testServerCertificateOfTheUsersOwn (PostgreSQL): a server certificate
// of the user's own in the mounted Secret (spec.tls.serverCertificateSecret,
// which the controller copies there) is what every engine serves, verified
// by a client that trusts only the user's CA, for the certificate's name,
// without a restart; replicas that connect to the primary again verify it
// for that name at its address and stream; taken away, the engines serve
// the instances' certificates again and replicas verify the primary by its
// address once more.
func testServerCertificateOfTheUsersOwn(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	nodes := append([]*node{p}, replicas...)
	pids := map[string]int{}
	for _, n := range nodes {
		s, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		pids[n.name] = s.EnginePID
	}
	corporate, err := pki.NewCA("corporate root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const name = "db.example.test"
	server, err := corporate.Issue(pki.Leaf{CommonName: name, DNSNames: []string{name}, Lifetime: time.Hour, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := server.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	secretsDir := filepath.Join(c.dir, "secrets")
	files := map[string][]byte{instance.SecretServerCert: server.CertPEM(), instance.SecretServerKey: key, instance.SecretServerCA: corporate.CertPEM()}
	// The certificate last, as the change the managers look for.
	for _, f := range []string{instance.SecretServerKey, instance.SecretServerCA, instance.SecretServerCert} {
		tmp := filepath.Join(secretsDir, "."+f+".new")
		c.writeFile(tmp, string(files[f]), 0o600)
		if err := os.Rename(tmp, filepath.Join(secretsDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	for _, n := range nodes {
		waitServed(t, c, n, pki.Pool(corporate.Cert), name, server.Cert)
	}
	served := time.Since(start)

	// Replicas connect again: to the name, at the primary's address.
	reconnect := time.Now()
	endReplicationConnections(t, c, p)
	mustExec(t, p.app(), "INSERT INTO kept VALUES (8201, 'own certificate')")
	for _, r := range replicas {
		waitRow(t, r, 8201, time.Minute)
		var conninfo string
		if err := r.superuser(t, "postgres").QueryRow("SHOW primary_conninfo").Scan(&conninfo); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(conninfo, "host="+name+" hostaddr="+p.host) || !strings.Contains(conninfo, "sslmode=verify-full") {
			t.Errorf("%s: primary_conninfo %q, want the certificate's name verified at the primary's address", r.name, conninfo)
		}
	}
	checkReplicationOverVerifiedTLS(t, c, p, replicas)
	// And they read ready: following the primary's address, streaming.
	for _, r := range replicas {
		r.waitReady(time.Minute, api.RoleReplica)
	}
	reconnected := time.Since(reconnect)

	// Taken away: the instances' own again.
	for _, f := range []string{instance.SecretServerKey, instance.SecretServerCA, instance.SecretServerCert} {
		if err := os.Remove(filepath.Join(secretsDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := servedCertificate(c, n); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s serves no certificate of the database's CA a minute after the user's went: %v", n.name, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	endReplicationConnections(t, c, p)
	mustExec(t, p.app(), "INSERT INTO kept VALUES (8202, 'instance certificate')")
	for _, r := range replicas {
		waitRow(t, r, 8202, time.Minute)
	}
	for _, n := range nodes {
		s, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		if s.EnginePID != pids[n.name] {
			t.Errorf("%s: engine pid %d -> %d: the engine restarted", n.name, pids[n.name], s.EnginePID)
		}
	}
	fig.add("server certificate of the user's own: served by every engine %s after the files, replicas reconnected verifying its name in %s",
		served.Round(100*time.Millisecond), reconnected.Round(100*time.Millisecond))
}

// waitServed waits until n's engine serves want, verified against roots
// for name, over a session that answers.
func waitServed(t *testing.T, c *cluster, n *node, roots *x509.CertPool, name string, want *x509.Certificate) {
	t.Helper()
	user, password, database := c.secrets[instance.SecretUsername], c.secrets[instance.SecretPassword], c.secrets[instance.SecretDatabase]
	deadline := time.Now().Add(time.Minute)
	for {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=verify-full connect_timeout=5",
			n.host, n.port, user, password, database))
		if err != nil {
			t.Fatal(err)
		}
		var got *x509.Certificate
		cfg.TLSConfig = &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error { got = cs.PeerCertificates[0]; return nil }}
		cfg.Fallbacks = nil
		db := stdlib.OpenDB(*cfg)
		var one int
		err = db.QueryRow("SELECT 1").Scan(&one)
		db.Close()
		if err == nil && got != nil && got.Equal(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not serve the user's certificate for %s a minute after it was mounted: %v", n.name, name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
