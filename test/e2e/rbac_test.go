//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTenantAccess(t *testing.T) {
	t.Parallel()
	own, other := newNamespace(t), newNamespace(t)
	bindEdit(t, own, "alice")

	canI := func(verb, resource, subresource, ns string) string {
		args := []string{"auth", "can-i", verb, resource, "-n", ns, "--as", "alice"}
		if subresource != "" {
			args = append(args, "--subresource", subresource)
		}
		return strings.TrimSpace(kubectl(t, "", args...).stdout)
	}
	for _, tc := range []struct{ verb, resource, subresource, ns, want string }{
		{"create", "mydatabases.example.com", "", own, "yes"},
		{"delete", "mydatabases.example.com", "", own, "yes"},
		{"update", "mydatabases.example.com", "scale", own, "yes"},
		{"list", "mydatabases.example.com", "", other, "no"},
		{"create", "mydatabases.example.com", "", other, "no"},
		{"update", "mydatabases.example.com", "status", own, "no"},
	} {
		if got := canI(tc.verb, tc.resource, tc.subresource, tc.ns); got != tc.want {
			t.Errorf("can-i %s %s (subresource %q) -n %s = %q, want %q", tc.verb, tc.resource, tc.subresource, tc.ns, got, tc.want)
		}
	}

	// What can-i says is what mydb enforces, through delegated authorization.
	if out := mustKubectl(t, seedExample, "apply", "-n", own, "--as", "alice", "-f", "-"); !strings.Contains(out, "created") {
		t.Errorf("alice could not create in her namespace: %s", out)
	}
	if r := kubectl(t, seedExample, "apply", "-n", other, "--as", "alice", "-f", "-"); r.err == nil || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("alice created in another namespace:\n%s", r)
	}
	if r := kubectl(t, "", "get", "mdb", "-A", "--as", "alice"); r.err == nil || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("alice listed all namespaces:\n%s", r)
	}

	cfg := restConfig(t)
	cfg.Impersonate.UserName = "bob"
	_, err := mydbClient(t, cfg).ExampleV1().MyDatabases(own).List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("bob, bound to nothing, listed: %v", err)
	}
}

// TestSwitchoverVerb: create on mydatabases/switchover is what a
// switchover takes, and all it grants; edit includes it. A forced failover
// (allowWriteLoss) needs the forcefailover verb besides, which no
// aggregated role holds.
func TestSwitchoverVerb(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	kube := kubeClient(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "switchover-only"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"mydatabases/switchover"}, Verbs: []string{"create"}}},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "oncall"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "oncall"}},
	}
	if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntilAllowed(t, "oncall", authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "example.com", Resource: "mydatabases", Subresource: "switchover"})
	bindEdit(t, ns, "alice")
	if out := mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-"); !strings.Contains(out, "created") {
		t.Fatalf("seed: %s", out)
	}
	name := "prod-mysql"
	for _, tc := range []struct{ user, verb, resource, sub, want string }{
		{"alice", "create", "mydatabases.example.com", "switchover", "yes"},
		{"oncall", "create", "mydatabases.example.com", "switchover", "yes"},
		{"oncall", "get", "mydatabases.example.com", "", "no"},
		{"oncall", "update", "mydatabases.example.com", "status", "no"},
		{"oncall", "create", "mydatabases.example.com", "backup", "no"},
		// A forced failover's own verb is in no aggregated role.
		{"alice", "forcefailover", "mydatabases.example.com", "", "no"},
		{"oncall", "forcefailover", "mydatabases.example.com", "", "no"},
	} {
		args := []string{"auth", "can-i", tc.verb, tc.resource, "-n", ns, "--as", tc.user}
		if tc.sub != "" {
			args = append(args, "--subresource", tc.sub)
		}
		if got := strings.TrimSpace(kubectl(t, "", args...).stdout); got != tc.want {
			t.Errorf("%s can-i %s %s/%s = %q, want %q", tc.user, tc.verb, tc.resource, tc.sub, got, tc.want)
		}
	}
	// Enforced by mydb: the request passes authorization (the database has
	// no primary yet, so the answer is 409, not 403); reading it is refused.
	cfg := restConfig(t)
	cfg.Impersonate.UserName = "oncall"
	dbs := mydbClient(t, cfg).ExampleV1().MyDatabases(ns)
	eventually(t, 30*time.Second, func() error {
		_, err := dbs.Switchover(ctx, name, &examplev1.MyDatabaseSwitchover{}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if apierrors.IsForbidden(err) || err == nil {
			return fmt.Errorf("switchover as oncall: %v, want 409 or 422", err)
		}
		return nil
	})
	if _, err := dbs.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("oncall read the database: %v", err)
	}
	// Forcing a failover that loses writes is refused at admission, before
	// anything about the database is looked at.
	forced := &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: name + "-1", AllowWriteLoss: true}}
	if _, err := dbs.Switchover(ctx, name, forced, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "forcefailover") {
		t.Errorf("a forced failover as oncall: %v, want 403 naming the forcefailover verb", err)
	}
	other := restConfig(t)
	other.Impersonate.UserName = "nobody"
	if _, err := mydbClient(t, other).ExampleV1().MyDatabases(ns).Switchover(ctx, name, &examplev1.MyDatabaseSwitchover{}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a user bound to nothing: %v, want 403", err)
	}
}

// TestNamingASecretNeedsReadingIt: through the aggregator, a tenant who may
// create MyDatabases but not read Secrets cannot name one as the S3
// credentials (mydb would read it and send its keys to the endpoint the
// spec names): 403 naming the field. Allowed to get that one Secret, the
// same request is admitted.
func TestNamingASecretNeedsReadingIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	kube := kubeClient(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "databases-only"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"example.com"}, Resources: []string{"mydatabases"}, Verbs: []string{"create", "get"}}},
	}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(name, roleName string) {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "tenant"}}}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("tenant-databases", role.Name)
	waitUntilAllowed(t, "tenant", authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "example.com", Resource: "mydatabases"})
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EnginePostgres, StorageSize: resource.MustParse("1Gi"),
			Backup: &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
				Endpoint: "https://s3.example.com", Bucket: "backups", CredentialsSecret: examplev1.S3CredentialsSecret{Name: "orders-credentials"}}}}}}
	dbs := mydbClient(t, asUser(t, "tenant")).ExampleV1().MyDatabases(ns)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	_, err := dbs.Create(ctx, db, dryRun)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.backup.destination.s3.credentialsSecret.name") {
		t.Fatalf("naming a Secret the tenant may not read: %v, want 403 naming the field", err)
	}
	// Allowed to get exactly that Secret, the tenant may name it.
	reader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "read-orders-credentials"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"orders-credentials"}, Verbs: []string{"get"}}}}
	if _, err := kube.RbacV1().Roles(ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind("tenant-reads-orders", reader.Name)
	// mydb's authorizer caches decisions for a while: the grant shows
	// within that.
	eventually(t, time.Minute, func() error {
		_, err := dbs.Create(ctx, db, dryRun)
		return err
	})
}
