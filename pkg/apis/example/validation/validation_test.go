package validation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// myDatabase returns a valid, defaulted MyDatabase changed by mods.
func myDatabase(mods ...func(*example.MyDatabase)) *example.MyDatabase {
	db := &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql", Namespace: "default", ResourceVersion: "1"},
		Spec: example.MyDatabaseSpec{
			Engine:      example.EngineMySQL,
			Version:     "8.4",
			Replicas:    3,
			StorageSize: resource.MustParse("50Gi"),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			DeletionPolicy: example.DeletionPolicyRetain,
		},
	}
	for _, mod := range mods {
		mod(db)
	}
	return db
}

// errorSummary reduces errors to type and field, the part clients rely on.
type errorSummary struct {
	Type  field.ErrorType
	Field string
}

func summarize(errs field.ErrorList) []errorSummary {
	out := make([]errorSummary, 0, len(errs))
	for _, e := range errs {
		out = append(out, errorSummary{e.Type, e.Field})
	}
	return out
}

var sortSummaries = cmpopts.SortSlices(func(a, b errorSummary) bool { return a.Field+string(a.Type) < b.Field+string(b.Type) })

func TestValidateMyDatabase(t *testing.T) {
	tests := []struct {
		name string
		db   *example.MyDatabase
		want []errorSummary
	}{
		{name: "seed example", db: myDatabase()},
		{name: "postgres", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17" })},
		{name: "one replica", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 1 })},
		{name: "nine replicas", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = MaxReplicas })},
		{name: "storage class", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageClassName = ptr.To("fast-ssd") })},
		{name: "delete policy", db: myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = example.DeletionPolicyDelete })},
		{name: "max storage", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = MaxStorageSize.DeepCopy() })},
		{name: "name of max length", db: myDatabase(func(d *example.MyDatabase) { d.Name = "a" + strings.Repeat("b", MaxNameLength-1) })},
		{name: "no resources at all", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Resources = corev1.ResourceRequirements{} })},
		{name: "the largest memory limit a kubelet can hold", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("7Ei")
		})},
		{name: "ephemeral storage", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		})},

		{name: "a server certificate of the user's own, postgres", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17"
			d.Spec.TLS = &example.TLSSpec{ServerCertificateSecret: "prod-tls"}
		})},
		// MySQL's and MariaDB's replicas connect to the admin interface
		// (MariaDB's is the manager's relay), which serves the instance's
		// own certificate.
		{name: "a server certificate of the user's own, mysql", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.TLS = &example.TLSSpec{ServerCertificateSecret: "prod-tls"}
		})},
		{name: "a server certificate of the user's own, mariadb", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EngineMariaDB, "11.8"
			d.Spec.TLS = &example.TLSSpec{ServerCertificateSecret: "prod-tls"}
		})},
		{name: "a server certificate Secret of mydb's own", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17"
			d.Spec.TLS = &example.TLSSpec{ServerCertificateSecret: d.Name + "-certificates"}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.tls.serverCertificateSecret"}}},
		{name: "a server certificate Secret of a bad name", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17"
			d.Spec.TLS = &example.TLSSpec{ServerCertificateSecret: "Prod_TLS"}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.tls.serverCertificateSecret"}}},
		{name: "missing name", db: myDatabase(func(d *example.MyDatabase) { d.Name = "" }),
			want: []errorSummary{{field.ErrorTypeRequired, "metadata.name"}}},
		{name: "missing namespace", db: myDatabase(func(d *example.MyDatabase) { d.Namespace = "" }),
			want: []errorSummary{{field.ErrorTypeRequired, "metadata.namespace"}}},
		{name: "name with upper case", db: myDatabase(func(d *example.MyDatabase) { d.Name = "Prod" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "name with dot", db: myDatabase(func(d *example.MyDatabase) { d.Name = "prod.mysql" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "name starting with digit", db: myDatabase(func(d *example.MyDatabase) { d.Name = "1db" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "name too long", db: myDatabase(func(d *example.MyDatabase) { d.Name = strings.Repeat("a", MaxNameLength+1) }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "name of another database's headless Service", db: myDatabase(func(d *example.MyDatabase) { d.Name = "prod-headless" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "reserved suffix inside the name", db: myDatabase(func(d *example.MyDatabase) { d.Name = "prod-headless-2" })},
		{name: "bad label", db: myDatabase(func(d *example.MyDatabase) { d.Labels = map[string]string{"a b": "c"} }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.labels"}}},
		{name: "missing engine", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Engine = "" }),
			want: []errorSummary{{field.ErrorTypeRequired, "spec.engine"}}},
		{name: "unknown engine", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Engine = "oracle" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.engine"}}},
		{name: "engine in upper case", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Engine = "MySQL" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.engine"}}},
		{name: "missing version", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "" }),
			want: []errorSummary{{field.ErrorTypeRequired, "spec.version"}}},
		{name: "unsupported mysql version", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "5.7" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.version"}}},
		{name: "postgres version on mysql", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "17" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.version"}}},
		{name: "mysql version on postgres", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Engine = example.EnginePostgres }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.version"}}},
		{name: "sync replication", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Replication = &example.ReplicationSpec{Mode: example.ReplicationModeSync}
		})},
		{name: "async replication", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Replicas, d.Spec.Replication = 1, &example.ReplicationSpec{Mode: example.ReplicationModeAsync}
		})},
		{name: "sync replication with two instances", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Replicas, d.Spec.Replication = 2, &example.ReplicationSpec{Mode: example.ReplicationModeSync}
		})},
		{name: "sync replication with no replica", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Replicas, d.Spec.Replication = 1, &example.ReplicationSpec{Mode: example.ReplicationModeSync}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.replication.mode"}}},
		{name: "unknown replication mode", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Replication = &example.ReplicationSpec{Mode: "sync"}
		}), want: []errorSummary{{field.ErrorTypeNotSupported, "spec.replication.mode"}}},
		{name: "zero replicas", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 0 }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.replicas"}}},
		{name: "negative replicas", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = -1 }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.replicas"}}},
		{name: "too many replicas", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = MaxReplicas + 1 }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.replicas"}}},
		{name: "missing storage size", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.Quantity{} }),
			want: []errorSummary{{field.ErrorTypeRequired, "spec.storageSize"}}},
		{name: "negative storage size", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("-1Gi") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageSize"}}},
		{name: "storage size too large", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("65Ti") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageSize"}}},
		{name: "bad storage class", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageClassName = ptr.To("Fast_SSD") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageClassName"}}},
		{name: "empty storage class", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageClassName = ptr.To("") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageClassName"}}},
		{name: "request above limit", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("2Gi")
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.resources.requests[memory]"}}},
		{name: "negative cpu limit", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("-1")
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.resources.limits[cpu]"}}},
		{name: "absurd storage exponent", db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("1e16000000") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageSize"}}},
		{name: "absurd memory exponent", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1e16000000")
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.resources.limits[memory]"}}},
		{name: "memory limit beyond an int64 of bytes, which would change when stored", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1000E")
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.resources.limits[memory]"}}},
		{name: "memory limit just beyond an int64 of bytes", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("9223372036854775808")
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.resources.limits[memory]"}}},
		{name: "cpu request beyond an int64 of millicores", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("1e16")
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.resources.requests[cpu]"}}},
		{name: "labels over 256KiB", db: myDatabase(func(d *example.MyDatabase) {
			d.Labels = map[string]string{}
			for i := 0; i < 5000; i++ {
				d.Labels[fmt.Sprintf("label-%05d", i)] = strings.Repeat("v", 60)
			}
		}), want: []errorSummary{{field.ErrorTypeTooLong, "metadata.labels"}}},
		{name: "gpu request", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		}), want: []errorSummary{{field.ErrorTypeNotSupported, "spec.resources.requests[nvidia.com/gpu]"}}},
		{name: "resource claims", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
		}), want: []errorSummary{{field.ErrorTypeForbidden, "spec.resources.claims"}}},
		{name: "missing deletion policy", db: myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = "" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.deletionPolicy"}}},
		{name: "unknown deletion policy", db: myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = "Snapshot" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.deletionPolicy"}}},
		{name: "backup schedule", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Schedule: "0 3 * * *", Retention: 7, Destination: s3Destination()}
		})},
		{name: "schedule without a destination", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Schedule: "0 3 * * *", Retention: 7}
		}), want: []errorSummary{{field.ErrorTypeRequired, "spec.backup.destination"}}},
		{name: "bad cron", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Schedule: "every night", Retention: 7, Destination: s3Destination()}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.backup.schedule"}}},
		{name: "cron with a time zone", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Schedule: "TZ=Asia/Tokyo 0 3 * * *", Retention: 7, Destination: s3Destination()}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.backup.schedule"}}},
		{name: "final backup without a schedule", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, FinalBackup: true, Destination: s3Destination()}
		})},
		{name: "final backup without a destination", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, FinalBackup: true}
		}), want: []errorSummary{{field.ErrorTypeRequired, "spec.backup.destination"}}},
		{name: "mysql: a schedule and a final backup", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Schedule: "0 3 * * *", Retention: 7, FinalBackup: true, Destination: s3Destination()}
		})},
		{name: "a destination alone, for backups on demand", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: s3Destination(func(s *example.S3Destination) {
				s.Endpoint, s.Region, s.Prefix = "http://127.0.0.1:9000/", "eu-west-1", "prod/db"
				s.CABundle = &example.CABundleSource{ConfigMapName: "store-ca", Key: "ca.crt"}
			})}
		})},
		{name: "a destination naming nothing", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{}}
		}), want: []errorSummary{{field.ErrorTypeRequired, "spec.backup.destination"}}},
		{name: "a volume destination", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{Volume: &example.VolumeDestination{
				StorageClassName: ptr.To("fast"), StorageSize: ptr.To(resource.MustParse("20Gi"))}}}
		})},
		{name: "a volume destination with defaults", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{Volume: &example.VolumeDestination{}}}
		})},
		{name: "both an S3 and a volume destination", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{
				S3: &example.S3Destination{Endpoint: "https://s3.example.com", Bucket: "backups",
					CredentialsSecret: example.S3CredentialsSecret{Name: "s3"}},
				Volume: &example.VolumeDestination{}}}
		}), want: []errorSummary{{field.ErrorTypeForbidden, "spec.backup.destination.volume"}}},
		{name: "a volume destination with a bad class and size", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{Volume: &example.VolumeDestination{
				StorageClassName: ptr.To("Bad_Class"), StorageSize: ptr.To(resource.MustParse("-1Gi"))}}}
		}), want: []errorSummary{
			{field.ErrorTypeInvalid, "spec.backup.destination.volume.storageClassName"},
			{field.ErrorTypeInvalid, "spec.backup.destination.volume.storageSize"},
		}},
		{name: "a volume destination of no size", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{Volume: &example.VolumeDestination{
				StorageSize: ptr.To(resource.MustParse("0"))}}}
		}), want: []errorSummary{{field.ErrorTypeRequired, "spec.backup.destination.volume.storageSize"}}},
		{name: "every field of a destination wrong", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{S3: &example.S3Destination{
				Endpoint: "ftp://store", Bucket: "Backups_1", Prefix: "/prod/../x/",
				CredentialsSecret: example.S3CredentialsSecret{Name: "Bad_Secret", AccessKeyIDKey: "a/b"},
				CABundle:          &example.CABundleSource{SecretName: "a", ConfigMapName: "b", Key: "ca.crt"},
			}}}
		}), want: []errorSummary{
			{field.ErrorTypeInvalid, "spec.backup.destination.s3.bucket"},
			{field.ErrorTypeInvalid, "spec.backup.destination.s3.caBundle"},
			{field.ErrorTypeInvalid, "spec.backup.destination.s3.credentialsSecret.accessKeyIDKey"},
			{field.ErrorTypeInvalid, "spec.backup.destination.s3.credentialsSecret.name"},
			{field.ErrorTypeInvalid, "spec.backup.destination.s3.endpoint"},
			{field.ErrorTypeInvalid, "spec.backup.destination.s3.prefix"},
			{field.ErrorTypeRequired, "spec.backup.destination.s3.credentialsSecret.secretAccessKeyKey"},
		}},
		{name: "retention out of bounds", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Schedule: "@daily", Retention: 101, Destination: s3Destination()}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.backup.retention"}}},
		{name: "restore from a backup", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "prod-mysql-x7k2p"}
		})},
		{name: "restore mysql", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "prod-mysql-x7k2p"}
		})},
		{name: "point-in-time recovery", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: s3Destination(),
				PointInTimeRecovery: &example.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: time.Minute}}}
		})},
		{name: "point-in-time recovery of mysql, to a volume, archiving every second", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{Volume: &example.VolumeDestination{}},
				PointInTimeRecovery: &example.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: time.Second}, RetentionWindow: &metav1.Duration{Duration: time.Minute}}}
		}), want: []errorSummary{
			{field.ErrorTypeRequired, "spec.backup.destination.s3"},
			{field.ErrorTypeInvalid, "spec.backup.pointInTimeRecovery.archiveTimeout"},
			{field.ErrorTypeInvalid, "spec.backup.pointInTimeRecovery.retentionWindow"},
		}},
		{name: "point-in-time recovery to a volume", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: &example.BackupDestination{Volume: &example.VolumeDestination{}},
				PointInTimeRecovery: &example.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: time.Minute}}}
		}), want: []errorSummary{{field.ErrorTypeRequired, "spec.backup.destination.s3"}}},
		{name: "point-in-time recovery of mariadb, restored to a time", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EngineMariaDB, "10.11"
			d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: s3Destination(),
				PointInTimeRecovery: &example.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: time.Minute}}}
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{Time: &metav1.Time{Time: time.Now()}}}
		})},
		{name: "restore mariadb to an LSN", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EngineMariaDB, "10.11"
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{LSN: "0/3000148"}}
		}), want: []errorSummary{{field.ErrorTypeForbidden, "spec.restoreFrom.pointInTime.lsn"}}},
		{name: "restore mariadb to a GTID", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EngineMariaDB, "10.11"
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{GTID: "0-1-4711"}}
		})},
		{name: "restore mysql to a GTID", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:4711"}}
		})},
		{name: "restore mysql to a MariaDB GTID, and a time", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{GTID: "0-1-4711", Time: &metav1.Time{Time: time.Now()}}}
		}), want: []errorSummary{
			{field.ErrorTypeInvalid, "spec.restoreFrom.pointInTime.gtid"},
			{field.ErrorTypeInvalid, "spec.restoreFrom.pointInTime"},
		}},
		{name: "restore mariadb to a MySQL GTID", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = example.EngineMariaDB, "10.11"
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:4711"}}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.restoreFrom.pointInTime.gtid"}}},
		{name: "restore postgres to a GTID", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{GTID: "0-1-4711"}}
		}), want: []errorSummary{{field.ErrorTypeForbidden, "spec.restoreFrom.pointInTime.gtid"}}},
		{name: "client TLS required", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.TLS = &example.TLSSpec{ClientTLS: example.ClientTLSRequired}
		})},
		{name: "client TLS of an unknown mode", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.TLS = &example.TLSSpec{ClientTLS: "Always"}
		}), want: []errorSummary{{field.ErrorTypeNotSupported, "spec.tls.clientTLS"}}},
		{name: "restore to a time", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{Time: &metav1.Time{Time: time.Now()}}}
		})},
		{name: "restore to an LSN and latest, of mysql", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{LSN: "0/ZZ", Latest: true}}
		}), want: []errorSummary{
			{field.ErrorTypeForbidden, "spec.restoreFrom.pointInTime.lsn"},
			{field.ErrorTypeInvalid, "spec.restoreFrom.pointInTime"},
		}},
		{name: "restore a database to a time, the backup picked", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{DatabaseName: "shop", PointInTime: &example.RecoveryTarget{Latest: true}}
		})},
		{name: "restore a database without a point, and both sources", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{DatabaseName: "Shop"}
		}), want: []errorSummary{
			{field.ErrorTypeRequired, "spec.restoreFrom.pointInTime"},
			{field.ErrorTypeInvalid, "spec.restoreFrom.databaseName"},
		}},
		{name: "restore from both a backup and a database", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "nightly", DatabaseName: "shop", PointInTime: &example.RecoveryTarget{Latest: true}}
		}), want: []errorSummary{{field.ErrorTypeForbidden, "spec.restoreFrom.databaseName"}}},
		{name: "restore from nothing", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{}
		}), want: []errorSummary{{field.ErrorTypeRequired, "spec.restoreFrom.backupName"}}},
		{name: "restore to no point", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "shop-nightly", PointInTime: &example.RecoveryTarget{}}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.restoreFrom.pointInTime"}}},
		{name: "restore from a bad name", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "Bad_Name"}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "spec.restoreFrom.backupName"}}},
		{name: "parameters", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Parameters = map[string]string{"max_connections": "500", "innodb_buffer_pool_size": "256M", "slow_query_log": "ON"}
		})},
		{name: "postgres parameters", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Parameters = map[string]string{"work_mem": "64MB", "max_connections": "200", "log_statement": "ddl"}
		})},
		{name: "bad parameters, each with its path", db: myDatabase(asPostgres, func(d *example.MyDatabase) {
			d.Spec.Parameters = map[string]string{"work_mem": "64mb", "archive_command": "cp %p /x", "innodb_buffer_pool_size": "1G", "max_connections": "200"}
		}), want: []errorSummary{
			{field.ErrorTypeInvalid, "spec.parameters[archive_command]"},
			{field.ErrorTypeInvalid, "spec.parameters[innodb_buffer_pool_size]"},
			{field.ErrorTypeInvalid, "spec.parameters[work_mem]"},
		}},
		{name: "too many parameters", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Parameters = map[string]string{}
			for i := range MaxParameters + 1 {
				d.Spec.Parameters[fmt.Sprintf("p%d", i)] = "1"
			}
		}), want: []errorSummary{{field.ErrorTypeTooMany, "spec.parameters"}}},
		{name: "every spec field wrong", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec = example.MyDatabaseSpec{Engine: "db2", Version: "1", Replicas: 100, DeletionPolicy: "x"}
		}), want: []errorSummary{
			{field.ErrorTypeNotSupported, "spec.engine"},
			{field.ErrorTypeInvalid, "spec.replicas"},
			{field.ErrorTypeRequired, "spec.storageSize"},
			{field.ErrorTypeNotSupported, "spec.deletionPolicy"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(ValidateMyDatabase(tc.db))
			if diff := cmp.Diff(tc.want, got, sortSummaries, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func withPointInTimeRecovery(d *example.MyDatabase) {
	d.Spec.Backup = &example.BackupPolicy{Retention: 7, Destination: s3Destination(),
		PointInTimeRecovery: &example.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: time.Minute}}}
}

func TestValidateMyDatabaseUpdate(t *testing.T) {
	tests := []struct {
		name string
		old  *example.MyDatabase
		db   *example.MyDatabase
		want []errorSummary
	}{
		{name: "no change", old: myDatabase(), db: myDatabase()},
		{name: "a managed fields time JSON cannot write", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) {
			d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate,
				Time: &metav1.Time{Time: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}}}
		}), want: []errorSummary{{field.ErrorTypeInvalid, "metadata.managedFields[0].time"}}},
		{name: "scale up", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 5 })},
		{name: "scale down", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 1 })},
		{name: "grow storage", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("100Gi") })},
		{name: "same storage in other units", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("51200Mi") })},
		{name: "upgrade version", old: myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "8.0" }), db: myDatabase()},
		{name: "upgrade postgres across majors (pg_upgrade)",
			old: myDatabase(func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "15" }),
			db:  myDatabase(func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17" })},
		{name: "downgrade postgres across majors",
			old:  myDatabase(func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17" }),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "15" }),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.version"}}},
		{name: "upgrade postgres across majors with point-in-time recovery: a new system may not share the archive",
			old:  myDatabase(withPointInTimeRecovery, func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "15" }),
			db:   myDatabase(withPointInTimeRecovery, func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17" }),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.version"}}},
		{name: "postgres keeps its version", old: myDatabase(asPostgres), db: myDatabase(asPostgres, func(d *example.MyDatabase) { d.Spec.Replicas = 5 })},
		{name: "change deletion policy", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = example.DeletionPolicyDelete })},
		{name: "change resources", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("4Gi")
		})},

		{name: "raise max_connections with replicas", old: myDatabase(asPostgres, pgParams("max_connections", "200")),
			db: myDatabase(asPostgres, pgParams("max_connections", "300"))},
		{name: "lower max_connections on one instance", old: myDatabase(asPostgres, pgParams("max_connections", "200")),
			db: myDatabase(asPostgres, pgParams("max_connections", "150"), func(d *example.MyDatabase) { d.Spec.Replicas = 1 })},
		{name: "lower a live parameter with replicas", old: myDatabase(asPostgres, pgParams("work_mem", "64MB")),
			db: myDatabase(asPostgres, pgParams("work_mem", "8MB"))},
		{name: "lower max_connections with replicas", old: myDatabase(asPostgres, pgParams("max_connections", "200")),
			db:   myDatabase(asPostgres, pgParams("max_connections", "150")),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.parameters[max_connections]"}}},
		{name: "drop max_connections to its lower default with replicas", old: myDatabase(asPostgres, pgParams("max_connections", "200")),
			db:   myDatabase(asPostgres),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.parameters[max_connections]"}}},
		{name: "change engine", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.engine"}}},
		{name: "shrink storage", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("10Gi") }),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.storageSize"}}},
		{name: "shrink storage by one byte", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = *resource.NewQuantity(50<<30-1, resource.BinarySI) }),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.storageSize"}}},
		{name: "downgrade version", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "8.0" }),
			want: []errorSummary{{field.ErrorTypeForbidden, "spec.version"}}},
		{name: "set storage class", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.StorageClassName = ptr.To("fast") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageClassName"}}},
		{name: "change storage class",
			old:  myDatabase(func(d *example.MyDatabase) { d.Spec.StorageClassName = ptr.To("slow") }),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.StorageClassName = ptr.To("fast") }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.storageClassName"}}},
		{name: "invalid replicas on update", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 0 }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.replicas"}}},
		{name: "unsupported version on update", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "9.9" }),
			want: []errorSummary{{field.ErrorTypeNotSupported, "spec.version"}}},
		{name: "add a restore source later", old: myDatabase(asPostgres),
			db:   myDatabase(asPostgres, func(d *example.MyDatabase) { d.Spec.RestoreFrom = &example.RestoreSource{BackupName: "b"} }),
			want: []errorSummary{{field.ErrorTypeInvalid, "spec.restoreFrom"}}},
		{name: "rename", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Name = "other" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.name"}}},
		{name: "move namespace", old: myDatabase(),
			db:   myDatabase(func(d *example.MyDatabase) { d.Namespace = "other" }),
			want: []errorSummary{{field.ErrorTypeInvalid, "metadata.namespace"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(ValidateMyDatabaseUpdate(tc.db, tc.old))
			if diff := cmp.Diff(tc.want, got, sortSummaries, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateMyDatabaseStatusUpdate(t *testing.T) {
	condition := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.Now()}
	}
	tests := []struct {
		name   string
		status example.MyDatabaseStatus
		want   []errorSummary
	}{
		{name: "converged", status: example.MyDatabaseStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3,
			Conditions: []metav1.Condition{condition(example.ConditionReady, metav1.ConditionTrue, "AllReplicasReady")}}},
		{name: "more ready than replicas", status: example.MyDatabaseStatus{Replicas: 1, ReadyReplicas: 2},
			want: []errorSummary{{field.ErrorTypeInvalid, "status.readyReplicas"}}},
		{name: "negative replicas", status: example.MyDatabaseStatus{Replicas: -1, ReadyReplicas: -2},
			want: []errorSummary{{field.ErrorTypeInvalid, "status.replicas"}, {field.ErrorTypeInvalid, "status.readyReplicas"}}},
		{name: "negative observed generation", status: example.MyDatabaseStatus{ObservedGeneration: -1},
			want: []errorSummary{{field.ErrorTypeInvalid, "status.observedGeneration"}}},
		{name: "condition without reason", status: example.MyDatabaseStatus{
			Conditions: []metav1.Condition{condition(example.ConditionReady, metav1.ConditionTrue, "")}},
			want: []errorSummary{{field.ErrorTypeRequired, "status.conditions[0].reason"}}},
		{name: "duplicate condition", status: example.MyDatabaseStatus{Conditions: []metav1.Condition{
			condition(example.ConditionReady, metav1.ConditionTrue, "A"), condition(example.ConditionReady, metav1.ConditionFalse, "B")}},
			want: []errorSummary{{field.ErrorTypeDuplicate, "status.conditions[1]"}}},
		{name: "bad condition status", status: example.MyDatabaseStatus{
			Conditions: []metav1.Condition{condition(example.ConditionReady, "Maybe", "A")}},
			want: []errorSummary{{field.ErrorTypeNotSupported, "status.conditions[0].status"}}},
		{name: "times in the years RFC 3339 writes", status: example.MyDatabaseStatus{
			LastScheduleTime:  &metav1.Time{Time: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)},
			TargetPrimaryTime: &metav1.MicroTime{Time: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
			Conditions: []metav1.Condition{{Type: example.ConditionReady, Status: metav1.ConditionTrue, Reason: "A",
				LastTransitionTime: metav1.NewTime(time.Date(9999, 1, 1, 0, 0, 0, 0, time.FixedZone("", -3600)))}}}},
		{name: "times JSON cannot write", status: example.MyDatabaseStatus{
			LastScheduleTime:  &metav1.Time{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
			TargetPrimaryTime: &metav1.MicroTime{Time: time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC)},
			Conditions: []metav1.Condition{{Type: example.ConditionReady, Status: metav1.ConditionTrue, Reason: "A",
				LastTransitionTime: metav1.NewTime(time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -3600)))}}},
			want: []errorSummary{{field.ErrorTypeInvalid, "status.conditions[0].lastTransitionTime"},
				{field.ErrorTypeInvalid, "status.lastScheduleTime"}, {field.ErrorTypeInvalid, "status.targetPrimaryTime"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := myDatabase(func(d *example.MyDatabase) { d.Status = tc.status })
			got := summarize(ValidateMyDatabaseStatusUpdate(db, myDatabase()))
			if diff := cmp.Diff(tc.want, got, sortSummaries, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidationMessages(t *testing.T) {
	errs := ValidateMyDatabaseUpdate(myDatabase(func(d *example.MyDatabase) {
		d.Spec.StorageSize = resource.MustParse("10Gi")
		d.Spec.Replicas = 0
	}), myDatabase())
	for _, e := range errs {
		if !strings.Contains(e.Detail, "must") && !strings.Contains(e.Detail, "may not") {
			t.Errorf("%s: detail %q says neither \"must\" nor \"may not\"", e.Field, e.Detail)
		}
	}
	if len(errs) != 2 {
		t.Errorf("got %d errors, want 2: %v", len(errs), errs)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		old  *example.MyDatabase
		db   *example.MyDatabase
		want []string
	}{
		{name: "seed example", db: myDatabase()},
		{name: "deprecated version", db: myDatabase(func(d *example.MyDatabase) { d.Spec.Version = "8.0" }),
			want: []string{"spec.version: mysql 8.0 reached its end of life in April 2026; move to 8.4"}},
		{name: "tiny memory limit", db: myDatabase(func(d *example.MyDatabase) {
			d.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
		}), want: []string{"spec.resources.limits.memory: 128Mi is below the 256Mi a database engine needs to start"}},
		{name: "delete policy on create", db: myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = example.DeletionPolicyDelete }),
			want: []string{"spec.deletionPolicy: Delete removes the volumes, and all data on them, when this MyDatabase is deleted"}},
		{name: "delete policy kept on update",
			old: myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = example.DeletionPolicyDelete }),
			db:  myDatabase(func(d *example.MyDatabase) { d.Spec.DeletionPolicy = example.DeletionPolicyDelete })},
		{name: "scale down to one", old: myDatabase(), db: myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 1 }),
			want: []string{"spec.replicas: a single replica has no standby and no PodDisruptionBudget; a node drain takes the database down"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Warnings(tc.db, tc.old), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func asPostgres(d *example.MyDatabase) { d.Spec.Engine, d.Spec.Version = example.EnginePostgres, "17" }

func pgParams(name, value string) func(*example.MyDatabase) {
	return func(d *example.MyDatabase) { d.Spec.Parameters = map[string]string{name: value} }
}
