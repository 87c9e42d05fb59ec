//go:build e2e

package e2e

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/mydb-dev/mydb/pkg/access"
)

// listenTunnels serves a local port, until the test ends, whose every
// connection is joined to a tunnel of its own from dial, as kubectl mydb
// connect does; opened, when set, sees each tunnel before it carries
// bytes. A tunnel that cannot be opened fails the test (not one cut short
// by a cancelled context) and closes its connection.
func listenTunnels(t *testing.T, dial func(context.Context) (*access.TunnelConn, error), opened func(*access.TunnelConn)) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); ln.Close() })
	go func() {
		for {
			local, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer local.Close()
				remote, err := dial(ctx)
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
						t.Errorf("tunnel: %v", err)
					}
					return
				}
				if opened != nil {
					opened(remote)
				}
				access.Join(remote, local, local)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
