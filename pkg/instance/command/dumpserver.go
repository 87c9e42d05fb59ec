package command

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// dumpServerOptions are the flags of the dump-server subcommand.
type dumpServerOptions struct {
	Dir        string
	SecretsDir string
	Address    string
	ReadOnly   bool
	// Name and IP are the pod's, which the server's certificate names.
	Name string
	IP   string
}

// newDumpServer is the subcommand the short-lived pod of a volume backup
// runs: it serves the one dump of the claim mounted at --dir until the
// controller deletes the pod.
func newDumpServer(ctx context.Context) *cobra.Command {
	o := &dumpServerOptions{}
	cmd := &cobra.Command{
		Use:   "dump-server",
		Short: "Serve the dump of one backup's claim to the instance that writes or restores it",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if o.Dir == "" || o.SecretsDir == "" || o.Name == "" {
				return errors.New("--dir, --secrets-dir and --name are required")
			}
			return runDumpServer(ctx, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Dir, "dir", "", "the claim's mount point, where the dump is kept")
	fs.StringVar(&o.SecretsDir, "secrets-dir", "", "the database's mounted instance Secret: its CA and issuer (ca.crt, issuer.crt, issuer.key), with which the server and the instances authenticate each other")
	fs.StringVar(&o.Name, "name", os.Getenv("POD_NAME"), "the pod's name, which the server's certificate carries ($POD_NAME)")
	fs.StringVar(&o.IP, "ip", os.Getenv("POD_IP"), "the pod's IP, which the server's certificate carries ($POD_IP)")
	fs.StringVar(&o.Address, "address", fmt.Sprintf(":%d", api.Port), "address to serve on")
	fs.BoolVar(&o.ReadOnly, "read-only", false, "refuse writes: the claim is mounted read-only for a restore")
	return cmd
}

func runDumpServer(ctx context.Context, o *dumpServerOptions) error {
	if fi, err := os.Stat(o.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--dir %s: not a directory (%v)", o.Dir, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	secrets := instance.Secrets{Dir: o.SecretsDir}
	identity, err := instance.NewIdentity(secrets, instance.InstanceLeaf(o.Name, "", "", o.IP), nil, log)
	if err != nil {
		return fmt.Errorf("the dump server's certificate: %w", err)
	}
	go identity.Run(ctx)
	srv := &instance.DumpServer{Dir: o.Dir, ReadOnly: o.ReadOnly, Identity: identity}
	ln, err := net.Listen("tcp", o.Address)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, TLSConfig: identity.ServerConfig()}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(shutdown)
	}()
	log.Info("serving the dump", "dir", o.Dir, "address", ln.Addr().String(), "readOnly", o.ReadOnly)
	if err := hs.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
