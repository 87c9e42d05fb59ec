// Package common holds the REST storage pieces every mydb resource shares:
// the /status subresource, table printing, and answering clients' mistakes
// with 400 rather than the 500 the generic store gives some of them.
package common

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// StatusREST is the storage of a /status subresource: a copy of the main
// store whose update strategy writes only status.
type StatusREST struct {
	Store *genericregistry.Store
}

var (
	_ rest.Patcher             = &StatusREST{}
	_ rest.ResetFieldsStrategy = &StatusREST{}
)

// New returns an empty object of the resource.
func (r *StatusREST) New() runtime.Object { return r.Store.New() }

// Destroy does nothing: the store is shared with the main resource, which destroys it.
func (r *StatusREST) Destroy() {}

// Get returns the object; like REST.Get it refuses a resourceVersion that
// is not a number.
func (r *StatusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	if options != nil {
		if err := CheckResourceVersion(options.ResourceVersion); err != nil {
			return nil, err
		}
	}
	return r.Store.Get(ctx, name, options)
}

// Update writes the object's status, leaving the rest as stored.
func (r *StatusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Subresources never create: the object must exist.
	return r.Store.Update(ctx, name, ClientUpdate{UpdatedObjectInfo: objInfo}, createValidation, updateValidation, false, options)
}

// GetResetFields returns the fields /status may not write.
func (r *StatusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.Store.GetResetFields()
}

// ConvertToTable prints the object like the main resource does.
func (r *StatusREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.Store.ConvertToTable(ctx, object, tableOptions)
}
