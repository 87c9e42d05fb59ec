package v1

import (
	"time"

	"github.com/mydb-dev/mydb/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// DefaultArchiveTimeout is spec.backup.pointInTimeRecovery.archiveTimeout's
// default.
const DefaultArchiveTimeout = 5 * time.Minute

// DefaultBackupRetention is how many scheduled backups are kept by default.
const DefaultBackupRetention = 7

// DefaultResources are the compute resources of a database container whose
// spec names none (the seed's values).
var DefaultResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("250m"),
		corev1.ResourceMemory: resource.MustParse("512Mi"),
	},
	Limits: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	},
}

// DefaultFailoverDelay is how long a primary may be unready before a
// replica is promoted, when spec.failoverDelay is not set.
const DefaultFailoverDelay = 30 * time.Second

// SetDefaults_MyDatabase reads a zero time as no time. Protobuf carries a
// time that is present and empty, JSON cannot (it writes null): without
// this, a protobuf client would see a time that a JSON client does not,
// such as a last scheduled backup in year 1.
func SetDefaults_MyDatabase(db *MyDatabase) {
	db.DeletionTimestamp = noZeroTime(db.DeletionTimestamp)
	db.Status.LastScheduleTime = noZeroTime(db.Status.LastScheduleTime)
	if t := db.Status.TargetPrimaryTime; t != nil && t.IsZero() {
		db.Status.TargetPrimaryTime = nil
	}
}

// SetDefaults_MyDatabaseBackup reads a zero time as no time, as
// SetDefaults_MyDatabase does.
func SetDefaults_MyDatabaseBackup(b *MyDatabaseBackup) {
	b.DeletionTimestamp = noZeroTime(b.DeletionTimestamp)
	b.Status.StartTime = noZeroTime(b.Status.StartTime)
	b.Status.CompletionTime = noZeroTime(b.Status.CompletionTime)
}

func noZeroTime(t *metav1.Time) *metav1.Time {
	if t != nil && t.IsZero() {
		return nil
	}
	return t
}

// SetDefaults_MyDatabaseSpec fills in the optional fields of a spec.
func SetDefaults_MyDatabaseSpec(spec *MyDatabaseSpec) {
	if spec.Version == "" {
		if e, ok := engine.Lookup(string(spec.Engine)); ok {
			spec.Version = e.DefaultVersion
		}
	}
	if spec.Replicas == nil {
		spec.Replicas = ptr.To[int32](1)
	}
	if spec.DeletionPolicy == "" {
		spec.DeletionPolicy = DeletionPolicyRetain
	}
	if spec.Backup != nil && spec.Backup.PointInTimeRecovery != nil && spec.Backup.PointInTimeRecovery.ArchiveTimeout == nil {
		spec.Backup.PointInTimeRecovery.ArchiveTimeout = &metav1.Duration{Duration: DefaultArchiveTimeout}
	}
	if spec.Backup != nil && spec.Backup.Retention == nil {
		spec.Backup.Retention = ptr.To[int32](DefaultBackupRetention)
	}
	if spec.FailoverDelay == nil {
		spec.FailoverDelay = &metav1.Duration{Duration: DefaultFailoverDelay}
	}
	if spec.Replication == nil {
		spec.Replication = &ReplicationSpec{}
	}
	if spec.Replication.Mode == "" {
		spec.Replication.Mode = ReplicationModeAsync
	}
	// spec.resources is defaulted by the server after admission
	// (SetDefaultResources), so the namespace's LimitRange defaults first.
}

// SetDefaultResources defaults each request and limit on its own, so a spec
// that sets only a memory limit keeps the default CPU figures; a default never
// puts a request above a limit, whichever of the two the user set. The
// server calls it when it prepares a create or an update, after the mutating
// admission plugins: a figure the namespace's LimitRange defaulted is not
// missing any more.
func SetDefaultResources(r *corev1.ResourceRequirements) {
	for name, def := range DefaultResources.Limits {
		if _, ok := r.Limits[name]; ok {
			continue
		}
		if r.Limits == nil {
			r.Limits = corev1.ResourceList{}
		}
		value := def.DeepCopy()
		if request, ok := r.Requests[name]; ok && request.Cmp(value) > 0 {
			value = request.DeepCopy()
		}
		r.Limits[name] = value
	}
	for name, def := range DefaultResources.Requests {
		if _, ok := r.Requests[name]; ok {
			continue
		}
		if r.Requests == nil {
			r.Requests = corev1.ResourceList{}
		}
		value := def.DeepCopy()
		if limit, ok := r.Limits[name]; ok && limit.Cmp(value) < 0 {
			value = limit.DeepCopy()
		}
		r.Requests[name] = value
	}
}

// The default keys of an S3 credentials Secret and of a CA bundle.
const (
	DefaultAccessKeyIDKey     = "accessKeyID"
	DefaultSecretAccessKeyKey = "secretAccessKey"
	DefaultCABundleKey        = "ca.crt"
)

// SetDefaults_S3CredentialsSecret fills in the keys of an access key.
func SetDefaults_S3CredentialsSecret(s *S3CredentialsSecret) {
	if s.AccessKeyIDKey == "" {
		s.AccessKeyIDKey = DefaultAccessKeyIDKey
	}
	if s.SecretAccessKeyKey == "" {
		s.SecretAccessKeyKey = DefaultSecretAccessKeyKey
	}
}

// SetDefaults_CABundleSource fills in the key of a CA bundle.
func SetDefaults_CABundleSource(s *CABundleSource) {
	if s.Key == "" {
		s.Key = DefaultCABundleKey
	}
}

// DefaultPasswordKey is the key of a role's password Secret when the
// spec names none.
const DefaultPasswordKey = "password"

// SetDefaults_SecretKeySelector fills in the key of a role's password.
func SetDefaults_SecretKeySelector(s *SecretKeySelector) {
	if s.Key == "" {
		s.Key = DefaultPasswordKey
	}
}

// SetDefaults_DatabaseSpec keeps a database of the spec unless told to
// drop it.
func SetDefaults_DatabaseSpec(d *DatabaseSpec) {
	if d.Ensure == "" {
		d.Ensure = EnsurePresent
	}
}

// SetDefaults_RoleSpec keeps a role of the spec unless told to drop it.
func SetDefaults_RoleSpec(r *RoleSpec) {
	if r.Ensure == "" {
		r.Ensure = EnsurePresent
	}
}

// SetDefaults_MyDatabaseBackupSpec backs up a replica unless told otherwise:
// a backup reads the whole database, which on the primary competes with
// the application's writes.
func SetDefaults_MyDatabaseBackupSpec(spec *MyDatabaseBackupSpec) {
	if spec.Target == "" {
		spec.Target = BackupTargetPreferReplica
	}
}
