//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// TestCARotationWithoutARestart, for each engine on the rig, through the
// aggregation layer: `kubectl mydb rotate-ca` on a database of three
// instances under a writer replaces its root CA:
//   - the three phases happen in order, each once (events);
//   - no engine restarts (each engine's pid and restart count unchanged),
//     no write fails, a verified session opened before goes on answering,
//     and the replicas stream and receive new rows after;
//   - every manager then trusts the new root alone and holds a
//     certificate of the new issuer; a client certificate of the old root
//     is refused by the managers, one of the new root answered;
//   - the CA bundle (the ca-bundle and the credentials Secrets) is the new
//     root alone: an application verifies the engine with it
//     (sslmode=verify-full), one that still trusts the old root only is
//     refused with a certificate error.
func TestCARotationWithoutARestart(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			dbs, _, h, status := startShop(t, restConfig(t), tc, 0, "")
			ctx := context.Background()
			kube := kubeClient(t)
			primary := status.CurrentPrimary
			primaryIP := instanceAddress(t, status.Instances, primary)

			oldCA, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.CASecret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			oldRoot := mustCerts(t, oldCA.Data["ca.crt"])[0]
			app, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.Secret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			user, password, database := string(app.Data["username"]), string(app.Data["password"]), string(app.Data["database"])
			oldCAFile := filepath.Join(t.TempDir(), "old-ca.crt")
			if err := os.WriteFile(oldCAFile, oldCA.Data["ca.crt"], 0o600); err != nil {
				t.Fatal(err)
			}
			before := managerReports(t, status.Instances, credentialsOf(t, oldCA.Data))

			// A verified session opened before the rotation, kept open.
			session, err := openVerified(tc.engine.name, primaryIP, user, password, database, oldCAFile, pki.Pool(oldRoot))
			if err != nil {
				t.Fatal(err)
			}
			defer session.Close()
			session.SetMaxOpenConns(1)

			// A writer on the primary throughout.
			writer := h.connect(primary)
			writeCtx, stopWriting := context.WithCancel(ctx)
			var writes, failed atomic.Int64
			var lastError atomic.Value
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1; writeCtx.Err() == nil; i++ {
					if _, err := writer.ExecContext(writeCtx, fmt.Sprintf("INSERT INTO acks VALUES (%d)", i)); err != nil {
						if writeCtx.Err() == nil {
							failed.Add(1)
							lastError.Store(err.Error())
						}
					} else {
						writes.Add(1)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()

			events := map[string]int{}
			for _, reason := range []string{"CARotationStarted", "CARotationSwitched", "CARotated"} {
				events[reason] = eventCount(t, h.ns, reason)
			}
			started := time.Now()
			if res := kubectlMydb(t, "rotate-ca", "shop", "-n", h.ns); res.err != nil || !strings.Contains(res.stdout, "rotating its CA") {
				t.Fatalf("kubectl mydb rotate-ca: %v\n%s%s", res.err, res.stdout, res.stderr)
			}
			var phases []string
			var done *examplev1.MyDatabase
			eventually(t, 5*time.Minute, func() error {
				db, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
				if err != nil {
					return err
				}
				ca := db.Status.CertificateAuthority
				if ca == nil {
					return fmt.Errorf("no status.certificateAuthority")
				}
				if ca.Rotation != "" && (len(phases) == 0 || phases[len(phases)-1] != ca.Rotation) {
					phases = append(phases, ca.Rotation)
					t.Logf("%s after %s: %s (%s)", ca.Rotation, time.Since(started).Round(time.Second), ca.Message, ca.Fingerprint)
				}
				if ca.Fingerprint == pki.Fingerprint(oldRoot) || ca.Rotation != "" || ca.LastRotationTime == nil {
					return fmt.Errorf("root %s, rotation %q: %s", ca.Fingerprint, ca.Rotation, ca.Message)
				}
				done = db
				return nil
			})
			took := time.Since(started)
			stopWriting()
			wg.Wait()
			t.Logf("rotated in %s (phases seen %v); %d writes meanwhile, %d failed", took.Round(time.Second), phases, writes.Load(), failed.Load())
			if failed.Load() > 0 {
				t.Errorf("%d writes failed during the rotation; the last: %v", failed.Load(), lastError.Load())
			}
			order := []string{"Introducing", "Switched", "Retiring"}
			if !slices.Contains(phases, "Introducing") || !slices.IsSortedFunc(phases, func(a, b string) int { return slices.Index(order, a) - slices.Index(order, b) }) ||
				len(slices.Compact(slices.Clone(phases))) != len(phases) {
				t.Errorf("phases seen %v, want Introducing, Switched, Retiring in that order, each once", phases)
			}
			for reason, n := range events {
				waitEvents(t, h.ns, reason, n, 1)
			}

			newCA, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.CASecret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			newRoot := mustCerts(t, newCA.Data["ca.crt"])[0]
			if fp := pki.Fingerprint(newRoot); fp != done.Status.CertificateAuthority.Fingerprint || len(newCA.Data["previous-ca.crt"]) > 0 || len(newCA.Data["next-ca.crt"]) > 0 {
				t.Errorf("the CA Secret holds root %s and %d/%d bytes of another, status says %s", fp,
					len(newCA.Data["previous-ca.crt"]), len(newCA.Data["next-ca.crt"]), done.Status.CertificateAuthority.Fingerprint)
			}
			certificates, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.CertificatesSecret("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			issuer := mustCerts(t, certificates.Data["issuer.crt"])[0]
			if err := issuer.CheckSignatureFrom(newRoot); err != nil {
				t.Errorf("the certificates Secret's issuer is not of the new root: %v", err)
			}

			t.Run("no engine restarted and every manager took the new root alone", func(t *testing.T) {
				after := managerReports(t, status.Instances, credentialsOf(t, newCA.Data))
				for name, was := range before {
					now := after[name]
					if now.EnginePID != was.EnginePID || now.Restarts != was.Restarts {
						t.Errorf("%s: engine pid %d -> %d, restarts %d -> %d: the engine restarted", name, was.EnginePID, now.EnginePID, was.Restarts, now.Restarts)
					}
					if c := now.Certificates; c == nil || !slices.Equal(c.Roots, []string{pki.Fingerprint(newRoot)}) || c.Issuer != pki.Fingerprint(issuer) {
						t.Errorf("%s reports certificates %+v, want root %s alone and issuer %s", name, c, pki.Fingerprint(newRoot), pki.Fingerprint(issuer))
					}
				}
			})

			t.Run("a client certificate of the old root is refused by the managers", func(t *testing.T) {
				old := credentialsOf(t, oldCA.Data)
				refused := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
					MinVersion: tls.VersionTLS12, RootCAs: pki.Pool(newRoot), ServerName: primary,
					GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return old.Certificate() },
				}}}
				resp, err := refused.Get("https://" + net.JoinHostPort(primaryIP, fmt.Sprint(api.Port)) + api.PathStatus)
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						t.Errorf("GET %s with the old root's controller certificate: 200, want a refusal", api.PathStatus)
					}
				}
			})

			t.Run("applications verify the engines with the new bundle alone", func(t *testing.T) {
				bundle, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.CABundleSecret("shop"), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				var credentials map[string][]byte
				eventually(t, 30*time.Second, func() error {
					s, err := kube.CoreV1().Secrets(h.ns).Get(ctx, names.Secret("shop"), metav1.GetOptions{})
					if err != nil {
						return err
					}
					credentials = s.Data
					return nil
				})
				for name, data := range map[string][]byte{"ca-bundle": bundle.Data["ca.crt"], "credentials": credentials["ca.crt"]} {
					if certs := mustCerts(t, data); len(certs) != 1 || !certs[0].Equal(newRoot) {
						t.Errorf("the %s Secret's ca.crt holds %d certificates, want the new root alone", name, len(certs))
					}
				}
				if string(credentials["password"]) != password {
					t.Error("the credentials Secret made again holds another password")
				}
				newCAFile := filepath.Join(t.TempDir(), "ca.crt")
				if err := os.WriteFile(newCAFile, bundle.Data["ca.crt"], 0o600); err != nil {
					t.Fatal(err)
				}
				for _, in := range done.Status.Instances {
					verified, err := openVerified(tc.engine.name, in.Address, user, password, database, newCAFile, pki.Pool(newRoot))
					if err != nil {
						t.Errorf("%s with the new bundle: %v", in.Name, err)
						continue
					}
					if !sessionEncrypted(t, tc.engine.name, verified) {
						t.Errorf("%s: the verified session is not encrypted", in.Name)
					}
					verified.Close()
				}
				stale, err := openVerified(tc.engine.name, primaryIP, user, password, database, oldCAFile, pki.Pool(oldRoot))
				if err == nil {
					err = stale.Ping()
					stale.Close()
				}
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), "certificate") {
					t.Errorf("a client trusting the old root alone: %v, want a certificate error", err)
				}
			})

			t.Run("the session opened before answers and the replicas stream", func(t *testing.T) {
				var one int
				if err := session.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
					t.Errorf("the session opened before the rotation: %v", err)
				}
				h.waitStreaming(3)
				marker := int(writes.Load()) + 1_000_000
				mustExec(t, h.connect(primary), fmt.Sprintf("INSERT INTO acks VALUES (%d)", marker))
				for _, in := range done.Status.Instances {
					if in.Name == primary {
						continue
					}
					replica := h.connect(in.Name)
					eventually(t, 30*time.Second, func() error {
						var n int
						if err := replica.QueryRow(fmt.Sprintf("SELECT count(*) FROM acks WHERE id = %d", marker)).Scan(&n); err != nil {
							return err
						}
						if n != 1 {
							return fmt.Errorf("%s has not received the row written after the rotation", in.Name)
						}
						return nil
					})
				}
			})
		})
	}
}

// managerReports are the instances' managers' statuses, read with creds.
func managerReports(t *testing.T, instances []examplev1.InstanceStatus, creds *api.Credentials) map[string]*api.Status {
	t.Helper()
	reports := map[string]*api.Status{}
	client := &api.Client{}
	for _, in := range instances {
		eventually(t, 30*time.Second, func() error {
			s, err := client.Status(context.Background(), in.Address, api.Auth{Credentials: creds, Name: in.Name})
			if err != nil {
				return err
			}
			reports[in.Name] = s
			return nil
		})
	}
	return reports
}
