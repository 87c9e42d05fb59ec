package storagewrap

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// wrapStorage returns getter's options with every resource's storage
// (the watch cache over etcd) passed through wrap. It relies on the
// generic registry building a resource's storage with the options'
// Decorator (k8s.io/apiserver/pkg/registry/generic/registry/store.go
// Store.CompleteWithOptions). A wrapper embeds storage.Interface
// (k8s.io/apiserver/pkg/storage/interfaces.go): a method upstream adds to
// it passes by the wrapper unwrapped.
func wrapStorage(getter generic.RESTOptionsGetter, wrap func(storage.Interface) storage.Interface) generic.RESTOptionsGetter {
	return wrappedStorage{RESTOptionsGetter: getter, wrap: wrap}
}

type wrappedStorage struct {
	generic.RESTOptionsGetter
	wrap func(storage.Interface) storage.Interface
}

func (g wrappedStorage) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	decorate := opts.Decorator
	opts.Decorator = func(config *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, triggers storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(config, resourcePrefix, keyFunc, newFunc, newListFunc, getAttrs, triggers, indexers)
		if err != nil {
			return s, destroy, err
		}
		return g.wrap(s), destroy, nil
	}
	return opts, nil
}
