package mysql

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// initialize creates a fresh data directory at dir (which must not exist)
// with root reachable over the socket without a password.
func (e *Engine) initialize(ctx context.Context, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := e.tools.Run(ctx, InitializeArgs(dir)...); err != nil {
		return fmt.Errorf("mysqld --initialize-insecure: %w", err)
	}
	return nil
}

// Bootstrap implements instance.Engine: --initialize-insecure into a
// scratch directory, root turned to auth_socket for the manager's OS user,
// the application and replication users, a new system identifier and the
// completion marker, then a rename into place.
func (e *Engine) Bootstrap(ctx context.Context) error {
	if e.osUser == "" {
		return errors.New("the manager's OS user is unknown")
	}
	return e.BootstrapWith(ctx, func(ctx context.Context, tmp string, users []string) error {
		if err := e.initialize(ctx, tmp); err != nil {
			return err
		}
		stmts := append(AdminUserStatements(e.osUser), users...)
		return e.tools.Serve(ctx, tempArgs(e.cfg, tmp), mysqlfamily.Statements("bootstrap users", stmts...))
	})
}

// Clone implements instance.Engine. CLONE needs a running recipient: a
// temporary server on a throwaway data directory clones the primary into
// the scratch directory <data>.clone (DATA DIRECTORY, so no self-restart
// is involved and the old data stays until the copy is complete), which
// then gets the primary's system identifier and the completion marker and
// is renamed into place. The clone carries the donor's users (root by
// auth_socket, the application, replicator) and its gtid_executed, from
// which the replica auto-positions; auto.cnf is not cloned, so the replica
// makes its own server_uuid.
func (e *Engine) Clone(ctx context.Context, t instance.Topology) error {
	pw, err := e.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	// CLONE copies InnoDB's data, not the manager's files beside it: the
	// primary's manager says which data set it serves.
	id, err := instance.PrimarySystemID(ctx, &http.Client{Timeout: 10 * time.Second}, t)
	if err != nil {
		return err
	}
	seed, tmp := e.DataDir+".seed", e.DataDir+".clone"
	defer os.RemoveAll(seed)
	if err := e.initialize(ctx, seed); err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	donor := mysqlfamily.Source{Host: t.PrimaryHost, Port: t.PrimaryPort, User: api.ReplicationUser, Password: pw}
	what := fmt.Sprintf("clone from %s:%d", t.PrimaryHost, t.PrimaryPort)
	if err := e.tools.Serve(ctx, tempArgs(e.cfg, seed), mysqlfamily.Statements(what, CloneStatements(donor, tmp)...)); err != nil {
		return err
	}
	return e.Complete(tmp, id, nil)
}
