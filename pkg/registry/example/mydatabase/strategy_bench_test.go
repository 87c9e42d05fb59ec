package mydatabase

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// The micro-benchmarks of the registry: what every create and update runs
// through the strategy, the selection predicate a LIST or watch with a
// field selector evaluates per object, and the table kubectl get asks for.

func benchStrategy(b *testing.B) strategy {
	b.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return NewStrategy(scheme)
}

// benchDB is a reconciled MyDatabase with the ~1 KiB of labels and
// annotations test/bench sends.
func benchDB(name string) *example.MyDatabase {
	return &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "bench", ResourceVersion: "10", Generation: 1, CreationTimestamp: metav1.Unix(1.7e9, 0),
			Labels: map[string]string{
				"app.kubernetes.io/part-of":      "mydb-bench",
				"bench.mydb.example.com/filler1": strings.Repeat("a", 63),
				"bench.mydb.example.com/filler2": strings.Repeat("b", 63),
			},
			Annotations: map[string]string{"bench.mydb.example.com/filler": strings.Repeat("x", 600)},
		},
		Spec: example.MyDatabaseSpec{
			Engine: example.EngineMySQL, Version: "8.4", Replicas: 1, StorageSize: resource.MustParse("1Gi"),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			DeletionPolicy: example.DeletionPolicyRetain,
		},
		Status: example.MyDatabaseStatus{
			ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, Endpoint: name + ".bench.svc:3306",
			Conditions: []metav1.Condition{{Type: example.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllReplicasReady",
				ObservedGeneration: 1, LastTransitionTime: metav1.Unix(1.7e9, 0)}},
		},
	}
}

// BenchmarkCreateStrategy is PrepareForCreate, Validate and WarningsOnCreate.
func BenchmarkCreateStrategy(b *testing.B) {
	s := benchStrategy(b)
	ctx := context.Background()
	in := benchDB("db-00000")
	b.ReportAllocs()
	for b.Loop() {
		db := in.DeepCopy()
		s.PrepareForCreate(ctx, db)
		if errs := s.Validate(ctx, db); len(errs) > 0 {
			b.Fatal(errs)
		}
		_ = s.WarningsOnCreate(ctx, db)
	}
}

// BenchmarkUpdateStrategy is PrepareForUpdate, ValidateUpdate and
// WarningsOnUpdate for a spec change.
func BenchmarkUpdateStrategy(b *testing.B) {
	s := benchStrategy(b)
	ctx := context.Background()
	old := benchDB("db-00000")
	in := old.DeepCopy()
	in.Spec.Replicas = 3
	b.ReportAllocs()
	for b.Loop() {
		db := in.DeepCopy()
		s.PrepareForUpdate(ctx, db, old)
		if errs := s.ValidateUpdate(ctx, db, old); len(errs) > 0 {
			b.Fatal(errs)
		}
		_ = s.WarningsOnUpdate(ctx, db, old)
	}
}

// BenchmarkStatusStrategy is what the controller's status write costs in
// the strategy.
func BenchmarkStatusStrategy(b *testing.B) {
	s := NewStatusStrategy(benchStrategy(b))
	ctx := context.Background()
	old := benchDB("db-00000")
	in := old.DeepCopy()
	in.Status.ReadyReplicas = 0
	b.ReportAllocs()
	for b.Loop() {
		db := in.DeepCopy()
		s.PrepareForUpdate(ctx, db, old)
		if errs := s.ValidateUpdate(ctx, db, old); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkSelectionPredicate matches one object against a field selector
// on spec.engine and status.ready and a label selector.
func BenchmarkSelectionPredicate(b *testing.B) {
	p := Match(labels.SelectorFromSet(labels.Set{"app.kubernetes.io/part-of": "mydb-bench"}),
		fields.ParseSelectorOrDie("spec.engine=mysql,status.ready=True"))
	db := benchDB("db-00000")
	b.ReportAllocs()
	for b.Loop() {
		ok, err := p.Matches(db)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

func BenchmarkConvertToTable(b *testing.B) {
	ctx := context.Background()
	list := &example.MyDatabaseList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}
	for i := 0; i < 500; i++ {
		list.Items = append(list.Items, *benchDB(fmt.Sprintf("db-%05d", i)))
	}
	for _, c := range []struct {
		name string
		obj  runtime.Object
	}{{"One", benchDB("db-00000")}, {"List500", list}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t, err := (&tableConvertor{}).ConvertToTable(ctx, c.obj, &metav1.TableOptions{})
				if err != nil || len(t.Rows) == 0 {
					b.Fatal(err)
				}
			}
		})
	}
}
