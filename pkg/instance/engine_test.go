package instance

import (
	"slices"
	"testing"
)

// In a pod the engine listens on the pod's IP and its own loopback (where
// kubectl port-forward connects); where instances share a loopback, on
// their address only.
func TestListenAddresses(t *testing.T) {
	for _, tc := range []struct {
		cfg  EngineConfig
		want []string
	}{
		{EngineConfig{ListenHost: "10.210.0.7", ListenLoopback: true}, []string{"10.210.0.7", "127.0.0.1"}},
		{EngineConfig{ListenHost: "127.1.0.7"}, []string{"127.1.0.7"}},
		{EngineConfig{ListenHost: "127.0.0.1", ListenLoopback: true}, []string{"127.0.0.1"}},
	} {
		if got := tc.cfg.ListenAddresses(); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.cfg, got, tc.want)
		}
	}
}
