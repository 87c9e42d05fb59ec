package manager

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimForCacheKeepsWhatTheControllersRead(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{
		Name: "shop", ManagedFields: managed, Finalizers: []string{examplev1.FinalBackupFinalizer},
		Labels: map[string]string{"team": "payments"},
		Annotations: map[string]string{
			names.PausedAnnotation: "true", examplev1.SkipFinalBackupAnnotation: "true",
			"kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`, "bench.mydb.example.com/filler": "x",
		},
	}}
	got, err := TrimForCache(db)
	if err != nil {
		t.Fatal(err)
	}
	want := metav1.ObjectMeta{Name: "shop", Finalizers: []string{examplev1.FinalBackupFinalizer},
		Annotations: map[string]string{names.PausedAnnotation: "true", examplev1.SkipFinalBackupAnnotation: "true"}}
	if diff := cmp.Diff(want, got.(*examplev1.MyDatabase).ObjectMeta); diff != "" {
		t.Errorf("cached metadata (-want +got):\n%s", diff)
	}

	// Databases of the default resources share one copy of them; others
	// keep their own.
	a, b := defaulted(), defaulted()
	b.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
	for _, obj := range []*examplev1.MyDatabase{a, b} {
		if _, err := TrimForCache(obj); err != nil {
			t.Fatal(err)
		}
	}
	if !sameMap(a.Spec.Resources.Requests, defaultResources.Requests) || !sameMap(a.Spec.Resources.Limits, defaultResources.Limits) {
		t.Errorf("a database of the default resources keeps its own copy")
	}
	if sameMap(b.Spec.Resources.Limits, defaultResources.Limits) || b.Spec.Resources.Limits.Memory().String() != "2Gi" {
		t.Errorf("a database of other resources has %v", b.Spec.Resources)
	}

	// Other kinds keep their labels and annotations (the children's
	// informers select by label); only managedFields go.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop-0", ManagedFields: managed,
		Labels: map[string]string{"team": "payments"}, Annotations: map[string]string{"a": "b"}}}
	got, _ = TrimForCache(pod)
	if m := got.(*corev1.Pod).ObjectMeta; m.ManagedFields != nil || m.Labels["team"] != "payments" || m.Annotations["a"] != "b" {
		t.Errorf("pod metadata %+v", m)
	}
}

func defaulted() *examplev1.MyDatabase {
	return &examplev1.MyDatabase{Spec: examplev1.MyDatabaseSpec{Resources: *examplev1.DefaultResources.DeepCopy()}}
}

// sameMap tells whether a and b are one map.
func sameMap(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// BenchmarkTrimForCache: what every MyDatabase entering the cache costs.
func BenchmarkTrimForCache(b *testing.B) {
	db := defaulted()
	db.Labels = map[string]string{"team": "payments", "tier": "gold"}
	db.Annotations = map[string]string{names.PausedAnnotation: "true", "note": "x"}
	b.ReportAllocs()
	for b.Loop() {
		obj := db.DeepCopy()
		if _, err := TrimForCache(obj); err != nil {
			b.Fatal(err)
		}
	}
}
