package storagewrap

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
)

func TestAnUnavailableEtcdAnswersServerTimeout(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name        string
		ctx         context.Context
		err         error
		unreachable bool
	}{
		{"request timed out inside etcd", context.Background(), rpctypes.ErrTimeout, true},
		{"leader changed", context.Background(), fmt.Errorf("txn: %w", rpctypes.ErrLeaderChanged), true},
		{"no leader", context.Background(), rpctypes.ErrNoLeader, true},
		{"member gone mid-request", context.Background(), status.Error(codes.Unavailable, "error reading from server: EOF"), true},
		{"etcd's deadline", context.Background(), status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"the client's cancellation", cancelled, context.Canceled, false},
		{"not found", context.Background(), storage.NewKeyNotFoundError("/k", 0), false},
		{"conflict", context.Background(), storage.NewResourceVersionConflictsError("/k", 0), false},
		{"too large", context.Background(), rpctypes.ErrRequestTooLarge, false},
		{"anything else", context.Background(), errors.New("boom"), false},
	} {
		got := asUnreachable(c.ctx, "/k", c.err)
		if storage.IsUnreachable(got) != c.unreachable {
			t.Errorf("%s: %v -> %v, want unreachable=%v", c.name, c.err, got, c.unreachable)
		}
		if !c.unreachable && got != c.err {
			t.Errorf("%s: the error changed to %v", c.name, got)
		}
		if c.unreachable {
			// What the generic registry then answers: 504 with Retry-After.
			answer := storeerr.InterpretCreateError(got, schema.GroupResource{Group: "example.com", Resource: "mydatabases"}, "x")
			if !apierrors.IsServerTimeout(answer) {
				t.Errorf("%s: answered %v, want a server timeout", c.name, answer)
			}
			if s, ok := apierrors.SuggestsClientDelay(answer); !ok || s <= 0 {
				t.Errorf("%s: no Retry-After in %v", c.name, answer)
			}
		}
	}
}
