package apiserver

import (
	"fmt"
	"net/http"

	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
)

// AddAuthenticationReadyzCheck keeps a replica unready until it has loaded
// the CAs that delegated authentication verifies client certificates and
// the aggregator's front-proxy certificate with. k8s.io/apiserver loads them
// from kube-system/extension-apiserver-authentication asynchronously; until
// then every request would count as anonymous.
func AddAuthenticationReadyzCheck(c *server.Config) {
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
	c.AddReadyzChecks(healthz.NamedCheck("authentication-cas-loaded", func(*http.Request) error {
		for _, content := range pending {
			if len(content()) == 0 {
				return fmt.Errorf("the client CAs of delegated authentication have not loaded yet")
			}
		}
		return nil
	}))
}
