package validation

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func myBackup(mods ...func(*example.MyDatabaseBackup)) *example.MyDatabaseBackup {
	b := &example.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-x7k2p", Namespace: "default", ResourceVersion: "1"},
		Spec:       example.MyDatabaseBackupSpec{DatabaseName: "prod-mysql", Target: example.BackupTargetPreferReplica},
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
		{name: "the primary", b: myBackup(func(b *example.MyDatabaseBackup) { b.Spec.Target = example.BackupTargetPrimary })},
		{name: "an unknown target", b: myBackup(func(b *example.MyDatabaseBackup) { b.Spec.Target = "Replica" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.target"}}},
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
		{name: "times JSON cannot write", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseSucceeded,
					StartTime: &metav1.Time{Time: time.Date(-3, 1, 1, 0, 0, 0, 0, time.UTC)}, CompletionTime: &metav1.Time{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.completionTime"}, {field.ErrorTypeInvalid, "status.startTime"}}},
		{name: "a managed fields time JSON cannot write", old: myBackup(), validate: ValidateMyDatabaseBackupUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
					Time: &metav1.Time{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.managedFields[0].time"}}},
		{name: "unknown phase", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b:    myBackup(func(b *example.MyDatabaseBackup) { b.Status.Phase = "Done" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "status.phase"}}},
		{name: "completed before it started", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseSucceeded, StartTime: &later, CompletionTime: &earlier}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.completionTime"}}},
		{name: "an S3 location", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) { b.Status.Location = s3Location() })},
		{name: "a location naming nothing", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b:    myBackup(func(b *example.MyDatabaseBackup) { b.Status.Location = &example.BackupLocation{} }),
			want: []errorSummary{{field.ErrorTypeRequired, "status.location"}}},
		{name: "a volume location", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = &example.BackupLocation{Volume: &example.VolumeLocation{ClaimName: "snap-dump"}}
			})},
		{name: "a volume location naming no claim", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = &example.BackupLocation{Volume: &example.VolumeLocation{}}
			}),
			want: []errorSummary{{field.ErrorTypeRequired, "status.location.volume.claimName"}}},
		{name: "a volume location with a bad claim name", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = &example.BackupLocation{Volume: &example.VolumeLocation{ClaimName: "Snap_Dump"}}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.location.volume.claimName"}}},
		{name: "a location both in S3 and on a volume", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = s3Location()
				b.Status.Location.Volume = &example.VolumeLocation{ClaimName: "snap-dump"}
			}),
			want: []errorSummary{{field.ErrorTypeForbidden, "status.location.volume"}}},
		{name: "a location outside the tree", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = s3Location()
				b.Status.Location.S3.Key = "../etc/passwd"
				b.Status.Location.S3.Endpoint = "s3.example.com"
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.location.s3.endpoint"}, {field.ErrorTypeInvalid, "status.location.s3.key"}}},
		{name: "a location without a key", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status.Location = s3Location()
				b.Status.Location.S3.Key = ""
			}),
			want: []errorSummary{{field.ErrorTypeRequired, "status.location.s3.key"}}},
		{name: "a full success", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseSucceeded, StartTime: &earlier, CompletionTime: &later,
					Location: s3Location(), Instance: "prod-mysql-1", Role: example.InstanceRoleReplica, Bytes: 10, SizeBytes: 10,
					Checksum: strings.Repeat("ab", 32), Format: "mariadb-backup-xbstream", Position: &example.InstancePosition{GTID: "0-1-5"}}
			})},
		{name: "figures that cannot be", old: myBackup(), validate: ValidateMyDatabaseBackupStatusUpdate,
			b: myBackup(func(b *example.MyDatabaseBackup) {
				b.Status = example.MyDatabaseBackupStatus{Phase: example.BackupPhaseSucceeded, Bytes: -1, SizeBytes: -1,
					Checksum: "ABC", Role: "Leader", Instance: "Pod_1"}
			}),
			want: []errorSummary{{field.ErrorTypeInvalid, "status.bytes"}, {field.ErrorTypeInvalid, "status.checksum"},
				{field.ErrorTypeInvalid, "status.instance"}, {field.ErrorTypeInvalid, "status.sizeBytes"}, {field.ErrorTypeNotSupported, "status.role"}}},
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

func s3Destination(mods ...func(*example.S3Destination)) *example.BackupDestination {
	d := &example.S3Destination{
		Endpoint: "https://s3.example.com", Bucket: "mydb-backups",
		CredentialsSecret: example.S3CredentialsSecret{Name: "s3", AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"},
	}
	for _, mod := range mods {
		mod(d)
	}
	return &example.BackupDestination{S3: d}
}

func s3Location() *example.BackupLocation {
	return &example.BackupLocation{S3: &example.S3Location{
		Endpoint: "https://s3.example.com", Bucket: "mydb-backups", Key: "default/prod-mysql/uid-1/nightly-uid-2",
		CredentialsSecret: example.S3CredentialsSecret{Name: "s3", AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"},
	}}
}
