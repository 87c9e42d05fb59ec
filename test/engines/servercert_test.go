//go:build engines

package engines

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// testServerCertificateOfTheUsersOwn (every engine): a server
// certificate of the user's own in the mounted Secret
// (spec.tls.serverCertificateSecret, which the controller copies there) is
// what every engine serves, verified by a client that trusts only the
// user's CA, for the certificate's name, without a restart. PostgreSQL's
// replicas that connect to the primary again verify it for that name at
// its address and stream. MySQL's and MariaDB's connect to the primary's
// admin interface (the topology names it, as the instances' source does
// with the field set; MariaDB's is the manager's relay), which serves the
// primary's own certificate, verified by its address against the
// database's CA; the application user is refused there (MySQL: no admin
// grant; MariaDB: not the replication user, nor without an instance's
// client certificate). Taken away, the engines serve the instances' certificates
// again and replicas verify the primary by its address once more.
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
	if c.spec.name != "postgres" {
		c.replicateByAdminPort = true
		c.setPrimary(p)
	}
	for _, n := range nodes {
		waitServed(t, c, n, pki.Pool(corporate.Cert), name, server.Cert)
	}
	served := time.Since(start)

	// Replicas connect again: PostgreSQL's to the name, at the primary's
	// address; MySQL's and MariaDB's to the primary's admin interface.
	reconnect := time.Now()
	endReplicationConnections(t, c, p)
	mustExec(t, p.app(), "INSERT INTO kept VALUES (8201, 'own certificate')")
	for _, r := range replicas {
		waitRow(t, r, 8201, time.Minute)
		switch c.spec.name {
		case "postgres":
			var conninfo string
			if err := r.superuser(t, "postgres").QueryRow("SHOW primary_conninfo").Scan(&conninfo); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(conninfo, "host="+name+" hostaddr="+p.host) || !strings.Contains(conninfo, "sslmode=verify-full") {
				t.Errorf("%s: primary_conninfo %q, want the certificate's name verified at the primary's address", r.name, conninfo)
			}
		case "mysql":
			out, err := r.adminSQL("SELECT HOST, PORT, SSL_CA_FILE FROM performance_schema.replication_connection_configuration")
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%s\t%d\t%s", p.host, p.adminPort, instance.EngineTLSIn(r.runDir).DatabaseCAFile); out != want {
				t.Errorf("%s: the replica's source (host, port, CA file) %q, want the primary's admin interface verified against the database's CA, %q", r.name, out, want)
			}
		case "mariadb":
			files := instance.EngineTLSIn(r.runDir)
			got := mariadbSource(t, r)
			if want := fmt.Sprintf("%s %d %s %s", p.host, p.adminPort, files.DatabaseCAFile, files.InstanceCertFile); got != want {
				t.Errorf("%s: the replica's source (host, port, CA file, client certificate) %q, want the primary's admin interface verified against the database's CA, with the instance's certificate, %q", r.name, got, want)
			}
		}
	}
	switch c.spec.name {
	case "mysql":
		checkAdminInterface(t, c, p)
	case "mariadb":
		checkMariaDBAdminInterface(t, c, p)
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
	if c.spec.name != "postgres" {
		c.replicateByAdminPort = false
		c.setPrimary(p)
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
		if c.spec.name == "mariadb" {
			// Back at the engine's port, presenting no certificate.
			files := instance.EngineTLSIn(r.runDir)
			if got, want := mariadbSource(t, r), fmt.Sprintf("%s %d %s ", p.host, p.port, files.DatabaseCAFile); got != want {
				t.Errorf("%s: the replica's source (host, port, CA file, client certificate) %q, want %q", r.name, got, want)
			}
		}
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
	how := "verifying its name"
	if c.spec.name != "postgres" {
		how = "to the primary's admin interface"
	}
	fig.add("server certificate of the user's own: served by every engine %s after the files, replicas reconnected %s in %s",
		served.Round(100*time.Millisecond), how, reconnected.Round(100*time.Millisecond))
}

// waitServed waits until n's engine serves want, verified against roots
// for name, over a session that answers.
func waitServed(t *testing.T, c *cluster, n *node, roots *x509.CertPool, name string, want *x509.Certificate) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var got *x509.Certificate
		config := &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error { got = cs.PeerCertificates[0]; return nil }}
		db, err := appOverTLS(c, n, config)
		if err != nil {
			t.Fatal(err)
		}
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

