//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nowhereDestination is a merge patch giving a database a backup
// destination where nothing listens, for tests of the API alone.
const nowhereDestination = `{"spec":{"backup":{"destination":{"s3":{"endpoint":"http://127.0.0.1:1","bucket":"backups","credentialsSecret":{"name":"s3"}}}}}}`

// TestBackupThroughTheAggregator: POST .../backup of a database without a
// destination is refused with a clear 422; a backup created directly of
// such a database fails saying why; a missing database is a 404.
func TestBackupThroughTheAggregator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")

	// (The aggregated discovery kube-apiserver serves may lag a freshly
	// restarted mydb.)
	var r result
	eventually(t, 2*time.Minute, func() error {
		r = backupRaw(t, ns, "prod-mysql", `{"metadata":{"name":"first"}}`)
		if !strings.Contains(r.stderr, "Invalid") && !strings.Contains(r.stderr, "invalid") {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	if !strings.Contains(r.stderr, "spec.backup.destination") || !strings.Contains(r.stderr, "no backup destination") {
		t.Errorf("backup of a database without a destination:\n%s\nwant a 422 naming spec.backup.destination", r)
	}
	if r := kubectlMydb(t, "backup", "prod-mysql", "-n", ns); r.err == nil || !strings.Contains(r.stderr, "spec.backup.destination") {
		t.Errorf("kubectl mydb backup of a database without a destination:\n%s", r)
	}

	direct := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: "direct"}, Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"}}
	if _, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabaseBackups(ns).Create(ctx, direct, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b := waitBackup(t, ns, "direct", reconcileTimeout)
	if b.Status.Phase != examplev1.BackupPhaseFailed || !strings.Contains(b.Status.Message, "spec.backup.destination") {
		t.Errorf("a backup of a database without a destination: %s %q", b.Status.Phase, b.Status.Message)
	}
	out := mustKubectl(t, "", "get", "mdbb", "-n", ns, "-o", "wide")
	if !strings.Contains(out, "direct") || !strings.Contains(out, "Failed") || !strings.Contains(out, "PreferReplica") {
		t.Errorf("get mdbb -o wide:\n%s", out)
	}
	if out := mustKubectl(t, "", "get", "mdbb", "-n", ns, "--field-selector", "spec.databaseName=prod-mysql", "-o", "name"); strings.TrimSpace(out) != "mydatabasebackup.example.com/direct" {
		t.Errorf("field selector: %q", out)
	}
	// Deleting a backup that never wrote a dump goes at once.
	mustKubectl(t, "", "delete", "mdbb/direct", "-n", ns, "--timeout=1m")

	if r := backupRaw(t, ns, "nope", `{}`); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
		t.Errorf("backup of a missing database:\n%s", r)
	}
}

// TestBackupOnlyRole: create on mydatabases/backup lets a user take backups
// in one namespace, and grants nothing else; the labels that would make
// its backup pass for a scheduled or final one are dropped.
func TestBackupOnlyRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	own, other := newNamespace(t), newNamespace(t)
	for _, ns := range []string{own, other} {
		mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")
		mustKubectl(t, "", "patch", "mdb/prod-mysql", "-n", ns, "--type=merge", "-p", nowhereDestination)
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

	forged := fmt.Sprintf(`{"metadata":{"name":"forged","labels":{%q:"prod-mysql",%q:"prod-mysql"}}}`, names.ScheduleLabel, names.FinalBackupLabel)
	eventually(t, reconcileTimeout/3, func() error {
		if r := backupRaw(t, own, "prod-mysql", forged, "backup-bot"); r.err != nil {
			return fmt.Errorf("backup-bot could not back up in its namespace: %s", r)
		}
		return nil
	})
	b, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabaseBackups(own).Get(ctx, "forged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Labels) != 0 {
		t.Errorf("backup-bot's backup has the labels %v, want none of the controller's", b.Labels)
	}
	if r := backupRaw(t, other, "prod-mysql", `{}`, "backup-bot"); r.err == nil || !strings.Contains(r.stderr, "forbidden") {
		t.Errorf("backup-bot backed up in another namespace:\n%s", r)
	}
	bot := mydbClient(t, asUser(t, "backup-bot")).ExampleV1()
	checks := map[string]error{}
	_, checks["get mydatabases"] = bot.MyDatabases(own).Get(ctx, "prod-mysql", metav1.GetOptions{})
	_, checks["list mydatabasebackups"] = bot.MyDatabaseBackups(own).List(ctx, metav1.ListOptions{})
	_, checks["create mydatabasebackups"] = bot.MyDatabaseBackups(own).Create(ctx, &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "direct"}, Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"}}, metav1.CreateOptions{})
	checks["delete mydatabasebackups"] = bot.MyDatabaseBackups(own).Delete(ctx, "forged", metav1.DeleteOptions{})
	checks["delete mydatabases"] = bot.MyDatabases(own).Delete(ctx, "prod-mysql", metav1.DeleteOptions{})
	for what, err := range checks {
		if !apierrors.IsForbidden(err) {
			t.Errorf("backup-bot %s: %v, want 403", what, err)
		}
	}
}

// TestRestoreWaitsForItsBackup: a new database naming a backup in
// spec.restoreFrom waits, without a StatefulSet, until the backup exists
// and succeeded; spec.restoreFrom may not change.
func TestRestoreWaitsForItsBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	copyDB := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: copy\nspec:\n  engine: postgres\n  storageSize: 50Gi\n  restoreFrom:\n    backupName: snapshot\n"
	mustKubectl(t, copyDB, "apply", "-n", ns, "-f", "-")
	eventually(t, time.Minute, func() error {
		out := mustKubectl(t, "", "get", "mdb/copy", "-n", ns, "-o",
			`jsonpath={.status.conditions[?(@.type=="Progressing")].reason} {.status.conditions[?(@.type=="Restored")].reason}`)
		if out != "WaitingForRestoreSource WaitingForBackup" {
			return fmt.Errorf("Progressing and Restored reasons %q", out)
		}
		return nil
	})
	if _, err := kubeClient(t).AppsV1().StatefulSets(ns).Get(ctx, "copy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the copy started before its backup existed: %v", err)
	}
	if r := kubectl(t, "", "patch", "mdb/copy", "-n", ns, "--type=merge", "-p", `{"spec":{"restoreFrom":{"backupName":"other"}}}`); r.err == nil || !strings.Contains(r.stderr, "spec.restoreFrom") {
		t.Errorf("restoreFrom changed after create:\n%s", r)
	}
}

