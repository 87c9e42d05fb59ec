package storeguard

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/apiserver/pkg/storage"
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

// Guarded wraps a resource's storage so that reads which may show objects
// as absent (a NotFound get, a list, a new watch) are confirmed against the
// store's marker before they are answered: the store may have been swapped
// since the last periodic check. Use it with storagewrap.WrapStorage.
func Guarded(gate Gate) func(storage.Interface) storage.Interface {
	return func(s storage.Interface) storage.Interface { return guardedStorage{Interface: s, gate: gate} }
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