// checkAdminInterface: MySQL's admin interface on the primary serves the
// instance's own certificate (of the database's CA, for its name) while
// the engine's port serves the user's, and refuses the application user,
// who lacks SERVICE_CONNECTION_ADMIN.
func checkAdminInterface(t *testing.T, c *cluster, p *node) {
	t.Helper()
	served, err := adminInterfaceSession(t, c, p, c.secrets[instance.SecretUsername], c.secrets[instance.SecretPassword], nil)
	if served == nil {
		t.Fatalf("%s's admin interface (port %d) served no certificate of the database's CA for %s: %v", p.name, p.adminPort, p.name, err)
	}
	if err == nil || !strings.Contains(err.Error(), "SERVICE_CONNECTION_ADMIN") {
		t.Errorf("the application user on %s's admin interface: %v, want a refusal naming SERVICE_CONNECTION_ADMIN", p.name, err)
	}
}

// adminInterfaceSession opens a session at p's admin interface as user,
// presenting creds' certificate when given, and verifying the primary's
// own certificate for its name against the database's CA. It returns
// the certificate served and the session's error (nil when it answered).
func adminInterfaceSession(t *testing.T, c *cluster, p *node, user, password string, creds *api.Credentials) (*x509.Certificate, error) {
	t.Helper()
	var served *x509.Certificate
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = user, password, "tcp", net.JoinHostPort(p.host, strconv.Itoa(p.adminPort))
	cfg.TLS = &tls.Config{RootCAs: pki.Pool(c.ca.CA.Cert), ServerName: p.name, MinVersion: tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error { served = cs.PeerCertificates[0]; return nil }}
	if creds != nil {
		cfg.TLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return creds.Certificate() }
	}
	cfg.Timeout = 5 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	return served, db.Ping()
}

// mariadbSource is a MariaDB replica's source: host, port, CA file and
// client certificate, space-separated.
func mariadbSource(t *testing.T, r *node) string {
	t.Helper()
	db, err := mariadbRoot(r)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	status, err := mysqlfamily.QueryRowMap(context.Background(), db, "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join([]string{status["Master_Host"], status["Master_Port"], status["Master_SSL_CA_File"], status["Master_SSL_Cert"]}, " ")
}

// checkMariaDBAdminInterface: the admin interface the primary's manager
// serves for MariaDB presents the instance's own certificate (of the
// database's CA, for its name) while the engine's port serves the
// user's, and admits the replication user of the database's instances
// only: not a client without an instance's certificate, nor the
// application user with one.
func checkMariaDBAdminInterface(t *testing.T, c *cluster, p *node) {
	t.Helper()
	connect := func(user, password string, creds *api.Credentials) (*x509.Certificate, error) {
		return adminInterfaceSession(t, c, p, user, password, creds)
	}
	app, appPassword := c.secrets[instance.SecretUsername], c.secrets[instance.SecretPassword]
	served, err := connect(app, appPassword, nil)
	if served == nil {
		t.Fatalf("%s's admin interface (port %d) served no certificate of the database's CA for %s: %v", p.name, p.adminPort, p.name, err)
	}
	if err == nil {
		t.Errorf("the application user without a client certificate got in at %s's admin interface", p.name)
	}
	if _, err := connect(app, appPassword, c.ca.Instance("db-9")); err == nil || !strings.Contains(err.Error(), "admits the replication user") {
		t.Errorf("the application user with an instance's certificate at %s's admin interface: %v, want a refusal naming the replication user", p.name, err)
	}
	if _, err := connect(api.ReplicationUser, c.secrets[instance.SecretReplicationPassword], c.ca.Controller()); err == nil || !strings.Contains(err.Error(), "instances only") {
		t.Errorf("the replication user with the controller's certificate at %s's admin interface: %v, want a refusal naming the instances", p.name, err)
	}
	// The replication user with an instance's certificate gets in, and is
	// the engine's replication user there.
	if _, err := connect(api.ReplicationUser, c.secrets[instance.SecretReplicationPassword], c.ca.Instance("db-9")); err != nil {
		t.Errorf("the replication user with an instance's certificate at %s's admin interface: %v", p.name, err)
	}
}
