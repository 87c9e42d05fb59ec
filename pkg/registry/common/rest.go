package common

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// REST is the storage of a mydb resource (mydatabases, mydatabasebackups):
// the generic store, with its short names and categories, answering 400
// rather than 500 to a resourceVersion that is not a number (get, watch,
// update) and to a patch that cannot be applied (update). Every kind's
// storage is one, so they all answer clients' mistakes alike.
type REST struct {
	*genericregistry.Store
	shortNames []string
	categories []string
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// NewREST wraps a completed store; shortNames are what kubectl resolves
// (kubectl get mdb), categories the groups it lists the resource in
// (kubectl get all, kubectl get mydb).
func NewREST(store *genericregistry.Store, shortNames, categories []string) *REST {
	return &REST{Store: store, shortNames: shortNames, categories: categories}
}

// ShortNames returns the resource's short names.
func (r *REST) ShortNames() []string { return r.shortNames }

// Categories returns the categories the resource belongs to.
func (r *REST) Categories() []string { return r.categories }

// Get refuses a resourceVersion that is not a number.
func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	if options != nil {
		if err := CheckResourceVersion(options.ResourceVersion); err != nil {
			return nil, err
		}
	}
	return r.Store.Get(ctx, name, options)
}

// Watch refuses a resourceVersion that is not a number.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	if options != nil {
		if err := CheckResourceVersion(options.ResourceVersion); err != nil {
			return nil, err
		}
	}
	return r.Store.Watch(ctx, options)
}

// Update reports a request that cannot be applied, or that carries a
// resourceVersion that is not a number, as a bad request.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.Store.Update(ctx, name, ClientUpdate{UpdatedObjectInfo: objInfo}, createValidation, updateValidation, forceAllowCreate, options)
}
