package storagewrap

import (
	"context"

	"github.com/mydb-dev/mydb/pkg/storeguard"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/storage"
)

// guarded wraps a resource's storage so that reads which may show objects
// as absent (a NotFound get, a list, a new watch) are confirmed against the
// store's marker before they are answered: the store may have been swapped
// since the guard's last periodic check (pkg/storeguard). It relies on the
// generic registry's gets, lists and watches reaching the storage as Get,
// GetList and Watch (k8s.io/apiserver/pkg/registry/generic/registry/store.go),
// and on a missing object being a Get's storage NotFound
// (k8s.io/apiserver/pkg/storage/interfaces.go, errors.go).
func guarded(gate storeguard.Gate) func(storage.Interface) storage.Interface {
	return func(s storage.Interface) storage.Interface { return guardedStorage{Interface: s, gate: gate} }
}

// guardedStorage confirms the store after reads that can show absence.
type guardedStorage struct {
	storage.Interface
	gate storeguard.Gate
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
