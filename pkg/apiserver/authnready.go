package apiserver

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
)

// WaitForAuthentication keeps a replica from serving until it has loaded
// the CAs that delegated authentication verifies client certificates and
// the aggregator's front-proxy certificate with. k8s.io/apiserver loads them
// from kube-system/extension-apiserver-authentication asynchronously; until
// then every request would count as anonymous and be refused 403. So the
// replica is unready (/readyz check authentication-cas-loaded), and a
// request that reaches it anyway (the Service has not seen it unready yet;
// local-up's ExternalName Service has no readiness at all) is answered 503
// with Retry-After, which clients retry, instead of a 403 they would not.
// The health endpoints answer throughout.
func WaitForAuthentication(c *server.Config) {
	var pending []func() []byte
	if c.SecureServing != nil && c.SecureServing.ClientCA != nil {
		pending = append(pending, c.SecureServing.ClientCA.CurrentCABundleContent)
	}
	if rh := c.Authentication.RequestHeaderConfig; rh != nil && rh.CAContentProvider != nil {
		pending = append(pending, rh.CAContentProvider.CurrentCABundleContent)
	}
	if len(pending) == 0 {
		return
	}
	// Once loaded, the CAs stay loaded (a failed reload keeps the last
	// good bundle): the check costs an atomic load per request from then
	// on, not a copy of every bundle.
	var done atomic.Bool
	loaded := func() error {
		if done.Load() {
			return nil
		}
		for _, content := range pending {
			if len(content()) == 0 {
				return fmt.Errorf("the client CAs of delegated authentication have not loaded yet")
			}
		}
		done.Store(true)
		return nil
	}
	c.AddReadyzChecks(healthz.NamedCheck("authentication-cas-loaded", func(*http.Request) error { return loaded() }))
	build := c.BuildHandlerChainFunc
	c.BuildHandlerChainFunc = func(handler http.Handler, c *server.Config) http.Handler {
		return withAuthenticationLoaded(build(handler, c), loaded)
	}
}

// withAuthenticationLoaded answers 503 to all but the health endpoints
// while loaded fails. It wraps the whole chain: inside it, authentication
// would already have made the request anonymous.
func withAuthenticationLoaded(handler http.Handler, loaded func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if isHealthPath(req.URL.Path) {
			handler.ServeHTTP(w, req)
			return
		}
		if err := loaded(); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "mydb-apiserver is starting: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		handler.ServeHTTP(w, req)
	})
}

func isHealthPath(path string) bool {
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
