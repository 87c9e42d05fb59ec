package storeguard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/storeguard/storeguardtest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

func TestWithGuardRefusesResourceRequestsButNotDiscovery(t *testing.T) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme)
	gate := &storeguardtest.Gate{Refusal: unavailable("mydb's storage holds no store identity")}
	served := 0
	handler := WithGuard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }), gate, "example.com", codecs)
	resolver := &genericrequest.RequestInfoFactory{APIPrefixes: sets.NewString("apis", "api"), GrouplessAPIPrefixes: sets.NewString("api")}

	do := func(path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		info, err := resolver.NewRequestInfo(req)
		if err != nil {
			t.Fatal(err)
		}
		req = req.WithContext(genericrequest.WithRequestInfo(req.Context(), info))
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec
	}
	for _, path := range []string{"/apis/example.com/v1/namespaces/a/mydatabases/x", "/apis/example.com/v1/mydatabases", "/apis/example.com/v1/namespaces/a/mydatabasebackups?watch=true"} {
		rec := do(path)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "holds no store identity") {
			t.Errorf("GET %s while refused: %d %s, want 503 with the reason", path, rec.Code, rec.Body)
		}
		if rec.Header().Get("Retry-After") != "" {
			t.Errorf("GET %s while refused: Retry-After makes clients retry in silence instead of showing the reason", path)
		}
	}
	if served != 0 {
		t.Fatalf("%d refused requests reached the API", served)
	}
	for _, path := range []string{"/apis/example.com/v1", "/apis", "/api/v1/namespaces/a/pods"} {
		if rec := do(path); rec.Code != http.StatusOK {
			t.Errorf("GET %s while refused: %d, want it served (discovery, other groups)", path, rec.Code)
		}
	}
	gate.Refusal = nil
	if rec := do("/apis/example.com/v1/mydatabases"); rec.Code != http.StatusOK {
		t.Errorf("a verified store must be served: %d", rec.Code)
	}
}
