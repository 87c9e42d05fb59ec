//go:build engines

package engines

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// testCertificateRenewal: a replica restarted with the shortest
// --certificate-lifetime renews its certificate every 20 s or so, and its
// engine serves each new one to new connections without a restart
// (PostgreSQL pg_reload_conf, MariaDB FLUSH NO_WRITE_TO_BINLOG SSL, MySQL
// ALTER INSTANCE RELOAD TLS): a session opened before the renewal still
// answers, the new certificate verifies against the database's CA,
// replication goes on, and the reload wrote no transaction of the
// replica's own. The replica is then restarted with the default lifetime.
func testCertificateRenewal(t *testing.T, c *cluster, p, r *node, fig *figures) {
	r.extraArgs = []string{"--certificate-lifetime=3m"}
	r.stop()
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	defer func() {
		r.extraArgs = nil
		r.stop()
		r.start()
		r.waitReady(2*time.Minute, api.RoleReplica)
	}()
	first, err := servedCertificate(c, r)
	if err != nil {
		t.Fatal(err)
	}
	held, err := r.app().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var one int
	if err := held.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	off := r.logSize()
	start := time.Now()
	var renewed *x509.Certificate
	for time.Since(start) < 90*time.Second {
		time.Sleep(time.Second)
		cert, err := servedCertificate(c, r)
		if err != nil {
			t.Fatalf("a connection after %s: %v", time.Since(start).Round(time.Second), err)
		}
		if cert.SerialNumber.Cmp(first.SerialNumber) != 0 {
			renewed = cert
			break
		}
	}
	if renewed == nil {
		t.Fatalf("the engine served the certificate of %s for 90 s (its renewal is due at %s); the log says:\n%s",
			first.NotBefore.Format(time.RFC3339), pki.RenewAt(first).Format(time.RFC3339), r.logSince(off))
	}
	if !strings.Contains(r.logSince(off), "the engine reloaded its renewed certificate") {
		t.Errorf("a new certificate served, but the manager did not log the reload:\n%s", r.logSince(off))
	}
	if err := held.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
		t.Errorf("the session opened before the renewal: %v (the engine restarted?)", err)
	}
	// Replication goes on: a row the primary writes now reaches r.
	mustExec(t, p.app(), "CREATE TABLE renewal (id INT PRIMARY KEY)")
	mustExec(t, p.app(), "INSERT INTO renewal VALUES (1)")
	replica := r.app()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		err := replica.QueryRow("SELECT id FROM renewal").Scan(&n)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log := r.logSince(off)
			if len(log) > 6000 {
				log = log[len(log)-6000:]
			}
			status, _ := r.status()
			t.Fatalf("no row replicated to %s within 30 s of the renewal: %v; its manager reports %+v%s; its log says:\n%s",
				r.name, err, status, mariadbReplicaStatus(c, r), log)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The reload wrote no transaction of the replica's own: an errant GTID
	// stops MariaDB's replication (gtid_strict_mode, which the row above
	// would have caught) and makes a MySQL replica unfit for promotion.
	if c.spec.name == "mysql" {
		own, err := r.adminSQL("SELECT @@global.gtid_executed")
		if err != nil {
			t.Fatal(err)
		}
		subset, err := p.adminSQL(fmt.Sprintf("SELECT GTID_SUBSET('%s', @@global.gtid_executed)", strings.ReplaceAll(own, "\n", "")))
		if err != nil || subset != "1" {
			t.Errorf("%s executed transactions the primary never did (%s): %v", r.name, own, err)
		}
	}
	fig.add("certificate renewed and served without a restart: %s after the first one was served (lifetime 3m, backdated 5m)",
		time.Since(start).Round(time.Second))
}

// servedCertificate connects to n's engine over TLS as the application
// user and answers the certificate it served, verified against the
// database's CA for n's name.
func servedCertificate(c *cluster, n *node) (*x509.Certificate, error) {
	var served *x509.Certificate
	config := &tls.Config{
		// Verified below, by hand: the name to check is the instance's, not
		// the address dialled.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			certs := make([]*x509.Certificate, 0, len(raw))
			for _, b := range raw {
				cert, err := x509.ParseCertificate(b)
				if err != nil {
					return err
				}
				certs = append(certs, cert)
			}
			if len(certs) == 0 {
				return errors.New("no certificate")
			}
			intermediates := x509.NewCertPool()
			for _, cert := range certs[1:] {
				intermediates.AddCert(cert)
			}
			if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pki.Pool(c.ca.CA.Cert), Intermediates: intermediates, DNSName: n.name}); err != nil {
				return err
			}
			served = certs[0]
			return nil
		},
	}
	db, err := appOverTLS(c, n, config)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
		return nil, err
	}
	if served == nil {
		return nil, errors.New("the session was not over TLS")
	}
	return served, nil
}

// appOverTLS opens sessions of the application user to n's engine over
// TLS with config (which verifies the server).
func appOverTLS(c *cluster, n *node, config *tls.Config) (*sql.DB, error) {
	user, password, database := c.secrets[instance.SecretUsername], c.secrets[instance.SecretPassword], c.secrets[instance.SecretDatabase]
	if c.spec.name == "postgres" {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=require connect_timeout=5",
			n.host, n.port, user, password, database))
		if err != nil {
			return nil, err
		}
		cfg.TLSConfig, cfg.Fallbacks = config, nil
		return stdlib.OpenDB(*cfg), nil
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", net.JoinHostPort(n.host, strconv.Itoa(n.port)), database
	cfg.TLS, cfg.Timeout = config, 5*time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(connector), nil
}

// mariadbReplicaStatus is what SHOW SLAVE STATUS says on a MariaDB
// replica, for a failure's message.
func mariadbReplicaStatus(c *cluster, r *node) string {
	if c.spec.name != "mariadb" {
		return ""
	}
	db, err := mariadbRoot(r)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	status, err := mysqlfamily.QueryRowMap(context.Background(), db, "SHOW SLAVE STATUS")
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("; SHOW SLAVE STATUS: IO %s, SQL %s, last IO error %q, last SQL error %q, master %s:%s",
		status["Slave_IO_Running"], status["Slave_SQL_Running"], status["Last_IO_Error"], status["Last_SQL_Error"], status["Master_Host"], status["Master_Port"])
}
