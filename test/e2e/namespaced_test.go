//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	mydbcontroller "github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/names"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// databaseNamespaceRole is what mydb reads and writes in a namespace that
// holds databases (Secrets, CA bundles): bound cluster-wide by
// artifacts/common, per namespace by artifacts/namespaced.
const databaseNamespaceRole = "mydb-apiserver:database-namespace"

// TestANamespacedInstallReadsSecretsOnlyWhereItServes runs local-up's mydb
// as artifacts/namespaced installs it: --database-namespaces naming one
// namespace, and the ClusterRoleBinding of its Secret and write permissions
// replaced by a RoleBinding there: it may create, patch or delete the
// objects of a database nowhere else. A database in that namespace becomes ready with
// its credentials; mydb may read no Secret anywhere else, refuses to make
// a database or a backup anywhere else, and leaves a database made
// elsewhere before the change as it was.
func TestANamespacedInstallReadsSecretsOnlyWhereItServes(t *testing.T) {
	// Not parallel: it restarts mydb-apiserver with other flags and deletes a ClusterRoleBinding.
	ctx := context.Background()
	served, other := newNamespace(t), newNamespace(t)
	kube := kubeClient(t)
	admin := mydbClient(t, restConfig(t)).ExampleV1()
	localDir := e2eLocalDir

	// Made while mydb serves every namespace: it has a Secret.
	legacy := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "legacy"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.EnginePostgres, Version: "15", Replicas: int32Ptr(1), StorageSize: quantity("1Gi")}}
	if _, err := admin.MyDatabases(other).Create(ctx, legacy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var legacySecret *corev1.Secret
	eventually(t, time.Minute, func() (err error) {
		legacySecret, err = kube.CoreV1().Secrets(other).Get(ctx, names.Secret("legacy"), metav1.GetOptions{})
		return err
	})

	server := localComponent(t, localDir, "mydb-apiserver")
	everywhere := slices.Clone(server.args)
	direct := directConfig(t, mustAtoi(t, flagValue(t, everywhere, "--secure-port")))
	binding, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, databaseNamespaceRole, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("artifacts/common binds %s cluster-wide: %v", databaseNamespaceRole, err)
	}
	t.Cleanup(func() {
		server.stop(t)
		restored := binding.DeepCopy()
		restored.ResourceVersion, restored.UID = "", ""
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, restored, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Errorf("restoring the ClusterRoleBinding %s: %v", databaseNamespaceRole, err)
		}
		server.args = everywhere
		server.start(t)
		waitServedThroughTheAggregator(t, direct)
	})

	// artifacts/namespaced, for one namespace.
	if _, err := kube.RbacV1().RoleBindings(served).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: databaseNamespaceRole},
		RoleRef:    binding.RoleRef,
		Subjects:   binding.Subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.RbacV1().ClusterRoleBindings().Delete(ctx, databaseNamespaceRole, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(localDir, "logs", "mydb-apiserver.log")
	logged, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	logFrom := logged.Size()
	server.stop(t)
	server.args = append(slices.Clone(everywhere), "--database-namespaces="+served)
	server.start(t)
	waitServedThroughTheAggregator(t, direct)

	expectServerMay(t, []permission{
		{[]string{"list", "secrets", "-n", served}, true},
		{[]string{"create", "secrets", "-n", served}, true},
		{[]string{"get", "configmaps", "-n", served}, true},
		{[]string{"list", "secrets", "-n", other}, false},
		{[]string{"get", "secrets", "-n", other}, false},
		{[]string{"get", "configmaps", "-n", other}, false},
		{[]string{"list", "secrets", "--all-namespaces"}, false},
		{[]string{"get", "secrets", "-n", "kube-system"}, false},
		// It writes the objects of a database only where it serves.
		{[]string{"create", "statefulsets", "-n", served}, true},
		{[]string{"create", "pods", "-n", served}, true},
		{[]string{"create", "statefulsets", "-n", other}, false},
		{[]string{"create", "pods", "-n", other}, false},
		{[]string{"patch", "pods", "-n", "kube-system"}, false},
		{[]string{"create", "serviceaccounts", "-n", other}, false},
		{[]string{"create", "rolebindings", "-n", other}, false},
		{[]string{"delete", "persistentvolumeclaims", "-n", other}, false},
		// And reads them everywhere (its informers and admission do).
		{[]string{"list", "pods", "--all-namespaces"}, true},
	})

	// Nothing new where mydb does not serve: 403, with the reason.
	manifest := `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"refused"},
		"spec":{"engine":"postgres","version":"15","replicas":1,"storageSize":"1Gi"}}`
	r := kubectl(t, manifest, "create", "-n", other, "-f", "-")
	if r.err == nil || !strings.Contains(r.stderr, "Forbidden") || !strings.Contains(r.stderr, "is not one of them") {
		t.Errorf("kubectl create of a MyDatabase in %s, which mydb does not serve: %s", other, r)
	}
	_, err = admin.MyDatabaseBackups(other).Create(ctx, &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: "refused"},
		Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "legacy"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("creating a backup in %s, which mydb does not serve: %v, want 403", other, err)
	}

	// Where it serves, a database runs with the credentials mydb made.
	shop := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.EnginePostgres, Version: "15", Replicas: int32Ptr(1), StorageSize: quantity("1Gi")}}
	if _, err := admin.MyDatabases(served).Create(ctx, shop, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startRig(t, served, "shop", rigPostgres)
	(&replicationHarness{t: t, tc: replicationCases[0], ns: served, db: "shop"}).waitStreaming(1)
	if _, err := kube.CoreV1().Secrets(served).Get(ctx, names.Secret("shop"), metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	// The database made before is left as it was, and says why.
	eventually(t, time.Minute, func() error {
		events, err := kube.CoreV1().Events(other).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "legacy", "reason": mydbcontroller.ReasonNamespaceNotServed}.String()})
		if err != nil {
			return err
		}
		if len(events.Items) == 0 {
			return errors.New("no NamespaceNotServed Event on the database made before")
		}
		return nil
	})
	if s, err := kube.CoreV1().Secrets(other).Get(ctx, names.Secret("legacy"), metav1.GetOptions{}); err != nil || s.UID != legacySecret.UID {
		t.Errorf("the Secret of the database made before: %v (UID %s, was %s)", err, s.GetUID(), legacySecret.UID)
	}

	// Not one cluster-wide read of Secrets was tried: an informer of the
	// whole cluster would log its refusal.
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if log := string(data[logFrom:]); strings.Contains(log, `secrets is forbidden`) {
		i := strings.Index(log, `secrets is forbidden`)
		t.Errorf("mydb tried to read Secrets it may not: %s", log[max(0, i-300):min(len(log), i+200)])
	}
}
