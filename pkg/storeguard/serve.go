package storeguard

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// Gate is what serving needs of the guard.
type Gate interface {
	// Err is nil while the store may be served.
	Err() error
	// Confirm re-checks the store after a read that may show objects as
	// absent.
	Confirm(ctx context.Context) error
}

// WithGuard answers every resource request of group with the gate's error
// (503 and the reason) while the store may not be served. Discovery keeps
// answering, so the aggregator keeps the APIService and the garbage
// collector its view of the group: it then sees errors for every owner it
// looks up, and deletes nothing.
func WithGuard(handler http.Handler, gate Gate, group string, codecs runtime.NegotiatedSerializer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := genericrequest.RequestInfoFrom(req.Context())
		if ok && info.IsResourceRequest && info.APIGroup == group {
			// No Retry-After: client-go would retry in silence, and the
			// reason would never reach a user.
			if err := gate.Err(); err != nil {
				responsewriters.ErrorNegotiated(err, codecs, schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}, w, req)
				return
			}
		}
		handler.ServeHTTP(w, req)
	})
}

// ReadyzCheck fails, with the reason, while the store may not be served.
func ReadyzCheck(gate Gate) healthz.HealthChecker {
	return healthz.NamedCheck("mydb-store-guard", func(*http.Request) error { return gate.Err() })
}

// RESTOptionsGetter wraps every resource's storage so that reads which
// may show objects as absent (a NotFound get, a list, a new watch) are
// confirmed against the store's marker before they are answered: the
// store may have been swapped since the last periodic check.
type RESTOptionsGetter struct {
	generic.RESTOptionsGetter
	Gate Gate
}

// GetRESTOptions returns the wrapped getter's options with a guarded
// storage decorator.
func (g RESTOptionsGetter) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
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
		return guardedStorage{Interface: s, gate: g.Gate}, destroy, nil
	}
	return opts, nil
}

// guardedStorage confirms the store after reads that can show absence.
type guardedStorage struct {
	storage.Interface
	gate Gate
}

func (s guardedStorage) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	err := s.Interface.Get(ctx, key, opts, out)
	if storage.IsNotFound(err) {
		if confirmErr := s.gate.Confirm(ctx); confirmErr != nil {
			return confirmErr
		}
	}
	return err
}

func (s guardedStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, out runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, out); err != nil {
		return err
	}
	return s.gate.Confirm(ctx)
}

func (s guardedStorage) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return w, err
	}
	if err := s.gate.Confirm(ctx); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}
