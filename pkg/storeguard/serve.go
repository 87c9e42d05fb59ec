package storeguard

import (
	"context"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/healthz"
)

// Gate is what serving needs of the guard.
type Gate interface {
	// Err is nil while the store may be served.
	Err() error
	// Confirm re-checks the store after a read that may show objects as
	// absent: the storage of every resource calls it
	// (pkg/storagewrap, given the gate in its Config).
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
