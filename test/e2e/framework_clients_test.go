//go:build e2e

package e2e

// The clients and identities tests reach the servers with: straight at mydb-apiserver
// (directConfig, localMydbPort), as a user (asUser), through kubectl and its plugin, and raw
// requests of the API.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// backupRaw posts a backup request through kubectl create --raw.
func backupRaw(t *testing.T, ns, db, body string, as ...string) result {
	t.Helper()
	file := filepath.Join(t.TempDir(), "backup.json")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"create", "--raw", fmt.Sprintf("/apis/example.com/v1/namespaces/%s/mydatabases/%s/backup", ns, db), "-f", file}
	if len(as) > 0 {
		args = append(args, "--as", as[0])
	}
	return kubectl(t, "", args...)
}

// directConfig reaches a mydb-apiserver on port straight, not through the
// aggregator, as the cluster admin (a client certificate mydb verifies
// against the cluster's client CA).
func directConfig(t *testing.T, port int) *rest.Config {
	t.Helper()
	cfg := restConfig(t)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	return cfg
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// scrape is a mydb-apiserver's /metrics.
func scrape(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	eventually(t, 30*time.Second, func() error {
		resp, err := client.Get(cfg.Host + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != 200 {
			err = fmt.Errorf("/metrics: %d", resp.StatusCode)
		}
		return err
	})
	return string(body)
}

// kubectlMydb runs "kubectl mydb ARGS" with the plugin that make e2e builds
// into _output/bin on PATH, as a user would.
func kubectlMydb(t *testing.T, args ...string) result {
	t.Helper()
	if _, err := os.Stat(filepath.Join(repoRoot, "_output", "bin", "kubectl-mydb")); err != nil {
		t.Fatalf("no plugin binary (make e2e builds it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// kubectl takes no flags before a plugin's name; the plugin reads
	// the same --kubeconfig flag as kubectl.
	cmd := exec.CommandContext(ctx, kubectlBin, append(append([]string{"mydb"}, args...), "--kubeconfig", kubeconfig)...)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(repoRoot, "_output", "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("kubectl mydb %s", strings.Join(args, " "))
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// bindEdit gives user the cluster's standard edit role in namespace ns,
// which mydb's ClusterRoles aggregate into.
func bindEdit(t *testing.T, ns, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-edit"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if _, err := kubeClient(t).RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntilAllowed(t, user, authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "example.com", Resource: "mydatabases"})
}

// waitUntilAllowed waits until kube-apiserver's authorizer grants user
// what attributes name. A binding takes effect when kube-apiserver's RBAC
// informer has seen it, a moment after the create returns: a request in
// that moment is refused (CI met it). mydb asks the same authorizer, and
// has cached no answer for a user that asked nothing yet.
func waitUntilAllowed(t *testing.T, user string, attributes authorizationv1.ResourceAttributes) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		review, err := kubeClient(t).AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: &attributes},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !review.Status.Allowed {
			return fmt.Errorf("%s may not %s %s/%s in %s yet: %s", user, attributes.Verb, attributes.Resource, attributes.Subresource, attributes.Namespace, review.Status.Reason)
		}
		return nil
	})
}

// asUser returns a config that acts as user, through kube-apiserver.
func asUser(t *testing.T, user string) *rest.Config {
	t.Helper()
	cfg := restConfig(t)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func localMydbPort(t *testing.T) int {
	t.Helper()
	_, args := localMydbProcess(t, e2eLocalDir)
	for _, a := range args {
		var port int
		if _, err := fmt.Sscanf(a, "--secure-port=%d", &port); err == nil {
			return port
		}
	}
	t.Fatal("no --secure-port in mydb-apiserver's command line")
	return 0
}

// rv is the resourceVersion of a MyDatabase in JSON.
func rv(t *testing.T, body []byte) string {
	t.Helper()
	var m metav1.PartialObjectMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m.ResourceVersion
}

// controllerCredentials are what mydb's controller calls database db's
// instance managers with: a client certificate its CA (the CA Secret)
// signed for the controller. Cached per CA Secret, as it is now.
func controllerCredentials(t *testing.T, ns, db string) *api.Credentials {
	t.Helper()
	secret, err := kubeClient(t).CoreV1().Secrets(ns).Get(context.Background(), names.CASecret(db), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CA Secret of %s/%s: %v", ns, db, err)
	}
	// A database made again under its name has a CA of its own, and a
	// rotation changes the Secret.
	key := ns + "/" + db + "/" + string(secret.UID) + "/" + secret.ResourceVersion
	controllerCreds.Lock()
	defer controllerCreds.Unlock()
	if c, ok := controllerCreds.m[key]; ok {
		return c
	}
	c := credentialsOf(t, secret.Data)
	if controllerCreds.m == nil {
		controllerCreds.m = map[string]*api.Credentials{}
	}
	controllerCreds.m[key] = c
	return c
}

// credentialsOf are a controller's credentials made with the root of the
// CA Secret data.
func credentialsOf(t *testing.T, data map[string][]byte) *api.Credentials {
	t.Helper()
	ca, err := pki.ParseKeyPair(data["ca.crt"], data["ca.key"])
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(pki.Leaf{CommonName: pki.ControllerName, Lifetime: time.Hour, Client: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert := leaf.TLSCertificate()
	return &api.Credentials{ID: "e2e/controller/" + pki.Fingerprint(ca.Cert) + "/" + pki.Fingerprint(leaf.Cert), Roots: pki.Pool(ca.Cert),
		Certificate: func() (*tls.Certificate, error) { return cert, nil }}
}

var controllerCreds struct {
	sync.Mutex
	m map[string]*api.Credentials
}
