package mydatabasebackup

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func newStrategy() strategy {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return NewStrategy(scheme)
}

func backup(mods ...func(*example.MyDatabaseBackup)) *example.MyDatabaseBackup {
	b := &example.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default", ResourceVersion: "3", Generation: 1},
		Spec:       example.MyDatabaseBackupSpec{DatabaseName: "prod-mysql", Target: example.BackupTargetPreferReplica},
	}
	for _, mod := range mods {
		mod(b)
	}
	return b
}

func succeeded(b *example.MyDatabaseBackup) {
	b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseSucceeded, StartTime: &metav1.Time{Time: time.Now().Add(-time.Hour)}}
}

func TestCreateDropsStatus(t *testing.T) {
	s := newStrategy()
	b := backup(succeeded, func(b *example.MyDatabaseBackup) { b.Generation = 7 })
	s.PrepareForCreate(context.Background(), b)
	if b.Status.Phase != "" || b.Status.StartTime != nil || b.Generation != 1 {
		t.Errorf("after PrepareForCreate: status %+v, generation %d; want an empty status and generation 1", b.Status, b.Generation)
	}
	if !slices.Equal(b.Finalizers, []string{example.BackupFinalizer}) {
		t.Errorf("after PrepareForCreate: finalizers %v, want %s so that deleting the backup deletes its dump", b.Finalizers, example.BackupFinalizer)
	}
	if errs := s.Validate(context.Background(), b); len(errs) != 0 {
		t.Errorf("a valid backup is refused: %v", errs)
	}
	if errs := s.Validate(context.Background(), backup(func(b *example.MyDatabaseBackup) { b.Spec.DatabaseName = "" })); len(errs) == 0 || errs[0].Field != "spec.databaseName" {
		t.Errorf("a backup of no database: %v, want an error on spec.databaseName", errs)
	}
}

func TestUpdateKeepsStatusAndSpec(t *testing.T) {
	s := newStrategy()
	old := backup(succeeded)
	changed := backup(func(b *example.MyDatabaseBackup) {
		b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseFailed}
		b.Labels = map[string]string{"team": "a"}
	})
	s.PrepareForUpdate(context.Background(), changed, old)
	if changed.Status.Phase != example.BackupPhaseSucceeded || changed.Labels["team"] != "a" {
		t.Errorf("an update of the main resource: status %+v labels %v; want the stored status and the new labels", changed.Status, changed.Labels)
	}
	moved := backup(func(b *example.MyDatabaseBackup) { b.Spec.DatabaseName = "other" })
	if errs := s.ValidateUpdate(context.Background(), moved, old); len(errs) == 0 {
		t.Error("the spec of a backup changed; want it refused")
	}
}

func TestStatusUpdateKeepsSpecAndMetadata(t *testing.T) {
	s := statusStrategy{newStrategy()}
	old := backup()
	changed := backup(succeeded, func(b *example.MyDatabaseBackup) {
		b.Spec.DatabaseName = "other"
		b.Labels = map[string]string{"via": "status"}
	})
	s.PrepareForUpdate(context.Background(), changed, old)
	if changed.Spec.DatabaseName != "prod-mysql" || changed.Labels != nil || changed.Status.Phase != example.BackupPhaseSucceeded {
		t.Errorf("a /status update: spec %+v labels %v status %+v; want the stored spec and metadata and the new status",
			changed.Spec, changed.Labels, changed.Status)
	}
	if fields := s.GetResetFields()["example.com/v1"]; fields == nil || fields.Empty() {
		t.Error("/status writers must not own the spec: no reset fields")
	}
}

func TestTableShowsPendingForANewBackup(t *testing.T) {
	table, err := tableConvertor{}.ConvertToTable(context.Background(), backup(), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || len(table.Rows[0].Cells) != len(columns) {
		t.Fatalf("rows %+v", table.Rows)
	}
	cells := table.Rows[0].Cells
	if cells[0] != "nightly" || cells[1] != "prod-mysql" || cells[2] != "Pending" || cells[3] != "<none>" {
		t.Errorf("cells %v", cells)
	}
}
