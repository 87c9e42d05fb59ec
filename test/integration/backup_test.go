package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBackupAction(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	client := newClient(t).ExampleV1()
	if _, err := client.MyDatabases(ns).Create(ctx, newMyDatabase("prod-mysql", withDestination), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dbs := client.MyDatabases(ns)

	// A bare {} from curl or kubectl create --raw, without apiVersion or kind.
	t.Run("empty body creates a named backup", func(t *testing.T) {
		res := do(t, http.MethodPost, dbPath(ns, "prod-mysql", "backup"), "application/json", []byte(`{}`))
		if res.code != http.StatusCreated {
			t.Fatalf("%d %s", res.code, res.body)
		}
		var b examplev1.MyDatabaseBackup
		if err := json.Unmarshal(res.body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Kind != "MyDatabaseBackup" || b.Spec.DatabaseName != "prod-mysql" || len(b.Name) != len("prod-mysql-")+5 || b.Namespace != ns {
			t.Errorf("backup %+v", b)
		}
		if b.Spec.Target != examplev1.BackupTargetPreferReplica || !slices.Contains(b.Finalizers, examplev1.BackupFinalizer) {
			t.Errorf("backup target %q finalizers %v, want PreferReplica and %s", b.Spec.Target, b.Finalizers, examplev1.BackupFinalizer)
		}
	})
	t.Run("the target from the body", func(t *testing.T) {
		b, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{Spec: examplev1.MyDatabaseBackupSpec{Target: examplev1.BackupTargetPrimary}}, metav1.CreateOptions{})
		if err != nil || b.Spec.Target != examplev1.BackupTargetPrimary {
			t.Errorf("backup %+v: %v, want target Primary", b, err)
		}
		if _, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{Spec: examplev1.MyDatabaseBackupSpec{Target: "Replica"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.target") {
			t.Errorf("an unknown target: %v, want 422 on spec.target", err)
		}
	})
	t.Run("a database without a destination", func(t *testing.T) {
		if _, err := dbs.Create(ctx, newMyDatabase("nowhere"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := dbs.Backup(ctx, "nowhere", &examplev1.MyDatabaseBackup{}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.backup.destination") || !strings.Contains(err.Error(), "no backup destination") {
			t.Errorf("%v, want 422 naming spec.backup.destination", err)
		}
	})
	t.Run("the schedule's labels are the controller's", func(t *testing.T) {
		b, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: "forged",
			Labels: map[string]string{names.ScheduleLabel: "prod-mysql", names.FinalBackupLabel: "prod-mysql", "team": "a"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.Labels[names.ScheduleLabel]; ok || b.Labels[names.FinalBackupLabel] != "" || b.Labels["team"] != "a" {
			t.Errorf("labels %v, want only team", b.Labels)
		}
	})
	t.Run("name and labels from the body", func(t *testing.T) {
		b, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: "before-upgrade", Labels: map[string]string{"why": "upgrade"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Name != "before-upgrade" || b.Labels["why"] != "upgrade" || b.Spec.DatabaseName != "prod-mysql" {
			t.Errorf("backup %+v", b)
		}
	})
	t.Run("status in the body is dropped", func(t *testing.T) {
		b, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{
			Status: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.Phase != "" {
			t.Errorf("status %+v, want none", b.Status)
		}
	})
	t.Run("dry run stores nothing", func(t *testing.T) {
		if _, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: "dry"}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.MyDatabaseBackups(ns).Get(ctx, "dry", metav1.GetOptions{}); err == nil {
			t.Error("a dry-run backup was stored")
		}
	})
	t.Run("missing database", func(t *testing.T) {
		if _, err := dbs.Backup(ctx, "nope", &examplev1.MyDatabaseBackup{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%v, want 404", err)
		}
	})
	t.Run("another database in the body", func(t *testing.T) {
		if _, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{
			Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "other"},
		}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
			t.Errorf("%v, want 400", err)
		}
	})
	t.Run("invalid name", func(t *testing.T) {
		if _, err := dbs.Backup(ctx, "prod-mysql", &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: "Not_Valid"},
		}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("%v, want 422", err)
		}
	})
	t.Run("database being deleted", func(t *testing.T) {
		held := newMyDatabase("held")
		held.Finalizers = []string{"example.com/hold"}
		if _, err := dbs.Create(ctx, held, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := dbs.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := dbs.Backup(ctx, "held", &examplev1.MyDatabaseBackup{}, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("%v, want 409", err)
		}
		if _, err := dbs.Patch(ctx, "held", "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	list, err := client.MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.databaseName=prod-mysql"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 5 {
		t.Errorf("backups of prod-mysql: %d, want 5", len(list.Items))
	}
	res := do(t, http.MethodGet, "/apis/example.com/v1/namespaces/"+ns+"/mydatabasebackups", "", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	var table metav1.Table
	if err := json.Unmarshal(res.body, &table); err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			headers = append(headers, c.Name)
		}
	}
	if want := []string{"Name", "Database", "Status", "Instance", "Size", "SHA256", "Duration", "Age"}; !slices.Equal(headers, want) {
		t.Errorf("backup columns %v, want %v", headers, want)
	}
	// A backup's spec may not change.
	b := list.Items[0]
	b.Spec.DatabaseName = "other"
	if _, err := client.MyDatabaseBackups(ns).Update(ctx, &b, metav1.UpdateOptions{}); err == nil {
		t.Error("a backup's spec changed")
	}
}

// withDestination gives a database a backup destination (nothing listens
// there: these tests talk to the API only).
func withDestination(db *examplev1.MyDatabase) {
	db.Spec.Backup = &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
		Endpoint: "http://127.0.0.1:1", Bucket: "backups",
		CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3"},
	}}}
}
