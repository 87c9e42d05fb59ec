package v1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func quantities(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

func TestSetDefaults(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		spec v1.MyDatabaseSpec
		want v1.MyDatabaseSpec
	}{{
		name: "seed example gets version, policy and the seed's resources",
		spec: v1.MyDatabaseSpec{Engine: v1.EngineMySQL, Replicas: ptr.To[int32](3), StorageSize: resource.MustParse("50Gi")},
		want: v1.MyDatabaseSpec{Engine: v1.EngineMySQL, Version: "9.7", Replicas: ptr.To[int32](3), StorageSize: resource.MustParse("50Gi"),
			Resources:      corev1.ResourceRequirements{Requests: quantities("250m", "512Mi"), Limits: quantities("1", "1Gi")},
			DeletionPolicy: v1.DeletionPolicyRetain},
	}, {
		name: "postgres defaults to its own version and one replica",
		spec: v1.MyDatabaseSpec{Engine: v1.EnginePostgres, StorageSize: resource.MustParse("1Gi")},
		want: v1.MyDatabaseSpec{Engine: v1.EnginePostgres, Version: "17", Replicas: ptr.To[int32](1), StorageSize: resource.MustParse("1Gi"),
			Resources:      corev1.ResourceRequirements{Requests: quantities("250m", "512Mi"), Limits: quantities("1", "1Gi")},
			DeletionPolicy: v1.DeletionPolicyRetain},
	}, {
		name: "unknown engine keeps an empty version for validation to reject",
		spec: v1.MyDatabaseSpec{Engine: "oracle", Replicas: ptr.To[int32](2), DeletionPolicy: v1.DeletionPolicyDelete},
		want: v1.MyDatabaseSpec{Engine: "oracle", Replicas: ptr.To[int32](2), DeletionPolicy: v1.DeletionPolicyDelete,
			Resources: corev1.ResourceRequirements{Requests: quantities("250m", "512Mi"), Limits: quantities("1", "1Gi")}},
	}, {
		name: "a small memory limit pulls the default request down to it",
		spec: v1.MyDatabaseSpec{Engine: v1.EngineMySQL, Version: "8.0", Replicas: ptr.To[int32](1),
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}},
		want: v1.MyDatabaseSpec{Engine: v1.EngineMySQL, Version: "8.0", Replicas: ptr.To[int32](1), DeletionPolicy: v1.DeletionPolicyRetain,
			Resources: corev1.ResourceRequirements{Requests: quantities("250m", "256Mi"), Limits: quantities("1", "256Mi")}},
	}, {
		name: "a large cpu request pushes the default limit up to it",
		spec: v1.MyDatabaseSpec{Engine: v1.EngineMySQL, Version: "8.4", Replicas: ptr.To[int32](1),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
		want: v1.MyDatabaseSpec{Engine: v1.EngineMySQL, Version: "8.4", Replicas: ptr.To[int32](1), DeletionPolicy: v1.DeletionPolicyRetain,
			Resources: corev1.ResourceRequirements{Requests: quantities("4", "512Mi"), Limits: quantities("4", "1Gi")}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := &v1.MyDatabase{Spec: tc.spec}
			scheme.Default(db)
			// Decoding leaves resources to the server (after the LimitRange).
			if diff := cmp.Diff(tc.spec.Resources, db.Spec.Resources); diff != "" {
				t.Errorf("decoding defaulted resources (-want +got):\n%s", diff)
			}
			v1.SetDefaultResources(&db.Spec.Resources)
			if tc.want.FailoverDelay == nil {
				tc.want.FailoverDelay = &metav1.Duration{Duration: v1.DefaultFailoverDelay}
			}
			if tc.want.Replication == nil {
				tc.want.Replication = &v1.ReplicationSpec{Mode: v1.ReplicationModeAsync}
			}
			if diff := cmp.Diff(tc.want, db.Spec); diff != "" {
				t.Errorf("defaulted spec (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetDefaultsDoesNotShareDefaults(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	db := &v1.MyDatabase{Spec: v1.MyDatabaseSpec{Engine: v1.EngineMySQL}}
	scheme.Default(db)
	v1.SetDefaultResources(&db.Spec.Resources)
	db.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("8")
	if got := v1.DefaultResources.Limits[corev1.ResourceCPU]; got.String() != "1" {
		t.Fatalf("changing a defaulted object changed DefaultResources: cpu limit %s", got.String())
	}
}

func TestSetDefaultsOfBackups(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	db := &v1.MyDatabase{Spec: v1.MyDatabaseSpec{Engine: v1.EnginePostgres, Backup: &v1.BackupPolicy{Destination: &v1.BackupDestination{S3: &v1.S3Destination{
		Endpoint: "https://s3.example.com", Bucket: "b", CredentialsSecret: v1.S3CredentialsSecret{Name: "s3"},
		CABundle: &v1.CABundleSource{ConfigMapName: "ca"},
	}}}}}
	scheme.Default(db)
	s3 := db.Spec.Backup.Destination.S3
	if got := s3.CredentialsSecret; got.AccessKeyIDKey != "accessKeyID" || got.SecretAccessKeyKey != "secretAccessKey" {
		t.Errorf("credentials Secret keys %+v, want accessKeyID and secretAccessKey", got)
	}
	if s3.CABundle.Key != "ca.crt" {
		t.Errorf("CA bundle key %q, want ca.crt", s3.CABundle.Key)
	}
	b := &v1.MyDatabaseBackup{Spec: v1.MyDatabaseBackupSpec{DatabaseName: "db"}}
	scheme.Default(b)
	if b.Spec.Target != v1.BackupTargetPreferReplica {
		t.Errorf("target %q, want PreferReplica", b.Spec.Target)
	}
	primary := &v1.MyDatabaseBackup{Spec: v1.MyDatabaseBackupSpec{DatabaseName: "db", Target: v1.BackupTargetPrimary}}
	scheme.Default(primary)
	if primary.Spec.Target != v1.BackupTargetPrimary {
		t.Errorf("target %q, want the Primary asked for", primary.Spec.Target)
	}
}

// A zero time is what protobuf decodes from a time that is present and
// empty; JSON reads the same object as having none.
func TestSetDefaultsReadsAZeroTimeAsNone(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	set := metav1.Unix(1, 0)
	db := &v1.MyDatabase{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}},
		Spec:   v1.MyDatabaseSpec{Engine: v1.EnginePostgres},
		Status: v1.MyDatabaseStatus{LastScheduleTime: &metav1.Time{}, TargetPrimaryTime: &metav1.MicroTime{}}}
	scheme.Default(db)
	if db.DeletionTimestamp != nil || db.Status.LastScheduleTime != nil || db.Status.TargetPrimaryTime != nil {
		t.Errorf("zero times kept: deletionTimestamp %v, lastScheduleTime %v, targetPrimaryTime %v",
			db.DeletionTimestamp, db.Status.LastScheduleTime, db.Status.TargetPrimaryTime)
	}
	b := &v1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}},
		Status: v1.MyDatabaseBackupStatus{StartTime: &set, CompletionTime: &metav1.Time{}}}
	scheme.Default(b)
	if b.DeletionTimestamp != nil || b.Status.CompletionTime != nil {
		t.Errorf("zero times kept: deletionTimestamp %v, completionTime %v", b.DeletionTimestamp, b.Status.CompletionTime)
	}
	if b.Status.StartTime == nil || !b.Status.StartTime.Equal(&set) {
		t.Errorf("startTime %v, want %v kept", b.Status.StartTime, set)
	}
}
