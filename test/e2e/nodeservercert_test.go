//go:build e2e && node

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// TestNodeServerCertificateOfYourOwn, on the real node through the
// aggregation layer, with MySQL's and MariaDB's pods exactly as mydb
// writes them: a running two-instance database is given a certificate of
// the user's PKI (a kubernetes.io/tls Secret, as cert-manager writes one)
// in spec.tls.serverCertificateSecret:
//   - both instances serve it on the engine's port, verified by a client
//     that trusts only the user's CA, for the certificate's name;
//   - the replica streams from the primary's admin interface (MySQL's own;
//     for MariaDB the relay its manager serves; the replica's status says
//     from where), which serves the primary's own certificate, verified
//     for its name against the database's CA, and refuses the application
//     user;
//   - a replica pod made anew connects there again and gets a row written
//     after; a third instance clones (MySQL: from the admin interface;
//     MariaDB: through the primary's manager) and streams from there;
//   - with the field taken away, the replica streams from the engine's
//     port again.
//
// PostgreSQL's case is the rig's (TestServerCertificateOfYourOwn).
func TestNodeServerCertificateOfYourOwn(t *testing.T) {
	for _, engineName := range []string{"mysql", "mariadb"} {
		var dc dataCase
		for _, c := range nodeDataCases() {
			if c.engine.name == engineName {
				dc = c
			}
		}
		t.Run(engineName, func(t *testing.T) {
			if dc.engine.name != engineName {
				t.Fatalf("the node runs no %s", engineName)
			}
			t.Parallel()
			testNodeServerCertificateOfYourOwn(t, dc)
		})
	}
}

