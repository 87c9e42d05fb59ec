package validation

import (
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// benchDB is a defaulted MyDatabase with the ~1 KiB of labels and
// annotations test/bench sends.
func benchDB() *example.MyDatabase {
	return &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{
			Name: "c16-r0-00042", Namespace: "bench", ResourceVersion: "1", Generation: 1,
			Labels: map[string]string{
				"app.kubernetes.io/part-of":      "mydb-bench",
				"bench.mydb.example.com/filler1": strings.Repeat("a", 63),
				"bench.mydb.example.com/filler2": strings.Repeat("b", 63),
			},
			Annotations: map[string]string{"mydb.example.com/paused": "true", "bench.mydb.example.com/filler": strings.Repeat("x", 600)},
		},
		Spec: example.MyDatabaseSpec{
			Engine: example.EngineMySQL, Version: "8.4", Replicas: 1, StorageSize: resource.MustParse("1Gi"),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			DeletionPolicy: example.DeletionPolicyRetain,
		},
	}
}

func BenchmarkValidateMyDatabase(b *testing.B) {
	db := benchDB()
	b.ReportAllocs()
	for b.Loop() {
		if errs := ValidateMyDatabase(db); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkValidateMyDatabaseUpdate(b *testing.B) {
	old := benchDB()
	db := old.DeepCopy()
	db.Spec.Replicas = 3
	db.Spec.StorageSize = resource.MustParse("2Gi")
	b.ReportAllocs()
	for b.Loop() {
		if errs := ValidateMyDatabaseUpdate(db, old); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkValidateMyDatabaseStatusUpdate(b *testing.B) {
	old := benchDB()
	db := old.DeepCopy()
	db.Status = example.MyDatabaseStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, Endpoint: "x.bench.svc:3306",
		Conditions: []metav1.Condition{{Type: example.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllReplicasReady",
			ObservedGeneration: 1, LastTransitionTime: metav1.Unix(1.7e9, 0)}}}
	b.ReportAllocs()
	for b.Loop() {
		if errs := ValidateMyDatabaseStatusUpdate(db, old); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

func BenchmarkWarnings(b *testing.B) {
	old := benchDB()
	db := old.DeepCopy()
	b.ReportAllocs()
	for b.Loop() {
		_ = Warnings(db, old)
	}
}
