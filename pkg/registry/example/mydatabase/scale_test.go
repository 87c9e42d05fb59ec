package mydatabase

import (
	"context"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/scaled"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Admission of /scale sees Scales, and finds the whole databases in its
// context (quota needs the storage size and resources of the new replicas).
func TestScaleAdmissionFindsTheDatabases(t *testing.T) {
	old := myDatabase()
	db := myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 5 })
	called := false
	validate := toScaleUpdateValidation(func(ctx context.Context, obj, oldObj runtime.Object) error {
		called = true
		if s, ok := obj.(*autoscalingv1.Scale); !ok || s.Spec.Replicas != 5 {
			t.Errorf("admission saw %#v, want a Scale of 5", obj)
		}
		got, ok := scaled.From(ctx)
		if !ok || got.New != db || got.Old != old {
			t.Errorf("scaled.From = %+v, %v; want the new and old databases", got, ok)
		}
		return nil
	})
	if err := validate(context.Background(), db, old); err != nil || !called {
		t.Fatalf("validate: %v, called %v", err, called)
	}
}
