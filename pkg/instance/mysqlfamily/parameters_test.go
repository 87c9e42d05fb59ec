package mysqlfamily

import (
	"slices"
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// TestStartArgsRequireTLSOnlyWithCertificates: require_secure_transport
// goes on the command line when client TLS is required and the server has
// a certificate (else no client could connect), before the start
// parameters.
func TestStartArgsRequireTLSOnlyWithCertificates(t *testing.T) {
	withTLS := instance.DriverConfig{TLS: instance.EngineTLSIn("/run/mydb"), StartParameters: map[string]string{"max_connections": "500"}}
	if got := StartArgs(withTLS); slices.Contains(got, "--require-secure-transport=ON") {
		t.Errorf("without RequireClientTLS: %v", got)
	}
	withTLS.RequireClientTLS = true
	if got := StartArgs(withTLS); !slices.Equal(got, []string{"--require-secure-transport=ON", "--max_connections=500"}) {
		t.Errorf("with RequireClientTLS: %v", got)
	}
	noTLS := instance.DriverConfig{RequireClientTLS: true}
	if got := StartArgs(noTLS); len(got) != 0 {
		t.Errorf("without certificates: %v", got)
	}
}
