//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// TestZeroTrustInsideTheCluster, for each engine on the rig, through the
// aggregation layer:
//   - an application verifies the server with the CA bundle of the
//     credentials Secret (sslmode=verify-full; the MySQL driver's verified
//     TLS) and is served over TLS; a CA of its own does not verify it;
//   - the credentials Secret holds the application's user and the CA, no
//     superuser or replication password, and the superuser's password
//     does not log in over the network;
//   - a process holding the replication password but no client
//     certificate is refused by every manager endpoint (401), and one
//     speaking plain HTTP gets no answer from the manager;
//   - 100 clients flooding the primary's manager for twice failoverDelay
//     (with the controller's own certificate, the worst case) cause no
//     failover and never make the primary unready.
func TestZeroTrustInsideTheCluster(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			const delay = 5 * time.Second
			dbs, _, h, status := startShop(t, restConfig(t), tc, delay, "")
			ctx := context.Background()
			kube := kubeClient(t)
			primary := status.CurrentPrimary
			ip := instanceAddress(t, status.Instances, primary)

			// One credential per purpose.
			app, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.Secret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"superuser-password", "replication-password", "issuer.key", "ca.key"} {
				if _, ok := app.Data[key]; ok {
					t.Errorf("the applications' Secret holds %s", key)
				}
			}
			instance, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.InstanceSecret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			t.Run("an application verifies the server with the published CA", func(t *testing.T) {
				caFile := filepath.Join(t.TempDir(), "ca.crt")
				if err := os.WriteFile(caFile, app.Data["ca.crt"], 0o600); err != nil {
					t.Fatal(err)
				}
				user, password, database := string(app.Data["username"]), string(app.Data["password"]), string(app.Data["database"])
				verified, err := openVerified(tc.engine.name, ip, user, password, database, caFile, pki.Pool(mustCerts(t, app.Data["ca.crt"])...))
				if err != nil {
					t.Fatal(err)
				}
				defer verified.Close()
				if encrypted := sessionEncrypted(t, tc.engine.name, verified); !encrypted {
					t.Error("the verified session is not encrypted")
				}
				// A CA the database's certificates do not chain to fails.
				other, err := pki.NewCA("someone else", time.Now())
				if err != nil {
					t.Fatal(err)
				}
				otherFile := filepath.Join(t.TempDir(), "other.crt")
				if err := os.WriteFile(otherFile, other.CertPEM(), 0o600); err != nil {
					t.Fatal(err)
				}
				wrong, err := openVerified(tc.engine.name, ip, user, password, database, otherFile, pki.Pool(other.Cert))
				if err == nil {
					err = wrong.Ping()
					wrong.Close()
				}
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), "certificate") {
					t.Errorf("a client trusting another CA: %v, want a certificate error", err)
				}
			})

			t.Run("the superuser does not log in over the network", func(t *testing.T) {
				user := map[string]string{"postgres": "postgres", "mariadb": "root"}[tc.engine.name]
				db, err := tc.open(ip, user, string(instance.Data["superuser-password"]), "postgres")
				if err == nil {
					err = db.Ping()
					db.Close()
				}
				// PostgreSQL: pg_hba.conf rejects (28000); MariaDB: root
				// authenticates by unix_socket only (access denied).
				if err == nil || !(strings.Contains(err.Error(), "28000") || strings.Contains(err.Error(), "Access denied")) {
					t.Errorf("%s over TCP with the superuser password: %v, want a refusal", user, err)
				}
			})

			t.Run("the replication password opens no manager endpoint", func(t *testing.T) {
				password := string(instance.Data["replication-password"])
				if password == "" {
					t.Fatal("the instance Secret has no replication password")
				}
				noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
					TLSClientConfig: &tls.Config{RootCAs: controllerCredentials(t, h.ns, "shop").Roots, ServerName: primary}}}
				for _, e := range []struct{ method, path, body string }{
					{http.MethodGet, api.PathStatus, ""},
					{http.MethodGet, api.PathClone, ""},
					{http.MethodPost, api.PathBackups, `{"id":"x","destination":{"s3":{"endpoint":"http://127.0.0.1:1","bucket":"b","key":"k"}}}`},
					{http.MethodGet, api.PathBackups + "/x", ""},
					{http.MethodPost, api.PathRestore, `{"id":"x"}`},
					{http.MethodGet, api.PathRestore, ""},
				} {
					req, _ := http.NewRequest(e.method, "https://"+net.JoinHostPort(ip, fmt.Sprint(api.Port))+e.path, strings.NewReader(e.body))
					req.SetBasicAuth(api.ReplicationUser, password)
					resp, err := noCert.Do(req)
					if err != nil {
						t.Errorf("%s %s: %v", e.method, e.path, err)
						continue
					}
					resp.Body.Close()
					if e.path == api.PathClone && tc.engine.name == "postgres" && resp.StatusCode == http.StatusNotFound {
						continue // PostgreSQL replicas clone with pg_basebackup: no such endpoint
					}
					if resp.StatusCode != http.StatusUnauthorized {
						t.Errorf("%s %s with the replication password and no certificate: %d, want 401", e.method, e.path, resp.StatusCode)
					}
				}
				// Plain HTTP, as before: the manager speaks only TLS.
				resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + net.JoinHostPort(ip, fmt.Sprint(api.Port)) + api.PathStatus)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						t.Error("GET /v1/status over plain HTTP answered 200")
					}
				}
			})

			t.Run("a flood of status reads causes no failover", func(t *testing.T) {
				controller := controllerCredentials(t, h.ns, "shop")
				flood := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
					TLSClientConfig: controller.TLSConfig(primary), MaxIdleConnsPerHost: 100}}
				anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
					TLSClientConfig: &tls.Config{RootCAs: controller.Roots, ServerName: primary}, MaxIdleConnsPerHost: 100}}
				base := "https://" + net.JoinHostPort(ip, fmt.Sprint(api.Port))
				ctx, cancel := context.WithTimeout(ctx, 2*delay)
				defer cancel()
				var reads, failures atomic.Int64
				var wg sync.WaitGroup
				for i := range 100 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						client, path := flood, api.PathStatus
						if i%2 == 1 {
							client, path = anonymous, api.PathReadyz
						}
						for ctx.Err() == nil {
							req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
							resp, err := client.Do(req)
							if err != nil {
								if ctx.Err() == nil {
									failures.Add(1)
								}
								continue
							}
							resp.Body.Close()
							reads.Add(1)
						}
					}()
				}
				// Meanwhile the status must keep the primary ready and in place.
				unready := ""
				for ctx.Err() == nil {
					db, err := dbs.Get(context.Background(), "shop", metav1.GetOptions{})
					if err == nil {
						if db.Status.CurrentPrimary != primary {
							unready = "the primary moved to " + db.Status.CurrentPrimary
						}
						for _, in := range db.Status.Instances {
							if in.Name == primary && !in.Ready && unready == "" {
								unready = "the primary read unready: " + in.Message
							}
						}
					}
					time.Sleep(250 * time.Millisecond)
				}
				wg.Wait()
				t.Logf("%d reads from 100 clients in %s (%d failed)", reads.Load(), 2*delay, failures.Load())
				if unready != "" {
					t.Error(unready)
				}
				db, err := dbs.Get(context.Background(), "shop", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if db.Status.CurrentPrimary != primary {
					t.Errorf("after the flood the primary is %s, want %s", db.Status.CurrentPrimary, primary)
				}
				if reads.Load() < 100 {
					t.Errorf("only %d reads: the flood did not happen", reads.Load())
				}
			})
		})
	}
}

