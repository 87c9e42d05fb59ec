package storagewrap

import (
	"context"
	"testing"

	"github.com/mydb-dev/mydb/pkg/storeguard/storeguardtest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"
)

// emptyStorage answers every get NotFound and every list empty, like a
// wiped etcd.
type emptyStorage struct{ storage.Interface }

func (emptyStorage) Get(_ context.Context, key string, _ storage.GetOptions, _ runtime.Object) error {
	return storage.NewKeyNotFoundError(key, 0)
}
func (emptyStorage) GetList(context.Context, string, storage.ListOptions, runtime.Object) error {
	return nil
}

func TestGuardedStorageConfirmsReadsThatShowAbsence(t *testing.T) {
	ctx := context.Background()
	gate := &storeguardtest.Gate{}
	s := guardedStorage{Interface: emptyStorage{}, gate: gate}
	if err := s.Get(ctx, "/mydatabases/a/x", storage.GetOptions{}, nil); !storage.IsNotFound(err) {
		t.Fatalf("a confirmed NotFound must stay NotFound: %v", err)
	}
	if err := s.GetList(ctx, "/mydatabases/a", storage.ListOptions{}, nil); err != nil {
		t.Fatalf("a confirmed list: %v", err)
	}
	if gate.Confirms != 2 {
		t.Fatalf("%d confirmations, want one per read", gate.Confirms)
	}
	gate.Refusal = apierrors.NewServiceUnavailable("mydb's storage holds no store identity")
	if err := s.Get(ctx, "/mydatabases/a/x", storage.GetOptions{}, nil); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("a NotFound the store cannot confirm must be a 503: %v", err)
	}
	if err := s.GetList(ctx, "/mydatabases/a", storage.ListOptions{}, nil); !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("a list the store cannot confirm must be a 503: %v", err)
	}
}
