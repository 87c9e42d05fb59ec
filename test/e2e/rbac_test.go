//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
}

func TestTenantAccess(t *testing.T) {
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
