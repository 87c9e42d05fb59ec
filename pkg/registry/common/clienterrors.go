package common

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// The generic store answers 500 to some requests that are the client's
// fault: a resourceVersion that is not a number, or a patch that cannot be
// applied (a strategic merge directive it does not know, an applied field
// the schema lacks). ClientUpdate and CheckResourceVersion answer 400
// instead, before anything is stored; REST, StatusREST and mydatabases'
// ScaleREST use them, so every resource and subresource answers alike.

// ClientUpdate computes the updated object as the request says, and calls
// any failure to do so, or a resourceVersion that is not a number, a bad
// request: the old object comes from storage, so only the request can be wrong.
type ClientUpdate struct {
	rest.UpdatedObjectInfo
}

func (u ClientUpdate) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
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
	if err := CheckResourceVersion(accessor.GetResourceVersion()); err != nil {
		return nil, err
	}
	return obj, nil
}

// CheckResourceVersion refuses a resourceVersion that is not a number.
func CheckResourceVersion(rv string) error {
	if rv == "" {
		return nil
	}
	if _, err := strconv.ParseUint(rv, 10, 64); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("resourceVersion %q must be a resourceVersion the server returned, a decimal number", rv))
	}
	return nil
}