// instanceAddress is the address status gives instance name.
func instanceAddress(t *testing.T, instances []examplev1.InstanceStatus, name string) string {
	t.Helper()
	for _, in := range instances {
		if in.Name == name && in.Address != "" {
			return in.Address
		}
	}
	t.Fatalf("no address for %s in %+v", name, instances)
	return ""
}

func mustCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCerts(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// tlsConfigs numbers the MySQL driver's registered TLS configurations.
var tlsConfigs atomic.Int64

// openVerified connects to the engine at host over TLS, verifying its
// certificate names host against the CA (caFile for libpq-style options,
// roots for the MySQL driver).
func openVerified(engine, host, user, password, database, caFile string, roots *x509.CertPool) (*sql.DB, error) {
	switch engine {
	case "postgres":
		db, err := sql.Open("pgx", fmt.Sprintf("host=%s port=5432 user=%s password=%s dbname=%s sslmode=verify-full sslrootcert=%s connect_timeout=5",
			host, user, password, database, caFile))
		if err != nil {
			return nil, err
		}
		return db, db.Ping()
	default:
		name := fmt.Sprintf("verified%d", tlsConfigs.Add(1))
		if err := mysql.RegisterTLSConfig(name, &tls.Config{RootCAs: roots, ServerName: host, MinVersion: tls.VersionTLS12}); err != nil {
			return nil, err
		}
		db, err := sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=5s&tls=%s", user, password, net.JoinHostPort(host, "3306"), database, name))
		if err != nil {
			return nil, err
		}
		return db, db.Ping()
	}
}

// sessionEncrypted asks the engine whether db's session is over TLS.
func sessionEncrypted(t *testing.T, engine string, db *sql.DB) bool {
	t.Helper()
	db.SetMaxOpenConns(1)
	switch engine {
	case "postgres":
		var ssl bool
		if err := db.QueryRow("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
			t.Fatal(err)
		}
		return ssl
	default:
		var name, cipher string
		if err := db.QueryRow("SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
			t.Fatal(err)
		}
		return cipher != ""
	}
}
