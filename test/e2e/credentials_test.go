//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mydb-dev/mydb/pkg/access"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// TestCredentialsThroughTheAggregator, for each engine on the rig: a user
// whose only grant is create and readonly on mydatabases/credentials gets
// a database user through kube-apiserver's aggregation layer, connects
// with it over verified TLS, reads and cannot write; asking for readwrite
// is refused (403), as is any request of a user bound to nothing; an
// editor's readwrite user writes, as the application. The grant is in
// kube-apiserver's audit log under the request ID the engine's user is
// named with, and mydb's etcd holds none of the passwords.
func TestCredentialsThroughTheAggregator(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			_, _, h, status := startShop(t, restConfig(t), tc, 0, "")
			ctx := context.Background()
			ns := h.ns
			kube := kubeClient(t)
			role := &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "shop-readonly"},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{"example.com"}, Resources: []string{"mydatabases/credentials"}, ResourceNames: []string{"shop"}, Verbs: []string{"create", "readonly"}},
					{APIGroups: []string{"example.com"}, Resources: []string{"mydatabases/connect"}, ResourceNames: []string{"shop"}, Verbs: []string{"create"}},
				},
			}
			if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			binding := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "analyst"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
				Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "analyst"}},
			}
			if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitUntilAllowed(t, "analyst", authorizationv1.ResourceAttributes{Namespace: ns, Verb: "readonly", Group: "example.com", Resource: "mydatabases", Subresource: "credentials", Name: "shop"})
			bindEdit(t, ns, "dev")
			credentialsAs := func(user string, role examplev1.CredentialRole) (*examplev1.MyDatabaseCredentialRequest, error) {
				req := &examplev1.MyDatabaseCredentialRequest{Spec: examplev1.MyDatabaseCredentialRequestSpec{Role: role, ExpirationSeconds: ptr.To[int64](600)}}
				return mydbClient(t, asUser(t, user)).ExampleV1().MyDatabases(ns).CreateCredentials(ctx, "shop", req, metav1.CreateOptions{})
			}
			kubeAudit := filepath.Join(e2eLocalDir, "logs", "kube-apiserver-audit.log")
			auditFrom := auditSize(t, kubeAudit)

			// RBAC has its say before mydb (kube-apiserver), then the
			// role's verb (mydb's admission).
			if _, err := credentialsAs("nobody", examplev1.CredentialRoleReadOnly); !apierrors.IsForbidden(err) {
				t.Errorf("a user bound to nothing: %v, want 403", err)
			}
			if _, err := credentialsAs("analyst", examplev1.CredentialRoleReadWrite); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"readwrite" verb`) {
				t.Errorf("readwrite for the analyst: %v, want 403 naming the readwrite verb", err)
			}
			ro, err := credentialsAs("analyst", examplev1.CredentialRoleReadOnly)
			if err != nil {
				t.Fatal(err)
			}
			s := ro.Status
			if !strings.HasPrefix(s.Username, "k8s_analyst_") || s.Password == "" || s.Instance != status.CurrentPrimary ||
				s.Host != "shop-rw."+ns+".svc" || s.Port == 0 || s.Database == "" || s.CACertificate == "" {
				t.Fatalf("answer %+v", s)
			}
			if life := time.Until(s.ExpirationTimestamp.Time); life < 9*time.Minute || life > 11*time.Minute {
				t.Errorf("expires in %s, want 10 minutes", life)
			}

			// The credential logs in over TLS verified with the CA it came
			// with, reads, and writes nothing.
			ip := instanceAddress(t, status.Instances, status.CurrentPrimary)
			caFile := filepath.Join(t.TempDir(), "ca.crt")
			if err := os.WriteFile(caFile, []byte(s.CACertificate), 0o600); err != nil {
				t.Fatal(err)
			}
			reader, err := openVerified(tc.engine.name, ip, s.Username, s.Password, s.Database, caFile, pki.Pool(mustCerts(t, []byte(s.CACertificate))...))
			if err != nil {
				t.Fatalf("the readonly credential: %v", err)
			}
			defer reader.Close()
			var n int
			if err := reader.QueryRow("SELECT count(*) FROM acks").Scan(&n); err != nil {
				t.Errorf("the readonly credential cannot read: %v", err)
			}
			if _, err := reader.Exec("INSERT INTO acks VALUES (1)"); err == nil {
				t.Error("the readonly credential wrote")
			}

			rw, err := credentialsAs("dev", examplev1.CredentialRoleReadWrite)
			if err != nil {
				t.Fatal(err)
			}
			writer, err := tc.open(ip, rw.Status.Username, rw.Status.Password, rw.Status.Database)
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close()
			mustExec(t, writer, "INSERT INTO acks VALUES (2)")

			// Audited, by the ID the user is named with.
			found := false
			for _, e := range readAudit(t, kubeAudit, auditFrom) {
				// The test impersonates: the event's user is the admin, the
				// impersonated one is whom the credential is for.
				who := e.User.Username
				if e.ImpersonatedUser != nil {
					who = e.ImpersonatedUser.Username
				}
				if e.ObjectRef == nil || e.ObjectRef.Subresource != "credentials" || e.ObjectRef.Namespace != ns || who != "analyst" ||
					e.ResponseStatus == nil || e.ResponseStatus.Code != 201 {
					continue
				}
				if api.CredentialUser("analyst", string(e.AuditID)) == s.Username {
					found = true
				}
				if e.ResponseObject != nil {
					t.Error("the audit log holds the answer (and its password)")
				}
			}
			if !found {
				t.Errorf("no audit event of kube-apiserver names the grant of %s", s.Username)
			}

			t.Run("the connect tunnel", func(t *testing.T) { testTunnel(t, tc, ns, ro.Status) })
			t.Run("a tunnel to a replica", func(t *testing.T) { testTunnelToAReplica(t, tc, ns, status.CurrentPrimary, rw.Status) })

			// Nothing of either answer is stored in mydb's etcd.
			etcd := localComponent(t, e2eLocalDir, "mydb-etcd")
			client, err := clientv3.New(clientv3.Config{Endpoints: []string{flagValue(t, etcd.args, "--listen-client-urls")}, DialTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			all, err := client.Get(ctx, "\x00", clientv3.WithFromKey())
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range all.Kvs {
				for _, secret := range []string{s.Password, rw.Status.Password} {
					if strings.Contains(string(kv.Value), secret) {
						t.Errorf("mydb's etcd holds a credential's password under %s", kv.Key)
					}
				}
			}
			t.Logf("scanned %d keys of mydb's etcd", len(all.Kvs))
		})
	}
}

// testTunnel: through mydatabases/connect (kube-apiserver's aggregation
// layer, then mydb-apiserver) the analyst, who may not port-forward or
// read a Secret, reaches the primary: 50 clients query at once for a
// minute with no error, and a session outlives kube-apiserver's 60 s
// request timeout. A user bound to nothing is refused (403).
func testTunnel(t *testing.T, tc replicationCase, ns string, cred examplev1.MyDatabaseCredentialRequestStatus) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := access.DialTunnel(ctx, asUser(t, "nobody"), ns, "shop", ""); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("a tunnel for a user bound to nothing: %v, want 403", err)
	}
	analyst := asUser(t, "analyst")
	var tunnels atomic.Int64
	port := listenTunnels(t, func(ctx context.Context) (*access.TunnelConn, error) {
		return access.DialTunnel(ctx, analyst, ns, "shop", "")
	}, func(*access.TunnelConn) { tunnels.Add(1) })
	open := func() *sql.DB {
		t.Helper()
		var db *sql.DB
		var err error
		if tc.engine.name == "postgres" {
			db, err = sql.Open("pgx", fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=require connect_timeout=10",
				port, cred.Username, cred.Password, cred.Database))
		} else {
			db, err = sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s?timeout=10s&tls=skip-verify", cred.Username, cred.Password, port, cred.Database))
		}
		if err != nil {
			t.Fatal(err)
		}
		return db
	}

	// A session held open past kube-apiserver's request timeout: one
	// connection, which database/sql may not replace behind the test's back.
	longDB := open()
	defer longDB.Close()
	long, err := longDB.Conn(ctx)
	if err != nil {
		t.Fatalf("the first connection through the tunnel: %v", err)
	}
	defer long.Close()
	var n int
	if err := long.QueryRowContext(ctx, "SELECT count(*) FROM acks").Scan(&n); err != nil {
		t.Fatalf("the first query through the tunnel: %v", err)
	}

	const clients, tunnelSeconds = 50, 60
	var queries, failures atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(tunnelSeconds * time.Second)
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db := open()
			defer db.Close()
			db.SetMaxOpenConns(1)
			for time.Now().Before(deadline) {
				var n int
				if err := db.QueryRow("SELECT count(*) FROM acks").Scan(&n); err != nil {
					if failures.Add(1) <= 3 {
						t.Errorf("a query through the tunnel: %v", err)
					}
					continue
				}
				queries.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d clients through mydatabases/connect for %ds: %d queries, %d failed, %d tunnels", clients, tunnelSeconds, queries.Load(), failures.Load(), tunnels.Load())
	if failures.Load() > 0 {
		t.Errorf("%d of the tunnelled queries failed", failures.Load())
	}
	// At least 61 s since the long session's first query.
	time.Sleep(time.Until(deadline.Add(time.Second)))
	if err := long.QueryRowContext(ctx, "SELECT count(*) FROM acks").Scan(&n); err != nil {
		t.Errorf("a session 61 s old through the tunnel: %v", err)
	}
}

// testTunnelToAReplica: connect's instance option leads the tunnel to a
// ready replica (the 101 answer names it), where the credential made on
// the primary logs in once replication brought it, reads, and may not
// write even as readwrite; an instance the database does not have is a
// 422 naming the field.
func testTunnelToAReplica(t *testing.T, tc replicationCase, ns, primary string, cred examplev1.MyDatabaseCredentialRequestStatus) {
	ctx := context.Background()
	developer := asUser(t, "dev")
	_, err := access.DialTunnel(ctx, developer, ns, "shop", "shop-7")
	var refused *access.TunnelError
	if !errors.As(err, &refused) || refused.Code != http.StatusUnprocessableEntity || !strings.Contains(refused.Message, "instance") {
		t.Errorf("a tunnel to shop-7: %v, want 422 naming the instance field", err)
	}
	replicas := make(chan string, 100)
	port := listenTunnels(t, func(ctx context.Context) (*access.TunnelConn, error) {
		return access.DialTunnel(ctx, developer, ns, "shop", examplev1.ConnectToReplica)
	}, func(remote *access.TunnelConn) { replicas <- remote.Instance })
	var db *sql.DB
	var readOnly string
	if tc.engine.name == "postgres" {
		db, err = sql.Open("pgx", fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=require connect_timeout=10",
			port, cred.Username, cred.Password, cred.Database))
		readOnly = "SELECT pg_is_in_recovery()::int"
	} else {
		db, err = sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s?timeout=10s&tls=skip-verify", cred.Username, cred.Password, port, cred.Database))
		readOnly = "SELECT @@global.read_only"
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The user was made on the primary a moment ago: a replica has it once
	// it replayed that far.
	var inRecovery, n int
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = db.QueryRow(readOnly).Scan(&inRecovery)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("the credential at a replica through the tunnel: %v", err)
	}
	if inRecovery != 1 {
		t.Errorf("the tunnel to a replica reached an engine that takes writes (%s answered %d)", readOnly, inRecovery)
	}
	if err := db.QueryRow("SELECT count(*) FROM acks").Scan(&n); err != nil {
		t.Errorf("reading at a replica: %v", err)
	}
	if _, err := db.Exec("INSERT INTO acks VALUES (3)"); err == nil {
		t.Error("a readwrite credential wrote at a replica")
	}
	db.Close()
	var reached []string
	for {
		select {
		case name := <-replicas:
			if name == primary || !strings.HasPrefix(name, "shop-") {
				t.Errorf("a tunnel asked for a replica led to %q (the primary is %s)", name, primary)
			}
			reached = append(reached, name)
			continue
		default:
		}
		break
	}
	t.Logf("tunnels asked for a replica reached %v (the primary is %s); %s answered %d there", reached, primary, readOnly, inRecovery)
}
