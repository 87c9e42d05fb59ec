package mariadb

import (
	"context"
	"fmt"
	"os/user"

	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Bootstrap implements instance.Driver: mariadb-install-db into a scratch
// directory (admin access for the manager's OS user by unix_socket only),
// the users, a new system identifier and the completion marker, then a
// rename into place.
func (d *Driver) Bootstrap(ctx context.Context) error {
	return d.BootstrapWith(ctx, func(ctx context.Context, tmp string, users []string) error {
		u, err := user.Current()
		if err != nil {
			return err
		}
		err = d.cfg.Tool(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+tmp,
			"--auth-root-authentication-method=socket", "--auth-root-socket-user="+u.Username,
			"--skip-test-db", "--skip-name-resolve").Run()
		if err != nil {
			return fmt.Errorf("mariadb-install-db: %w", err)
		}
		// A server without networking in the scratch directory creates the
		// application's database and user and the replication user.
		server := d.cfg.Tool(context.Background(), "mariadbd", append(d.serverArgs(tmp), "--skip-networking")...)
		return mysqlfamily.WithTempServer(ctx, server, d.openAdmin, mysqlfamily.Statements("bootstrap users", users...))
	})
}
