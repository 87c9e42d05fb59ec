package validation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func myBackup(mods ...func(*example.MyDatabaseBackup)) *example.MyDatabaseBackup {
	b := &example.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-x7k2p", Namespace: "default", ResourceVersion: "1"},
		Spec:       example.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"},
	}
	for _, mod := range mods {
		mod(b)
	}
	return b
}

func TestValidateMyDatabaseBackup(t *testing.T) {
	tests := []struct {
		name string
		b    *example.MyDatabaseBackup
		want []errorSummary
	}{
		{name: "valid", b: myBackup()},
		{name: "longest name", b: myBackup(func(b *example.MyDatabaseBackup) { b.Name = strings.Repeat("b", MaxBackupNameLength) })},
		{name: "name too long", b: myBackup(func(b *example.MyDatabaseBackup) { b.Name = strings.Repeat("b", MaxBackupNameLength+1) }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "no database", b: myBackup(func(b *example.MyDatabaseBackup) { b.Spec.DatabaseName = "" }),
			want: []errorSummary{{field.ErrorTypeRequired, "spec.databaseName"}}},
		{name: "bad database name", b: myBackup(func(b *example.MyDatabaseBackup) { b.Spec.DatabaseName = "Prod" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.databaseName"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(ValidateMyDatabaseBackup(tc.b)), sortSummaries, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateMyDatabaseBackupUpdates(t *testing.T) {
	earlier, later := metav1.Unix(100, 0), metav1.Unix(200, 0)
	tests := []struct {
		name     string
		old, b   *example.MyDatabaseBackup
		validate func(b, old *example.MyDatabaseBackup) field.ErrorList
		want     []errorSummary
	}{
		{name: "labels may change", old: myBackup(), validate: ValidateMyDatabaseBackupUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) { b.Labels = map[string]string{"keep": "yes"} })},
		{name: "spec may not change", old: myBackup(), validate: ValidateMyDatabaseBackupUpdate,
			b:    myBackup(func(b *example.MyDatabaseBackup) { b.Spec.DatabaseName = "other" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec"}}},
		{name: "running", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseRunning, StartTime: &earlier}
			})},
		{name: "unknown phase", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b:    myBackup(func(b *example.MyDatabaseBackup) { b.Status.Phase = "Done" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "status.phase"}}},
		{name: "completed before it started", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseSucceeded, StartTime: &later, CompletionTime: &earlier}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.completionTime"}}},
		{name: "a volume location", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = &example.BackupLocation{Volume: &example.VolumeLocation{ClaimName: "db-backups", Path: "nightly/dump.sql"}}
			})},
		{name: "a location naming nothing", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b:    myBackup(func(b *example.MyDatabaseBackup) { b.Status.Location = &example.BackupLocation{} }),
			want: []errorSummary{{field.ErrorTypeRequired, "status.location.volume"}}},
		{name: "a location outside its volume", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = &example.BackupLocation{Volume: &example.VolumeLocation{ClaimName: "Bad_Claim", Path: "../etc/passwd"}}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.location.volume.claimName"}, {field.ErrorTypeInvalid, "status.location.volume.path"}}},
		{name: "an absolute location", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = &example.BackupLocation{Volume: &example.VolumeLocation{ClaimName: "db-backups", Path: "/dump.sql"}}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.location.volume.path"}}},
		{name: "a success is final",
			old:      myBackup(func(b *example.MyDatabaseBackup) { b.Status.Phase = example.BackupPhaseSucceeded }),
			b:        myBackup(func(b *example.MyDatabaseBackup) { b.Status.Phase = example.BackupPhaseFailed }),
			validate: ValidateMyDatabaseBackupStatusUpdate,
			want:     []errorSummary{{field.ErrorTypeForbidden, "status.phase"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(tc.validate(tc.b, tc.old)), sortSummaries, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
