package mysql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// initialize creates a fresh data directory at dir (which must not exist)
// with root reachable over the socket without a password.
func (d *Driver) initialize(ctx context.Context, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := d.tools.Run(ctx, InitializeArgs(dir)...); err != nil {
		return fmt.Errorf("mysqld --initialize-insecure: %w", err)
	}
	return nil
}

// Bootstrap implements instance.Driver: --initialize-insecure into a
// scratch directory, root turned to auth_socket for the manager's OS user,
// the application and replication users, a new system identifier and the
// completion marker, then a rename into place.
func (d *Driver) Bootstrap(ctx context.Context) error {
	if d.osUser == "" {
		return errors.New("the manager's OS user is unknown")
	}
	return d.BootstrapWith(ctx, func(ctx context.Context, tmp string, users []string) error {
		if err := d.initialize(ctx, tmp); err != nil {
			return err
		}
		stmts := append(AdminUserStatements(d.osUser), users...)
		return d.tools.Serve(ctx, tempArgs(d.cfg, tmp), mysqlfamily.Statements("bootstrap users", stmts...))
	})
}

// Clone implements instance.Driver. CLONE needs a running recipient: a
// temporary server on a throwaway data directory clones the primary into
// the scratch directory <data>.clone (DATA DIRECTORY, so no self-restart
// is involved and the old data stays until the copy is complete), which
// then gets the primary's system identifier and the completion marker and
// is renamed into place. The clone carries the donor's users (root by
// auth_socket, the application, replicator) and its gtid_executed, from
// which the replica auto-positions; auto.cnf is not cloned, so the replica
// makes its own server_uuid.
func (d *Driver) Clone(ctx context.Context, t instance.Topology) error {
	pw, err := d.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	// CLONE copies InnoDB's data, not the manager's files beside it: the
	// primary's manager says which data set it serves.
	id, err := instance.PrimarySystemID(ctx, &api.Client{Timeout: 10 * time.Second}, d.cfg.Identity.Credentials(), t)
	if err != nil {
		return err
	}
	seed, tmp := d.DataDir+".seed", d.DataDir+".clone"
	defer os.RemoveAll(seed)
	if err := d.initialize(ctx, seed); err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	donor := mysqlfamily.Source{Host: t.PrimaryHost, Port: t.ReplicationPort(), User: api.ReplicationUser, Password: pw, CAFile: d.CAFile()}
	what := fmt.Sprintf("clone from %s:%d", donor.Host, donor.Port)
	if err := d.tools.Serve(ctx, tempArgs(d.cfg, seed), mysqlfamily.Statements(what, CloneStatements(donor, tmp)...)); err != nil {
		return err
	}
	return d.Complete(tmp, id, nil)
}
