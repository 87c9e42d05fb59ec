//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// TestServerCertificateOfYourOwn, on the rig through the aggregation
// layer: a running PostgreSQL database of three instances is given a
// certificate of the user's PKI (a kubernetes.io/tls Secret, as
// cert-manager writes one) in spec.tls.serverCertificateSecret:
//   - every instance then serves it, verified by a client that trusts
//     only the user's CA, for the certificate's name, without a restart;
//   - the replicas, re-pointed to verify the primary for that name at its
//     address, stream, and a row written after reaches them;
//   - `kubectl mydb psql` verifies it through the API server's tunnel;
//   - a renewed certificate in the Secret is served in its place, without
//     a restart; one that does not verify against its ca.crt is not served
//     (the previous one is) and Degraded says why;
//   - MariaDB takes the field too (the real node runs it).
func TestServerCertificateOfYourOwn(t *testing.T) {
	t.Parallel()
	tc := replicationCases[0] // PostgreSQL
	dbs, r, h, status := startShop(t, restConfig(t), tc, 0, "")
	ctx := context.Background()
	kube := kubeClient(t)

	corporate, err := pki.NewCA("corporate root", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const name = "shop.db.example.test"
	issue := func(ca *pki.KeyPair) (*x509.Certificate, map[string][]byte) {
		leaf, err := ca.Issue(pki.Leaf{CommonName: name, DNSNames: []string{name}, Lifetime: 24 * time.Hour, Server: true}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		key, err := leaf.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Cert, map[string][]byte{corev1.TLSCertKey: leaf.CertPEM(), corev1.TLSPrivateKeyKey: key, "ca.crt": corporate.CertPEM()}
	}
	first, data := issue(corporate)
	secret, err := kube.CoreV1().Secrets(h.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-tls"},
		Type: corev1.SecretTypeTLS, Data: data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := managerReports(t, status.Instances, controllerCredentials(t, h.ns, "shop"))
	if _, err := dbs.Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"tls":{"serverCertificateSecret":"shop-tls"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, in := range status.Instances {
		waitServedByName(t, h, in.Address, pki.Pool(corporate.Cert), name, first)
	}
	t.Logf("every instance serves the user's certificate %s after the patch", time.Since(start).Round(100*time.Millisecond))

	t.Run("the replicas verify the primary by the certificate's name and stream", func(t *testing.T) {
		// The engine says what each replica connects with (its log, which
		// the rig keeps: the application user may not read it).
		for _, in := range status.Instances {
			if in.Name == status.CurrentPrimary {
				continue
			}
			want := fmt.Sprintf(`primary_conninfo" changed to "host=%s hostaddr=%s `, name, instanceAddress(t, status.Instances, status.CurrentPrimary))
			eventually(t, time.Minute, func() error {
				log, err := os.ReadFile(filepath.Join(r.dir, in.Name+".log"))
				if err != nil || !strings.Contains(string(log), want) {
					return fmt.Errorf("%s's log does not say %q (%v)", in.Name, want, err)
				}
				return nil
			})
		}
		h.waitStreaming(3)
		mustExec(t, h.connect(status.CurrentPrimary), "INSERT INTO acks VALUES (424242)")
		for _, in := range status.Instances {
			if in.Name == status.CurrentPrimary {
				continue
			}
			replica := h.connect(in.Name)
			eventually(t, 30*time.Second, func() error {
				var n int
				if err := replica.QueryRow("SELECT count(*) FROM acks WHERE id = 424242").Scan(&n); err != nil || n != 1 {
					return fmt.Errorf("%s: %d rows, %v", in.Name, n, err)
				}
				return nil
			})
		}
	})

	t.Run("kubectl mydb psql verifies it through the tunnel", func(t *testing.T) {
		eventually(t, 30*time.Second, func() error {
			// The plugin itself: kubectl passes what follows "--" to psql.
			out, err := exec.Command(filepath.Join(repoRoot, "_output", "bin", "kubectl-mydb"), "--kubeconfig", kubeconfig, "-n", h.ns,
				"psql", "shop", "--", "-tAc", "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "t" {
				return fmt.Errorf("kubectl mydb psql: %v: %s", err, out)
			}
			return nil
		})
	})

	t.Run("a renewed certificate is served without a restart; one that does not verify is not", func(t *testing.T) {
		renewed, data := issue(corporate)
		secret.Data = data
		if secret, err = kube.CoreV1().Secrets(h.ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, in := range status.Instances {
			waitServedByName(t, h, in.Address, pki.Pool(corporate.Cert), name, renewed)
		}
		after := managerReports(t, status.Instances, controllerCredentials(t, h.ns, "shop"))
		for n, was := range before {
			if now := after[n]; now.EnginePID != was.EnginePID || now.Restarts != was.Restarts {
				t.Errorf("%s: engine pid %d -> %d, restarts %d -> %d", n, was.EnginePID, now.EnginePID, was.Restarts, now.Restarts)
			}
		}

		stranger, err := pki.NewCA("someone else", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, bad := issue(stranger) // signed by another CA than its ca.crt
		secret.Data = bad
		if secret, err = kube.CoreV1().Secrets(h.ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			db, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionDegraded)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "ServerCertificateInvalid" || !strings.Contains(c.Message, "shop-tls") {
				return fmt.Errorf("Degraded = %+v", c)
			}
			return nil
		})
		for _, in := range status.Instances {
			waitServedByName(t, h, in.Address, pki.Pool(corporate.Cert), name, renewed)
		}
	})

	// Admission takes it for MariaDB too (a dry run): the real node's
	// TestNodeServerCertificateOfYourOwn runs it.
	t.Run("MariaDB takes it", func(t *testing.T) {
		db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "orders"}, Spec: examplev1.MyDatabaseSpec{
			Engine: examplev1.EngineMariaDB, Version: "10.11", StorageSize: quantity("1Gi"),
			TLS: &examplev1.TLSSpec{ServerCertificateSecret: "shop-tls"}}}
		if _, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(h.ns).Create(ctx, db, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a MariaDB database with spec.tls.serverCertificateSecret (dry run): %v", err)
		}
	})
}

// waitServedByName waits until the engine at address serves want,
// verified against roots for name (libpq's host=name hostaddr=address).
func waitServedByName(t *testing.T, h *replicationHarness, address string, roots *x509.CertPool, name string, want *x509.Certificate) {
	t.Helper()
	app, err := kubeClient(t).CoreV1().Secrets(h.ns).Get(context.Background(), names.Secret(h.db), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		cfg, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=5432 user=%s password=%s dbname=%s sslmode=verify-full connect_timeout=5",
			address, app.Data["username"], app.Data["password"], app.Data["database"]))
		if err != nil {
			return err
		}
		var got *x509.Certificate
		cfg.TLSConfig = &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12,
			VerifyConnection: func(cs tls.ConnectionState) error { got = cs.PeerCertificates[0]; return nil }}
		cfg.Fallbacks = nil
		db := stdlib.OpenDB(*cfg)
		defer db.Close()
		var one int
		if err := db.QueryRow("SELECT 1").Scan(&one); err != nil {
			return err
		}
		if got == nil || !got.Equal(want) {
			return fmt.Errorf("%s serves another certificate", address)
		}
		return nil
	})
}
