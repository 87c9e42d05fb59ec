package mydatabase

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// FieldManager is the controller's name in its children's managedFields.
const FieldManager = "mydb-controller"

// childClient is what apply needs of a typed client of one kind.
type childClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// child is an object mydb makes: a typed pointer such as *corev1.Service.
type child interface {
	comparable
	metav1.Object
	runtime.Object
}

// apply is the one way the controller writes a child of db. desired carries
// every field mydb sets (and its TypeMeta); cached is what the informer holds
// under its name, cacheErr the lister's error. When every field of desired
// already has its value, apply writes nothing; otherwise it applies desired
// with server-side apply, which creates the child or changes only the fields
// mydb owns, leaving what the cluster or others set. A child of that name
// that db does not control is reported and left alone (apply returns the
// zero T). It returns the child as it now is.
func apply[T child](ctx context.Context, c *Controller, db *examplev1.MyDatabase, desired, cached T, cacheErr error,
	client childClient[T], f *findings) (T, error) {
	var none T
	kind := desired.GetObjectKind().GroupVersionKind().Kind
	existing := cached
	switch {
	case apierrors.IsNotFound(cacheErr):
		// The caches hold only children labelled as mydb's: a foreign object
		// of this name is invisible to them, and applying would adopt it.
		live, err := client.Get(ctx, desired.GetName(), metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return none, err
		}
		if err == nil {
			existing = live
		}
	case cacheErr != nil:
		return none, cacheErr
	}
	if existing != none {
		if !c.owned(db, existing, kind, f) {
			return none, nil
		}
		same, err := converged(desired, existing)
		if err != nil || same {
			return existing, err
		}
	}
	body, err := applyBody(desired)
	if err != nil {
		return none, err
	}
	result, err := client.Patch(ctx, desired.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: ptr.To(true)})
	if err != nil {
		return none, err
	}
	if existing == none {
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCreated, "Created %s %q", kind, desired.GetName())
	} else {
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonUpdated, "Updated %s %q", kind, desired.GetName())
	}
	return result, nil
}

// fields returns obj's fields as JSON values, without its status: mydb
// never applies status, and the fields of an empty status are not unset.
func fields(obj runtime.Object) (map[string]interface{}, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	return u, nil
}

// applyBody is desired as a server-side apply request.
func applyBody(desired runtime.Object) ([]byte, error) {
	u, err := fields(desired)
	if err != nil {
		return nil, err
	}
	return json.Marshal(u)
}

// converged tells whether existing already has every field desired sets,
// with desired's value. Fields set only in existing (defaults, allocations,
// others' fields) are not differences; a list must have desired's length.
func converged(desired, existing runtime.Object) (bool, error) {
	want, err := fields(desired)
	if err != nil {
		return false, fmt.Errorf("reading the desired %T: %w", desired, err)
	}
	// The cache's objects carry no TypeMeta.
	delete(want, "apiVersion")
	delete(want, "kind")
	have, err := fields(existing)
	if err != nil {
		return false, fmt.Errorf("reading the existing %T: %w", existing, err)
	}
	return subset(want, have), nil
}

func subset(want, have interface{}) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]interface{}:
		h, ok := have.(map[string]interface{})
		if !ok {
			return false
		}
		for k, wv := range w {
			if !subset(wv, h[k]) {
				return false
			}
		}
		return true
	case []interface{}:
		h, ok := have.([]interface{})
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, have)
	}
}
