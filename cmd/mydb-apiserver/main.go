// Command mydb-apiserver serves the example.com API group (MyDatabase) to a
// Kubernetes cluster through its aggregation layer.
package main

import (
	"os"

	"github.com/mydb-dev/mydb/pkg/cmd/server"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	cmd := server.NewCommand(ctx, server.NewOptions(os.Stdout, os.Stderr))
	os.Exit(cli.Run(cmd))
}
