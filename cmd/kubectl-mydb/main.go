// Command kubectl-mydb is a kubectl plugin for mydb: kubectl mydb backup,
// backups, restore and status.
package main

import (
	"fmt"
	"os"

	"github.com/mydb-dev/mydb/pkg/cmd/plugin"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"
)

func main() {
	cmd := plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cli.RunNoErrOutput(cmd); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