// TestFinalBackupHoldsTheDatabase: with spec.backup.finalBackup the server
// holds a deleted database while its final backup has not succeeded (here
// no instance runs to take it), until the user skips it; the final backup
// outlives the database.
func TestFinalBackupHoldsTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := mydbClient(t, restConfig(t)).ExampleV1()
	manifest := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: held\nspec:\n  engine: postgres\n  storageSize: 5Gi\n" +
		"  deletionPolicy: Delete\n  backup:\n    finalBackup: true\n    destination:\n      s3: {endpoint: 'http://127.0.0.1:1', bucket: backups, credentialsSecret: {name: s3}}\n"
	mustKubectl(t, manifest, "apply", "-n", ns, "-f", "-")
	if got := mustKubectl(t, "", "get", "mdb/held", "-n", ns, "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, examplev1.FinalBackupFinalizer) {
		t.Fatalf("finalizers %s", got)
	}
	mustKubectl(t, "", "delete", "mdb/held", "-n", ns, "--wait=false")
	var final examplev1.MyDatabaseBackup
	eventually(t, reconcileTimeout, func() error {
		list, err := dbs.MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{LabelSelector: names.FinalBackupLabel + "=held"})
		if err != nil || len(list.Items) != 1 {
			return fmt.Errorf("final backups: %v %v", list, err)
		}
		final = list.Items[0]
		return nil
	})
	if !strings.HasPrefix(final.Name, "held-final-") || final.Spec.Target != examplev1.BackupTargetPrimary || len(final.OwnerReferences) != 0 {
		t.Errorf("final backup %s target %s owners %v: want held-final-<time>, of the primary, owned by nothing", final.Name, final.Spec.Target, final.OwnerReferences)
	}
	// Not a fixed wait: once the backup controller has said why the final
	// backup waits, the hold was decided with it pending.
	eventually(t, reconcileTimeout, func() error {
		b, err := dbs.MyDatabaseBackups(ns).Get(ctx, final.Name, metav1.GetOptions{})
		if err != nil || b.Status.Message == "" || b.Status.Phase == examplev1.BackupPhaseSucceeded {
			return fmt.Errorf("the final backup has not said what it waits for: %+v %v", b.Status, err)
		}
		return nil
	})
	if _, err := dbs.MyDatabases(ns).Get(ctx, "held", metav1.GetOptions{}); err != nil {
		t.Fatalf("the database went before its final backup: %v", err)
	}
	mustKubectl(t, "", "annotate", "mdb/held", "-n", ns, examplev1.SkipFinalBackupAnnotation+"=true")
	eventually(t, reconcileTimeout, func() error {
		if _, err := dbs.MyDatabases(ns).Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("held still there: %v", err)
		}
		return nil
	})
	if _, err := dbs.MyDatabaseBackups(ns).Get(ctx, final.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the final backup went with its database: %v", err)
	}
}
