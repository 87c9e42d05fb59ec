package apiserver

import (
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// caContent stands for the request-header CA loaded from
// extension-apiserver-authentication: empty until load is called.
type caContent struct {
	loaded atomic.Bool
	reads  atomic.Int64
}

func (c *caContent) Name() string { return "request-header" }
func (c *caContent) CurrentCABundleContent() []byte {
	c.reads.Add(1)
	if c.loaded.Load() {
		return []byte("-----BEGIN CERTIFICATE-----")
	}
	return nil
}
func (c *caContent) VerifyOptions() (x509.VerifyOptions, bool) {
	return x509.VerifyOptions{}, c.loaded.Load()
}
func (c *caContent) AddListener(dynamiccertificates.Listener) {}

func TestRequestsWaitForTheAuthenticationCAs(t *testing.T) {
	ca := &caContent{}
	c := server.NewConfig(Codecs)
	c.Authentication.RequestHeaderConfig = &authenticatorfactory.RequestHeaderConfig{CAContentProvider: ca}
	c.BuildHandlerChainFunc = func(h http.Handler, _ *server.Config) http.Handler { return h }
	WaitForAuthentication(c)
	chain := c.BuildHandlerChainFunc(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}), c)
	serve := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		chain.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}

	for _, path := range []string{"/apis/example.com/v1/namespaces/a/mydatabases", "/apis", "/version", "/readyzz"} {
		rec := serve(path)
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "not loaded yet") {
			t.Errorf("%s before the CAs loaded: %d %q (Retry-After %q), want 503 with Retry-After and the reason", path, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
		}
	}
	for _, path := range []string{"/readyz", "/readyz/authentication-cas-loaded", "/livez", "/healthz/ping"} {
		if rec := serve(path); rec.Code != http.StatusOK {
			t.Errorf("%s before the CAs loaded: %d, want it passed on", path, rec.Code)
		}
	}
	var check error
	for _, h := range c.ReadyzChecks {
		if h.Name() == "authentication-cas-loaded" {
			check = h.Check(nil)
		}
	}
	if check == nil {
		t.Error("the readyz check authentication-cas-loaded passes (or is missing) before the CAs loaded")
	}

	ca.loaded.Store(true)
	if rec := serve("/apis/example.com/v1/namespaces/a/mydatabases"); rec.Code != http.StatusOK {
		t.Errorf("a request once the CAs loaded: %d, want it passed on", rec.Code)
	}
	// Loaded once is loaded for good: no request reads the bundles again
	// (each read copies them).
	reads := ca.reads.Load()
	for range 10 {
		serve("/apis")
	}
	if n := ca.reads.Load() - reads; n != 0 {
		t.Errorf("10 requests after the CAs loaded read them %d times, want 0", n)
	}
}
