package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// walCommand is the engine's archive_command or restore_command: this
// executable's wal-archive or wal-restore subcommand, shell-quoted.
func walCommand(self, sub, socket string, args ...string) string {
	return strings.Join(append([]string{shellQuote(self), sub, "--socket", shellQuote(socket)}, args...), " ")
}

// restoreCommand is the engine's restore_command: a segment the manager
// fetched ahead into spool (complete and checked: it renames each file in
// when it is) is moved into place by the shell, as cheap as a local copy,
// and a file the manager found the archive lacks (a marker beside where it
// would be) is "not archived" (exit 1) at once; anything else goes through
// the manager (fetch).
func restoreCommand(spool, fetch string) string {
	s := shellQuote(spool)
	return "mv -f " + s + "/%f %p 2>/dev/null || { test ! -e " + s + "/%f" + instance.WALAbsentSuffix + " && " + fetch + "; }"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// restoreFailed is wal-restore's exit status for a fetch that failed
// (not a file the archive lacks): above 125, which PostgreSQL takes for
// a broken command and stops recovery for, rather than ending recovery
// early at the file before (and promoting at the wrong point).
const restoreFailed = 126

// newWALCommand is wal-archive PATH NAME (the archive_command, run in the
// data directory) or wal-restore NAME PATH (the restore_command): the
// engine's hand-off of one file to the manager, which holds the archive's
// credentials.
func newWALCommand(ctx context.Context, restore bool) *cobra.Command {
	var socket string
	use, short := "wal-archive PATH NAME", "Hand a closed WAL file to the instance manager for the archive (the engine's archive_command)"
	if restore {
		use, short = "wal-restore NAME PATH", "Fetch a WAL file from the archive a restore replays, through the instance manager (the engine's restore_command)"
	}
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.ExactArgs(2), SilenceUsage: true, SilenceErrors: true,
		RunE: func(_ *cobra.Command, args []string) error {
			name, path := args[1], args[0]
			if restore {
				name, path = args[0], args[1]
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				return err
			}
			// A WAL file is 16 MiB: an upload or a download that takes
			// longer than this has a problem the engine's retry may not.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			err = instance.CallLocal(ctx, socket, restore, name, abs)
			switch {
			case err == nil:
				return nil
			case restore && errors.Is(err, os.ErrNotExist):
				// The usual end of a replay: not an error worth a line.
				os.Exit(1)
			case restore:
				fmt.Fprintf(os.Stderr, "mydb-instance wal-restore %s: %v\n", name, err)
				os.Exit(restoreFailed)
			}
			return fmt.Errorf("wal-archive %s: %w", name, err)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", "", "the instance manager's local socket")
	_ = cmd.MarkFlagRequired("socket")
	return cmd
}