func testNodeServerCertificateOfYourOwn(t *testing.T, dc dataCase) {
	ctx := context.Background()
	ns := newNamespace(t)
	src := dc.createSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi")}, 20, nil)
	kube := kubeClient(t)
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)

	corporate, err := pki.NewCA("corporate root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const name = "src.db.example.test"
	leaf, err := corporate.Issue(pki.Leaf{CommonName: name, DNSNames: []string{name}, Lifetime: 24 * time.Hour, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	key, err := leaf.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "src-tls"}, Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: leaf.CertPEM(), corev1.TLSPrivateKeyKey: key, "ca.crt": corporate.CertPEM()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app, err := kube.CoreV1().Secrets(ns).Get(ctx, names.Secret("src"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user, password, database := string(app.Data["username"]), string(app.Data["password"]), string(app.Data["database"])
	databaseCA, err := pki.ParseCerts(app.Data["ca.crt"])
	if err != nil {
		t.Fatalf("the published CA: %v", err)
	}

	if _, err := dbs.Patch(ctx, "src", types.MergePatchType, []byte(`{"spec":{"tls":{"serverCertificateSecret":"src-tls"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, in := range src.status.Instances {
		eventually(t, 3*time.Minute, func() error {
			served, err := mysqlServed(in.Address, 3306, user, password, database, pki.Pool(corporate.Cert), name, nil)
			if err != nil {
				return err
			}
			if !served.Equal(leaf.Cert) {
				return fmt.Errorf("%s serves %s, not the user's certificate", in.Name, served.Subject)
			}
			return nil
		})
	}
	t.Logf("both instances serve the user's certificate %s after the patch", time.Since(start).Round(100*time.Millisecond))

	primary := src.status.CurrentPrimary
	primaryAddress := instanceAddress(t, src.status.Instances, primary)
	// The replica's manager says where it streams from (GET /v1/status,
	// with the controller's client certificate).
	creds := controllerCredentials(t, ns, "src")
	replicaStreamsFrom := func(port int) {
		t.Helper()
		want := net.JoinHostPort(primaryAddress, fmt.Sprint(port))
		eventually(t, 3*time.Minute, func() error {
			db, err := dbs.Get(ctx, "src", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, in := range db.Status.Instances {
				if in.Name == primary {
					continue
				}
				if in.Address == "" {
					return fmt.Errorf("%s has no address yet", in.Name)
				}
				s, err := (&api.Client{}).Status(ctx, in.Address, api.Auth{Credentials: creds, Name: in.Name})
				if err != nil {
					return err
				}
				if !s.Ready || !s.Streaming || s.Upstream != want {
					return fmt.Errorf("%s: ready %v (%s), streaming %v from %q; want from %s", in.Name, s.Ready, s.Reason, s.Streaming, s.Upstream, want)
				}
			}
			return nil
		})
	}
	replicaStreamsFrom(33062)
	row := 9001
	rowReachesTheReplica := func() {
		t.Helper()
		mustExec(t, src.primary, fmt.Sprintf("INSERT INTO notes (id, body) VALUES (%d, 'own certificate')", row))
		for _, in := range src.status.Instances {
			if in.Name == primary {
				continue
			}
			replica := src.h.connect(in.Name)
			eventually(t, time.Minute, func() error {
				var n int
				if err := replica.QueryRow("SELECT count(*) FROM notes WHERE id = ?", row).Scan(&n); err != nil || n != 1 {
					return fmt.Errorf("%s: %d rows of id %d, %v", in.Name, n, row, err)
				}
				return nil
			})
		}
		row++
	}
	rowReachesTheReplica()

	t.Run("the admin interface serves the primary's own certificate and refuses the application user", func(t *testing.T) {
		served, err := mysqlServed(primaryAddress, 33062, user, password, "", pki.Pool(databaseCA...), primary, nil)
		if served == nil {
			t.Fatalf("%s's admin interface served no certificate of the database's CA for %s: %v", primary, primary, err)
		}
		switch dc.engine.name {
		case "mysql":
			if err == nil || !strings.Contains(err.Error(), "SERVICE_CONNECTION_ADMIN") {
				t.Errorf("the application user on the admin interface: %v, want a refusal naming SERVICE_CONNECTION_ADMIN", err)
			}
		case "mariadb":
			// The relay requires a client certificate of the database's
			// instances: the handshake fails without one.
			if err == nil {
				t.Error("the application user without a client certificate got in at the admin interface")
			}
			// The controller's certificate is of the database's CA, and
			// still not an instance's.
			cert, err := creds.Certificate()
			if err != nil {
				t.Fatal(err)
			}
			_, err = mysqlServed(primaryAddress, 33062, user, password, "", pki.Pool(databaseCA...), primary, cert)
			if err == nil || !strings.Contains(err.Error(), "instances only") {
				t.Errorf("the application user with the controller's certificate at the admin interface: %v, want a refusal naming the instances", err)
			}
		}
	})

	t.Run("a replica pod made anew streams from the admin interface, a new instance clones from it", func(t *testing.T) {
		replaced := map[string]types.UID{}
		for _, in := range src.status.Instances {
			if in.Name == primary {
				continue
			}
			pod, err := kube.CoreV1().Pods(ns).Get(ctx, in.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			replaced[in.Name] = pod.UID
			if err := kube.CoreV1().Pods(ns).Delete(ctx, in.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		for name, old := range replaced {
			eventually(t, 3*time.Minute, func() error {
				pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if pod.UID == old || pod.Status.PodIP == "" {
					return fmt.Errorf("%s is not made anew yet (uid %s, IP %q)", name, pod.UID, pod.Status.PodIP)
				}
				return nil
			})
		}
		// The status names the new pod's address once the controller
		// read it; its manager then says where it streams from.
		replicaStreamsFrom(33062)
		t.Logf("the new replica pod streams from the admin interface %s after the delete", time.Since(start).Round(100*time.Millisecond))
		rowReachesTheReplica()
		// A third instance has no data: MySQL's clones with CLONE INSTANCE
		// from the primary's admin interface, MariaDB's through the
		// primary's manager.
		if _, err := dbs.Patch(ctx, "src", types.MergePatchType, []byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		src.status = src.h.waitStreaming(3)
		replicaStreamsFrom(33062)
		t.Logf("a third instance cloned and streams from the admin interface %s after the scale", time.Since(start).Round(100*time.Millisecond))
		rowReachesTheReplica()
	})

	t.Run("without the field the replica streams from the engine's port again", func(t *testing.T) {
		if _, err := dbs.Patch(ctx, "src", types.MergePatchType, []byte(`{"spec":{"tls":{"serverCertificateSecret":null}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		replicaStreamsFrom(3306)
		rowReachesTheReplica()
	})
}

// mysqlServed is the certificate MySQL or MariaDB at address:port serves,
// verified against roots for name, and the error of a session as user
// (nil when it answered), presenting client when given.
func mysqlServed(address string, port int, user, password, database string, roots *x509.CertPool, name string, client *tls.Certificate) (*x509.Certificate, error) {
	var served *x509.Certificate
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", net.JoinHostPort(address, fmt.Sprint(port)), database
	cfg.TLS = &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12,
		VerifyConnection: func(cs tls.ConnectionState) error { served = cs.PeerCertificates[0]; return nil }}
	if client != nil {
		cfg.TLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return client, nil }
	}
	cfg.Timeout = 5 * time.Second
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	err = db.Ping()
	return served, err
}
