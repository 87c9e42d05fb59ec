//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	examplev1typed "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

func labelNamespace(t *testing.T, ns string, labels map[string]string) {
	t.Helper()
	kube := kubeClient(t)
	n, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := kube.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func newDB(name string, engine examplev1.Engine, labels map[string]string) *examplev1.MyDatabase {
	return &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: examplev1.MyDatabaseSpec{Engine: engine, Replicas: ptr.To[int32](1),
			StorageSize: quantity("1Gi")},
	}
}

// TestRBACMatrix checks every verb of two tenants, each bound to the
// cluster's edit role in their own namespace, in their namespace, the other
// tenant's, and across all namespaces, and prints the matrix.
func TestRBACMatrix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nsA, nsB := newNamespace(t), newNamespace(t)
	tenants := map[string]string{"tenant-a": nsA, "tenant-b": nsB}
	for user, ns := range tenants {
		bindEdit(t, ns, user)
	}
	admin := mydbClient(t, restConfig(t)).ExampleV1()
	for _, ns := range []string{nsA, nsB} {
		victim := newDB("victim", examplev1.EngineMySQL, nil)
		// A destination, so that the backup action is RBAC's alone to refuse.
		victim.Spec.Backup = &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
			Endpoint: "http://127.0.0.1:1", Bucket: "backups", CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3"}}}}
		if _, err := admin.MyDatabases(ns).Create(ctx, victim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	type action struct {
		name string
		do   func(c examplev1Client, ns, user string) error
	}
	actions := []action{
		{"get", func(c examplev1Client, ns, _ string) error {
			_, err := c.MyDatabases(ns).Get(ctx, "victim", metav1.GetOptions{})
			return err
		}},
		{"list", func(c examplev1Client, ns, _ string) error {
			_, err := c.MyDatabases(ns).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"watch", func(c examplev1Client, ns, _ string) error {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			w, err := c.MyDatabases(ns).Watch(wctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
		{"create", func(c examplev1Client, ns, user string) error {
			_, err := c.MyDatabases(ns).Create(ctx, newDB("by-"+user, examplev1.EngineMySQL, nil), metav1.CreateOptions{})
			return err
		}},
		{"update", func(c examplev1Client, ns, user string) error {
			// The controller writes the victim's status meanwhile: retry conflicts.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				db, err := admin.MyDatabases(ns).Get(ctx, "victim", metav1.GetOptions{})
				if err != nil {
					return err
				}
				db.Labels = map[string]string{"updated-by": user}
				_, err = c.MyDatabases(ns).Update(ctx, db, metav1.UpdateOptions{})
				return err
			})
		}},
		{"patch", func(c examplev1Client, ns, user string) error {
			_, err := c.MyDatabases(ns).Patch(ctx, "victim", types.MergePatchType, []byte(`{"metadata":{"labels":{"patched-by":"`+user+`"}}}`), metav1.PatchOptions{})
			return err
		}},
		{"delete", func(c examplev1Client, ns, user string) error {
			name := "doomed-" + user
			if _, err := admin.MyDatabases(ns).Create(ctx, newDB(name, examplev1.EngineMySQL, nil), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("setup: %w", err)
			}
			return c.MyDatabases(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}},
		{"deletecollection", func(c examplev1Client, ns, user string) error {
			if _, err := admin.MyDatabases(ns).Create(ctx, newDB("swept-"+user, examplev1.EngineMySQL, map[string]string{"sweep": user}), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("setup: %w", err)
			}
			return c.MyDatabases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "sweep=" + user})
		}},
		{"get status", func(c examplev1Client, ns, _ string) error {
			return c.RESTClient().Get().Namespace(ns).Resource("mydatabases").Name("victim").SubResource("status").Do(ctx).Error()
		}},
		{"update status", func(c examplev1Client, ns, _ string) error {
			db, err := admin.MyDatabases(ns).Get(ctx, "victim", metav1.GetOptions{})
			if err != nil {
				return err
			}
			_, err = c.MyDatabases(ns).UpdateStatus(ctx, db, metav1.UpdateOptions{})
			return err
		}},
		{"patch status", func(c examplev1Client, ns, _ string) error {
			_, err := c.MyDatabases(ns).Patch(ctx, "victim", types.MergePatchType, []byte(`{"status":{"endpoint":"x:1"}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"create backup", func(c examplev1Client, ns, _ string) error {
			_, err := c.MyDatabases(ns).Backup(ctx, "victim", &examplev1.MyDatabaseBackup{}, metav1.CreateOptions{})
			return err
		}},
		{"get scale", func(c examplev1Client, ns, _ string) error {
			_, err := c.MyDatabases(ns).GetScale(ctx, "victim", metav1.GetOptions{})
			return err
		}},
		{"update scale", func(c examplev1Client, ns, _ string) error {
			_, err := c.MyDatabases(ns).UpdateScale(ctx, "victim", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "victim", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, metav1.UpdateOptions{})
			return err
		}},
		{"patch scale", func(c examplev1Client, ns, _ string) error {
			// The typed Patch would decode the answer as a MyDatabase; it is a Scale.
			return c.RESTClient().Patch(types.MergePatchType).Namespace(ns).Resource("mydatabases").Name("victim").
				SubResource("scale").Body([]byte(`{"spec":{"replicas":1}}`)).Do(ctx).Error()
		}},
	}
	// What the edit role grants in one's own namespace; status is the controller's.
	allowedOwn := map[string]bool{"get": true, "list": true, "watch": true, "create": true, "update": true, "patch": true,
		"delete": true, "deletecollection": true, "get status": true, "get scale": true, "update scale": true, "patch scale": true,
		"create backup": true}
	clusterWide := map[string]bool{"list": true, "watch": true}

	var rows []string
	unexpected2xx, unexpectedDenials := 0, 0
	for _, user := range []string{"tenant-a", "tenant-b"} {
		c := mydbClient(t, asUser(t, user)).ExampleV1()
		own := tenants[user]
		other := nsB
		if own == nsB {
			other = nsA
		}
		for _, a := range actions {
			cells := []string{user, a.name}
			for _, scope := range []struct{ name, ns string }{{"own", own}, {"other", other}, {"all", ""}} {
				if scope.ns == "" && !clusterWide[a.name] {
					cells = append(cells, "n/a")
					continue
				}
				err := a.do(c, scope.ns, user)
				want := scope.name == "own" && allowedOwn[a.name]
				cell := "allowed"
				switch {
				case err == nil && !want:
					cell = "ALLOWED (unexpected)"
					unexpected2xx++
				case err != nil && want:
					cell = "DENIED (unexpected): " + err.Error()
					unexpectedDenials++
				case err != nil && !apierrors.IsForbidden(err):
					cell = "ERROR: " + err.Error()
					unexpectedDenials++
				case err != nil:
					cell = "403"
				}
				cells = append(cells, cell)
			}
			rows = append(rows, "| "+strings.Join(cells, " | ")+" |")
		}
	}
	t.Logf("RBAC matrix (edit role in own namespace):\n| tenant | verb | own namespace | other tenant's namespace | all namespaces |\n|---|---|---|---|---|\n%s\nunexpected 2xx: %d, unexpected denials or errors: %d",
		strings.Join(rows, "\n"), unexpected2xx, unexpectedDenials)
	if unexpected2xx != 0 || unexpectedDenials != 0 {
		t.Errorf("%d unexpected 2xx and %d unexpected denials", unexpected2xx, unexpectedDenials)
	}
}

func TestResourceQuotaCountsMyDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	kube := kubeClient(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "mydb"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/mydatabases.example.com": quantity("1")}},
	}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Admission enforces a quota once kube-controller-manager's quota
	// controller has computed its usage; it counts MyDatabases once its
	// discovery (resynced every 30s) has found the aggregated API.
	eventually(t, reconcileTimeout, func() error {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "mydb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := q.Status.Used["count/mydatabases.example.com"]; !ok {
			return fmt.Errorf("quota usage not computed yet")
		}
		return nil
	})
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
	// mydb's quota informer sees the computed status shortly after.
	eventually(t, time.Minute, func() error {
		_, err := dbs.Create(ctx, newDB("first", examplev1.EngineMySQL, nil), metav1.CreateOptions{})
		return err
	})
	// kube-controller-manager recomputes usage from its own cache, which may
	// lag the first create: the quota holds once it agrees. Its informers of
	// mydb's resources can take minutes to list again after the store guard
	// tests restarted mydb on a rolled-back store (seen once, in a whole
	// make e2e), hence the longer wait, and the log of how long it took.
	counted := time.Now()
	defer func() {
		t.Logf("kube-controller-manager counted the first MyDatabase after %s", time.Since(counted).Round(100*time.Millisecond))
	}()
	eventually(t, reconcileTimeout, func() error {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "mydb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if used := q.Status.Used["count/mydatabases.example.com"]; used.Value() != 1 {
			return fmt.Errorf("quota used %s, want 1", used.String())
		}
		return nil
	})
	_, err := dbs.Create(ctx, newDB("second", examplev1.EngineMySQL, nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("second create: %v, want 403 exceeded quota", err)
	}
	t.Logf("second create refused: %v", err)
	q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "mydb", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if used := q.Status.Used["count/mydatabases.example.com"]; used.Value() != 1 {
		t.Errorf("quota used = %s, want 1", used.String())
	}
}

func TestValidatingAdmissionPolicyAppliesToMyDatabases(t *testing.T) {
	// Not parallel: it adds cluster-wide admission configuration.
	ctx := context.Background()
	kube := kubeClient(t)
	prod, dev := newNamespace(t), newNamespace(t)
	labelNamespace(t, prod, map[string]string{"tier": "prod", "e2e.mydb.dev/policy": "postgres-prod-only"})
	labelNamespace(t, dev, map[string]string{"e2e.mydb.dev/policy": "postgres-prod-only"})

	name := "e2e-postgres-prod-only-" + prod
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"mydatabases"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: `object.spec.engine != "postgres" || (has(namespaceObject.metadata.labels) && "tier" in namespaceObject.metadata.labels && namespaceObject.metadata.labels["tier"] == "prod")`,
				Message:    "postgres is only allowed in namespaces labelled tier=prod",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"e2e.mydb.dev/policy": "postgres-prod-only"}}},
		},
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	admin := mydbClient(t, restConfig(t)).ExampleV1()
	// mydb sees the policy through its informer, shortly after it is created.
	var denial error
	eventually(t, time.Minute, func() error {
		_, denial = admin.MyDatabases(dev).Create(ctx, newDB("pg", examplev1.EnginePostgres, nil), metav1.CreateOptions{})
		if denial == nil {
			_ = admin.MyDatabases(dev).Delete(ctx, "pg", metav1.DeleteOptions{})
			return fmt.Errorf("postgres admitted in a namespace without tier=prod")
		}
		return nil
	})
	if !strings.Contains(denial.Error(), "postgres is only allowed in namespaces labelled tier=prod") {
		t.Errorf("denial does not carry the policy's message: %v", denial)
	}
	if _, err := admin.MyDatabases(prod).Create(ctx, newDB("pg", examplev1.EnginePostgres, nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("postgres in a tier=prod namespace: %v", err)
	}
	if _, err := admin.MyDatabases(dev).Create(ctx, newDB("my", examplev1.EngineMySQL, nil), metav1.CreateOptions{}); err != nil {
		t.Errorf("mysql outside prod: %v", err)
	}
}

// TestImpersonationHeadersAreNotTrusted sends X-Remote-User: admin and
// X-Remote-Group: system:masters straight to mydb's port, and through the
// aggregator as a tenant: never may they grant anything.
func TestImpersonationHeadersAreNotTrusted(t *testing.T) {
	t.Parallel()
	pki := filepath.Join(repoRoot, "_output", "local", "pki")
	caPool := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	caPool.AppendCertsFromPEM(caPEM)
	port := localMydbPort(t)
	url := fmt.Sprintf("https://127.0.0.1:%d/apis/example.com/v1/mydatabases", port)

	foreignCA, foreignKey := newCA(t, "intruder-ca")
	foreignCert := issueClientCert(t, foreignCA, foreignKey, "front-proxy-client")
	frontProxyCA, frontProxyKey := loadCA(t, filepath.Join(pki, "front-proxy-ca.crt"), filepath.Join(pki, "front-proxy-ca.key"))
	wrongNameCert := issueClientCert(t, frontProxyCA, frontProxyKey, "not-the-aggregator")

	for _, tc := range []struct {
		name string
		cert *tls.Certificate
	}{
		{"no client certificate", nil},
		{"a certificate from another CA", &foreignCert},
		{"the front-proxy CA but a name not allowed", &wrongNameCert},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: caPool}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{*tc.cert}
			}
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("X-Remote-User", "admin")
			req.Header.Set("X-Remote-Group", "system:masters")
			resp, err := client.Do(req)
			if err != nil {
				t.Logf("refused at the TLS layer: %v", err)
				return
			}
			resp.Body.Close()
			t.Logf("answer: %d", resp.StatusCode)
			if resp.StatusCode < 400 {
				t.Errorf("impersonation headers were trusted: %d", resp.StatusCode)
			}
		})
	}

	t.Run("headers sent through the aggregator by a tenant", func(t *testing.T) {
		ns := newNamespace(t)
		bindEdit(t, ns, "tenant-h")
		cfg := asUser(t, "tenant-h")
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("X-Remote-User", "admin")
				r.Header.Set("X-Remote-Group", "system:masters")
				return rt.RoundTrip(r)
			})
		}
		_, err := mydbClient(t, cfg).ExampleV1().MyDatabases("").List(context.Background(), metav1.ListOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("a tenant listing all namespaces with X-Remote-* headers: %v, want 403", err)
		}
		if _, err := mydbClient(t, cfg).ExampleV1().MyDatabases(ns).List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Errorf("the tenant in its own namespace: %v", err)
		}
	})
}

func newCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func loadCA(t *testing.T, certFile, keyFile string) (*x509.Certificate, any) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert, pair.PrivateKey
}

func issueClientCert(t *testing.T, ca *x509.Certificate, caKey any, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// examplev1Client is the typed client of example.com/v1.
type examplev1Client = examplev1typed.ExampleV1Interface

// TestServingCertificateRotation replaces mydb-apiserver's serving
// certificate on disk and checks that the running server serves the new one,
// and the aggregator still reaches it, without a restart.
func TestServingCertificateRotation(t *testing.T) {
	// Not parallel: it replaces mydb-apiserver's serving certificate.
	pki := filepath.Join(repoRoot, "_output", "local", "pki")
	pid, _ := localMydbProcess(t, filepath.Join(repoRoot, "_output", "local"))
	port := localMydbPort(t)
	ca, caKey := loadCA(t, filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key"))

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial := big.NewInt(time.Now().UnixNano())
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "mydb-apiserver.mydb-system.svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"mydb-apiserver.mydb-system.svc", "mydb-apiserver.mydb-system.svc.cluster.local", "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Key first, then certificate: the server reloads once the pair matches.
	writeAtomically(t, filepath.Join(pki, "mydb-apiserver.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	writeAtomically(t, filepath.Join(pki, "mydb-apiserver.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))

	start := time.Now()
	eventually(t, 2*time.Minute, func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only the serial is read
		if err != nil {
			return err
		}
		defer conn.Close()
		if got := conn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(serial) != 0 {
			return fmt.Errorf("still serving serial %s", got)
		}
		return nil
	})
	t.Logf("new serving certificate served %s after it was written", time.Since(start).Round(100*time.Millisecond))
	if again, _ := localMydbProcess(t, filepath.Join(repoRoot, "_output", "local")); again != pid {
		t.Errorf("mydb-apiserver restarted (pid %d -> %d)", pid, again)
	}
	eventually(t, time.Minute, func() error {
		r := kubectl(t, "", "get", "mdb", "-A")
		if r.err != nil {
			return fmt.Errorf("through the aggregator after rotation: %s", r)
		}
		return nil
	})
}

func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
