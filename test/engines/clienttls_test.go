//go:build engines

package engines

import (
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// TestClientTLSRequired: instances started with --require-client-tls (what
// spec.tls.clientTLS: Required sets) refuse the application user over the
// network without TLS and serve it over TLS with the instance's
// certificate, verified against the database's CA; the managers, on the
// socket, run as before: the primary is ready, and a replica clones and
// streams from it (over TLS, as always).
func TestClientTLSRequired(t *testing.T) {
	t.Parallel()
	for i, c := range []struct {
		spec    engineSpec
		refusal string
	}{
		{postgresSpec(), "no encryption"},
		// MariaDB answers an insecure connection as it does a wrong
		// password; the same password over TLS is let in (below).
		{mariadbSpec(), "Access denied"},
		{mysqlSpec(), "insecure transport"},
	} {
		t.Run(c.spec.name, func(t *testing.T) {
			t.Parallel()
			cl := newClusterIn(t, c.spec, "client-tls-"+c.spec.name, "127.0."+[]string{"89", "90", "91"}[i]+".", 2)
			p, r := cl.nodes[0], cl.nodes[1]
			for _, n := range cl.nodes {
				n.extraArgs = []string{"--require-client-tls"}
			}
			p.start()
			cl.setPrimary(p)
			p.waitReady(time.Minute, api.RolePrimary)
			r.start()
			r.waitReady(2*time.Minute, api.RoleReplica)

			for _, n := range cl.nodes {
				err := n.app().Ping()
				if err == nil || !strings.Contains(err.Error(), c.refusal) {
					t.Errorf("%s: the application user without TLS: %v, want a refusal saying %q", n.name, err, c.refusal)
				} else {
					t.Logf("%s without TLS: %v", n.name, err)
				}
				if _, err := servedCertificate(cl, n); err != nil {
					t.Errorf("%s: the application user over TLS: %v", n.name, err)
				}
			}
		})
	}
}
