// Package integration runs mydb-apiserver in-process against a real etcd and
// checks its API over HTTP.
package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/mydb-dev/mydb/test/integration/framework"
)

var (
	etcd   *framework.Etcd
	server *framework.Server
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mydb-integration")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	etcd, err = framework.StartEtcd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer etcd.Stop()
	server, err = framework.StartServer(etcd.URL, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer server.Stop()
	return m.Run()
}
