package storagewrap

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// unavailableStorage makes a request that etcd could not serve (a member
// lost with the request in flight, no leader, a request timed out inside
// etcd) answer 504 ServerTimeout with Retry-After, as the storage layer
// answers an unreachable store, instead of 500: the client may retry, and a
// write that timed out may still have been applied (a retried create then
// finds its object: 409).
//
// It relies on etcd3's store (k8s.io/apiserver/pkg/storage/etcd3/store.go)
// returning the etcd client's errors as they are and its own as
// *storage.StorageError, and on the registry answering
// storage.NewUnreachableError 504 with Retry-After
// (k8s.io/apiserver/pkg/storage/errors/storage.go). Only Create, Delete,
// GuaranteedUpdate, Get and GetList are wrapped; a watch is left as it is.
type unavailableStorage struct {
	storage.Interface
}

func (s unavailableStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return asUnreachable(ctx, key, s.Interface.Create(ctx, key, obj, out, ttl))
}

func (s unavailableStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	return asUnreachable(ctx, key, s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts))
}

func (s unavailableStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	return asUnreachable(ctx, key, s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject))
}

func (s unavailableStorage) Get(ctx context.Context, key string, opts storage.GetOptions, out runtime.Object) error {
	return asUnreachable(ctx, key, s.Interface.Get(ctx, key, opts, out))
}

func (s unavailableStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	return asUnreachable(ctx, key, s.Interface.GetList(ctx, key, opts, listObj))
}

// asUnreachable turns etcd's errors of an unavailable cluster into the
// storage layer's unreachable error; every other error is kept.
func asUnreachable(ctx context.Context, key string, err error) error {
	if err == nil || !etcdUnavailable(ctx, err) {
		return err
	}
	return storage.NewUnreachableError(key, 0)
}

func etcdUnavailable(ctx context.Context, err error) bool {
	var storageErr *storage.StorageError
	if errors.As(err, &storageErr) {
		return false
	}
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		return etcdErr.Code() == codes.Unavailable || etcdErr.Code() == codes.DeadlineExceeded
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The caller's own deadline or cancellation is not etcd's failure.
		return ctx.Err() == nil
	}
	if st, ok := status.FromError(err); ok {
		return st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded
	}
	return false
}
