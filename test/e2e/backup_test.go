//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func TestBackupThroughTheAggregator(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")

	r := backupRaw(t, ns, "prod-mysql", `{"metadata":{"name":"first"}}`)
	if r.err != nil {
		t.Fatalf("backup: %s", r)
	}
	var created examplev1.MyDatabaseBackup
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil || created.Name != "first" || created.Spec.DatabaseName != "prod-mysql" {
		t.Fatalf("answer %s: %v", r.stdout, err)
	}

	// kwok completes the Job's pod, kube-controller-manager's Job controller
	// completes the Job, and mydb records the outcome. (The aggregated
	// discovery kube-apiserver serves may lag a freshly restarted mydb.)
	eventually(t, 2*time.Minute, func() error {
		if r := kubectl(t, "", "get", "mdbb", "-n", ns); r.err != nil {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	mustKubectl(t, "", "wait", "--for=jsonpath={.status.phase}=Succeeded", "mdbb/first", "-n", ns, "--timeout=3m")
	out := mustKubectl(t, "", "get", "mdbb", "-n", ns, "--no-headers")
	if !strings.Contains(out, "first") || !strings.Contains(out, "prod-mysql") || !strings.Contains(out, "Succeeded") {
		t.Errorf("get mdbb: %s", out)
	}
	b, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabaseBackups(ns).Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.Location.URI() != "pvc://prod-mysql-backups/first.sql" || b.Status.StartTime == nil || b.Status.CompletionTime == nil {
		t.Errorf("status %+v", b.Status)
	}
	job, err := kubeClient(t).BatchV1().Jobs(ns).Get(ctx, "backup-first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(job); ref == nil || ref.UID != b.UID {
		t.Errorf("job owner %+v", ref)
	}
	if !strings.HasPrefix(job.Spec.Template.Spec.Containers[0].Command[0], "mysqldump") {
		t.Errorf("job command %v", job.Spec.Template.Spec.Containers[0].Command)
	}
	if _, err := kubeClient(t).CoreV1().PersistentVolumeClaims(ns).Get(ctx, "prod-mysql-backups", metav1.GetOptions{}); err != nil {
		t.Errorf("backups volume: %v", err)
	}
	if out := mustKubectl(t, "", "get", "mdbb", "-n", ns, "--field-selector", "spec.databaseName=prod-mysql", "-o", "name"); strings.TrimSpace(out) != "mydatabasebackup.example.com/first" {
		t.Errorf("field selector: %q", out)
	}

	// A backup of a missing database is a 404.
	if r := backupRaw(t, ns, "nope", `{}`); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
		t.Errorf("backup of a missing database:\n%s", r)
	}
}

// TestBackupOnlyRole: create on mydatabases/backup lets a user take backups
// in one namespace, and grants nothing else.
func TestBackupOnlyRole(t *testing.T) {
	ctx := context.Background()
	own, other := newNamespace(t), newNamespace(t)
	for _, ns := range []string{own, other} {
		mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")
	}
	kube := kubeClient(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "backup-taker"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{"example.com"}, Resources: []string{"mydatabases/backup"}, Verbs: []string{"create"}}}}
	if _, err := kube.RbacV1().Roles(own).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "backup-bot"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "backup-taker"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "backup-bot"}}}
	if _, err := kube.RbacV1().RoleBindings(own).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, reconcileTimeout/3, func() error {
		if r := backupRaw(t, own, "prod-mysql", `{}`, "backup-bot"); r.err != nil {
			return fmt.Errorf("backup-bot could not back up in its namespace: %s", r)
		}
		return nil
	})
	if r := backupRaw(t, other, "prod-mysql", `{}`, "backup-bot"); r.err == nil || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("backup-bot backed up in another namespace:\n%s", r)
	}
	bot := mydbClient(t, asUser(t, "backup-bot")).ExampleV1()
	checks := map[string]error{}
	_, checks["get mydatabases"] = bot.MyDatabases(own).Get(ctx, "prod-mysql", metav1.GetOptions{})
	_, checks["list mydatabasebackups"] = bot.MyDatabaseBackups(own).List(ctx, metav1.ListOptions{})
	_, checks["create mydatabasebackups"] = bot.MyDatabaseBackups(own).Create(ctx, &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "direct"}, Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"}}, metav1.CreateOptions{})
	checks["delete mydatabases"] = bot.MyDatabases(own).Delete(ctx, "prod-mysql", metav1.DeleteOptions{})
	for what, err := range checks {
		if !apierrors.IsForbidden(err) {
			t.Errorf("backup-bot %s: %v, want 403", what, err)
		}
	}
}

