package mydatabase

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"
)

// The generic store answers 500 to some requests that are the client's
// fault: a resourceVersion that is not a number, or a patch that cannot be
// applied (a strategic merge directive it does not know, an applied field
// the schema lacks). These wrappers answer 400 instead, before anything is
// stored.

// Get refuses a resourceVersion that is not a number.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	if err := checkResourceVersion(options.ResourceVersion); err != nil {
		return nil, err
	}
	return r.Store.Get(ctx, name, options)
}

// Watch refuses a resourceVersion that is not a number.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	if options != nil {
		if err := checkResourceVersion(options.ResourceVersion); err != nil {
			return nil, err
		}
	}
	return r.Store.Watch(ctx, options)
}

// Update reports a request that cannot be applied as a bad request.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, clientUpdate{objInfo}, createValidation, updateValidation, forceAllowCreate, options)
}

// clientUpdate computes the updated object as the request says, and calls
// any failure to do so, or a resourceVersion that is not a number, a bad
// request: the old object comes from storage, so only the request can be wrong.
type clientUpdate struct {
	rest.UpdatedObjectInfo
}

func (u clientUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	obj, err := u.UpdatedObjectInfo.UpdatedObject(ctx, oldObj)
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(err.Error())
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if err := checkResourceVersion(accessor.GetResourceVersion()); err != nil {
		return nil, err
	}
	return obj, nil
}

func checkResourceVersion(rv string) error {
	if rv == "" {
		return nil
	}
	if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q must be a resourceVersion the server returned, a decimal number", rv))
	}
	return nil
}
