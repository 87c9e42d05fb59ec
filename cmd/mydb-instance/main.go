// Command mydb-instance is the instance manager every database pod runs as
// its main process (see pkg/instance).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mydb-dev/mydb/pkg/instance/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := command.New(ctx).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "mydb-instance:", err)
		stop()
		os.Exit(1)
	}
}
