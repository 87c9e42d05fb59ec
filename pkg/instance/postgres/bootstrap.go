package postgres

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Bootstrap implements instance.Driver: initdb into a scratch directory,
// mydb's configuration and users, then the completion marker and a rename,
// so PGDATA only ever holds a complete data set.
func (d *Driver) Bootstrap(ctx context.Context) error {
	if has, err := d.HasData(); err != nil || has {
		return err
	}
	app, err := d.appUser()
	if err != nil {
		return err
	}
	tmp := d.DataDir() + ".bootstrap"
	// Whatever an interrupted bootstrap left is discarded.
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	// initdb reads the superuser's password from the Secret's file, so it
	// never appears on a command line.
	err = d.cfg.Tool(ctx, "initdb", "-D", tmp, "--username="+superuser,
		"--pwfile="+filepath.Join(d.cfg.Secrets.Dir, instance.SecretSuperuserPassword),
		"--auth-local=peer", "--auth-host=scram-sha-256",
		"--encoding=UTF8", "--locale=C.UTF-8", "--data-checksums").Run()
	if err != nil {
		return fmt.Errorf("initdb: %w", err)
	}
	if err := writeConfig(tmp, d.cfg.TLSEnabled()); err != nil {
		return err
	}
	if err := d.createUsers(ctx, tmp, app); err != nil {
		return err
	}
	return d.commitDataDir(tmp)
}

// appCredentials are the application's user and database.
type appCredentials struct{ user, password, database string }

func (d *Driver) appUser() (appCredentials, error) {
	var a appCredentials
	var err error
	if a.user, err = d.cfg.Secrets.Get(instance.SecretUsername); err != nil {
		return a, err
	}
	if a.password, err = d.cfg.Secrets.Get(instance.SecretPassword); err != nil {
		return a, err
	}
	if a.database, err = d.cfg.Secrets.Get(instance.SecretDatabase); err != nil {
		return a, err
	}
	if a.user == superuser || a.user == api.ReplicationUser {
		return a, fmt.Errorf("the application user may not be %q", a.user)
	}
	return a, nil
}

// writeConfig writes the authentication rules and the settings every
// instance of the database shares (clones copy them).
func writeConfig(dataDir string, tls bool) error {
	// Each start writes the rules again with the instance's own setting
	// of client TLS (Driver.Command).
	if err := writeAuthConfig(dataDir, tls, false); err != nil {
		return err
	}
	conf := `
# Written by mydb-instance: settings every instance of this database shares.
# Per-instance settings (addresses, ports, sockets, name) are on the
# command line.
password_encryption = 'scram-sha-256'
wal_level = replica
wal_log_hints = on
hot_standby = on
hot_standby_feedback = on
max_wal_senders = 10
max_replication_slots = 10
wal_keep_size = '128MB'
# A standby retries a lost primary every second, not every five: after a
# primary restart replicas stream (and are ready) again sooner.
wal_retrieve_retry_interval = '1s'
# A slot of a replica that is gone may not fill the volume.
max_slot_wal_keep_size = '4GB'
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
`
	f, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeAuthConfig writes pg_hba.conf and pg_ident.conf. Only the manager's
// OS user is the superuser, on the socket: the superuser may not log in
// over the network at all, password or not (whoever holds its password
// would get COPY ... TO PROGRAM, a shell in the pod). Everything else,
// local or over the network, authenticates with a SCRAM password, and the
// replication user can do nothing but replicate, and with tls only over
// TLS, so its password never crosses the network in the clear; with
// requireClientTLS every client over the network must use TLS too (the
// socket stays). The manager writes it before every start, so data
// directories made before a change get it.
func writeAuthConfig(dataDir string, tls, requireClientTLS bool) error {
	u, err := user.Current()
	if err != nil {
		return err
	}
	hba := `# Written by mydb-instance.
# TYPE  DATABASE     USER          ADDRESS  METHOD
local   all          postgres               peer map=manager
local   replication  postgres               peer map=manager
local   all          all                    scram-sha-256
%s replication  replicator    all      scram-sha-256
host    all          replicator    all      reject
host    all          postgres      all      reject
%s all          all           all      scram-sha-256
`
	replication, clients := "host   ", "host   "
	if tls {
		replication = "hostssl"
		if requireClientTLS {
			clients = "hostssl"
		}
	}
	hba = fmt.Sprintf(hba, replication, clients)
	ident := fmt.Sprintf("# Written by mydb-instance.\nmanager  %s  postgres\n", u.Username)
	if err := os.WriteFile(filepath.Join(dataDir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dataDir, "pg_ident.conf"), []byte(ident), 0o600)
}

// createUsers runs a server on the socket only (no network) in dataDir and
// creates the application and replication users and the database.
func (d *Driver) createUsers(ctx context.Context, dataDir string, app appCredentials) error {
	replPassword, err := d.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	appVerifier, err := scramVerifier(app.password)
	if err != nil {
		return err
	}
	replVerifier, err := scramVerifier(replPassword)
	if err != nil {
		return err
	}
	cmd := d.cfg.Tool(context.Background(), "postgres", d.serverArgs(dataDir, "")...)
	c, err := startAndWait(cmd)
	if err != nil {
		return err
	}
	defer c.stop()

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-c.ctx.Done()
		cancel()
	}()
	conn, err := d.waitConn(wctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	user, db := pgx.Identifier{app.user}.Sanitize(), pgx.Identifier{app.database}.Sanitize()
	// Passwords travel as SCRAM verifiers: the server never sees them in
	// clear, so no log or statement view can show them.
	stmts := []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD %s", user, quoteLiteral(appVerifier)),
		fmt.Sprintf("CREATE ROLE %s LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s", pgx.Identifier{api.ReplicationUser}.Sanitize(), quoteLiteral(replVerifier)),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", db, user),
		fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC", db),
		fmt.Sprintf("GRANT CONNECT, TEMPORARY ON DATABASE %s TO %s", db, user),
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("bootstrap: %w", err)
		}
	}
	conn.Close(ctx)
	return c.stop()
}

// waitConn connects as the superuser over the socket once the server takes
// connections.
func (d *Driver) waitConn(ctx context.Context) (*pgx.Conn, error) {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var conn *pgx.Conn
	err := instance.PollUntil(wctx, 100*time.Millisecond, func() error {
		c, err := pgx.Connect(wctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", d.cfg.RunDir, d.cfg.Port, superuser))
		conn = c
		return err
	})
	return conn, err
}

// quoteLiteral is a SQL string literal.
func quoteLiteral(s string) string {
	b := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}

// commitDataDir marks the data set in tmp complete and renames it into
// place: a bootstrap, clone or restore that did not reach this point
// leaves no data (HasData looks for the marker).
func (d *Driver) commitDataDir(tmp string) error {
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		return err
	}
	if err := instance.ReplaceDir(tmp, d.DataDir()); err != nil {
		return err
	}
	d.forgetSystemID()
	return nil
}
