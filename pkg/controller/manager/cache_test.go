package manager

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	corev1 "k8s.io/api/core/v1"
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

	// Other kinds keep their labels and annotations (the children's
	// informers select by label); only managedFields go.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop-0", ManagedFields: managed,
		Labels: map[string]string{"team": "payments"}, Annotations: map[string]string{"a": "b"}}}
	got, _ = TrimForCache(pod)
	if m := got.(*corev1.Pod).ObjectMeta; m.ManagedFields != nil || m.Labels["team"] != "payments" || m.Annotations["a"] != "b" {
		t.Errorf("pod metadata %+v", m)
	}
}