// TestRestoreFromBackup: a new database names a backup in spec.restoreFrom;
// it waits for the backup, then its replicas load the dump as they start.
func TestRestoreFromBackup(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	copyDB := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: copy\nspec:\n  engine: mysql\n  storageSize: 50Gi\n  restoreFrom:\n    backupName: snapshot\n"
	// The copy comes first: it waits for a backup that does not exist yet.
	mustKubectl(t, copyDB, "apply", "-n", ns, "-f", "-")
	eventually(t, time.Minute, func() error {
		out := mustKubectl(t, "", "get", "mdb/copy", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Progressing")].reason}`)
		if out != "WaitingForRestoreSource" {
			return fmt.Errorf("Progressing reason %q", out)
		}
		return nil
	})
	if _, err := kubeClient(t).AppsV1().StatefulSets(ns).Get(ctx, "copy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the copy started before its dump existed: %v", err)
	}

	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")
	if r := backupRaw(t, ns, "prod-mysql", `{"metadata":{"name":"snapshot"}}`); r.err != nil {
		t.Fatal(r)
	}
	mustKubectl(t, "", "wait", "--for=condition=Ready", "mdb/copy", "-n", ns, "--timeout=3m")
	sts, err := kubeClient(t).AppsV1().StatefulSets(ns).Get(ctx, "copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range sts.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == "/docker-entrypoint-initdb.d/restore.sql" && m.SubPath == "snapshot.sql" {
			found = true
		}
	}
	if !found {
		t.Errorf("the copy's pods do not load the dump: %+v", sts.Spec.Template.Spec.Containers[0].VolumeMounts)
	}
	if r := kubectl(t, "", "patch", "mdb/copy", "-n", ns, "--type=merge", "-p", `{"spec":{"restoreFrom":{"backupName":"other"}}}`); r.err == nil || !strings.Contains(r.stderr, "spec.restoreFrom") {
		t.Errorf("restoreFrom changed after create:\n%s", r)
	}
}

// TestFinalBackupBeforeDelete: with spec.backup.finalBackup the server holds
// a deleted database until its final backup succeeded, unless the user
// skips it explicitly.
func TestFinalBackupBeforeDelete(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := mydbClient(t, restConfig(t)).ExampleV1()
	manifest := func(name string) string {
		return "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: " + name +
			"\nspec:\n  engine: postgres\n  storageSize: 5Gi\n  deletionPolicy: Delete\n  backup:\n    finalBackup: true\n"
	}
	mustKubectl(t, manifest("keeper"), "apply", "-n", ns, "-f", "-")
	if got := mustKubectl(t, "", "get", "mdb/keeper", "-n", ns, "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, "example.com/final-backup") {
		t.Fatalf("finalizers %s", got)
	}
	mustKubectl(t, "", "delete", "mdb/keeper", "-n", ns, "--wait=false")
	eventually(t, reconcileTimeout, func() error {
		if _, err := dbs.MyDatabases(ns).Get(ctx, "keeper", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("keeper still there: %v", err)
		}
		return nil
	})
	final, err := dbs.MyDatabaseBackups(ns).Get(ctx, "keeper-final", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no final backup: %v", err)
	}
	if final.Status.Phase != examplev1.BackupPhaseSucceeded || len(final.OwnerReferences) != 0 {
		t.Errorf("final backup %s, owners %v: want Succeeded and outliving its database", final.Status.Phase, final.OwnerReferences)
	}

	mustKubectl(t, manifest("skipper"), "apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "annotate", "mdb/skipper", "-n", ns, "mydb.example.com/skip-final-backup=true")
	mustKubectl(t, "", "delete", "mdb/skipper", "-n", ns, "--timeout=2m")
	if _, err := dbs.MyDatabaseBackups(ns).Get(ctx, "skipper-final", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a final backup was taken although skipped: %v", err)
	}
}
