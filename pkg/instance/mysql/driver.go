// Package mysql runs MySQL (9.7; 8.4 takes the same statements) under the
// instance manager: mysqld --initialize-insecure bootstrap, clones through
// the CLONE plugin, GTID auto-positioned replication, promotion, the
// status read from the server, and backups as CLONE LOCAL copies. The
// lifecycle it shares with MariaDB is mysqlfamily.Server's.
//
// The instance suite (test/engines, TestMySQL and the backup tests) runs
// it against MySQL 9.7 from its engine image; every statement sequence and
// decision is also unit tested through fakes of the admin connection and
// of the tools (driver_test.go, backup_test.go). No 8.4 server has run.
package mysql

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// dataSubdir keeps the data one level below the volume's root:
// --initialize refuses a directory that is not empty (lost+found).
const dataSubdir = "mysql"

// RestartExitCode is mysqld's exit status when it stops to be started
// again (RESTART, or a clone into its own data directory), given that a
// supervisor announced itself in MYSQLD_PARENT_PID.
const RestartExitCode = 16

// tools runs mysqld the ways the driver needs besides the supervised
// server; tests replace it.
type tools interface {
	// Run runs mysqld with args to its end (--initialize-insecure).
	Run(ctx context.Context, args ...string) error
	// Serve runs a temporary mysqld with args until f, given the admin
	// connection, returns.
	Serve(ctx context.Context, args []string, f func(context.Context, mysqlfamily.Conn) error) error
}

// Driver runs MySQL for the instance manager.
type Driver struct {
	*mysqlfamily.Server
	cfg   instance.DriverConfig
	tools tools
	// osUser is the manager's OS user, whom auth_socket admits as root.
	osUser string
}

var (
	_ instance.Driver           = (*Driver)(nil)
	_ instance.RestartRequester = (*Driver)(nil)
)

// New returns the driver for cfg.
func New(cfg instance.DriverConfig) *Driver {
	d := &Driver{cfg: cfg}
	if u, err := user.Current(); err == nil {
		d.osUser = u.Username
	}
	d.Server = &mysqlfamily.Server{Cfg: cfg, Dialect: Dialect{}, DataDir: filepath.Join(cfg.DataRoot, dataSubdir), Open: d.openAdmin}
	d.tools = realTools{d}
	return d
}

// openAdmin connects as root over the socket without a password: on a
// fresh --initialize-insecure directory root has none, afterwards
// auth_socket admits the manager's OS user as root.
func (d *Driver) openAdmin() (mysqlfamily.Conn, error) {
	return mysqlfamily.OpenAdmin(socketPath(d.cfg), "root")
}

type realTools struct{ d *Driver }

func (t realTools) Run(ctx context.Context, args ...string) error {
	return t.d.cfg.Tool(ctx, "mysqld", args...).Run()
}

func (t realTools) Serve(ctx context.Context, args []string, f func(context.Context, mysqlfamily.Conn) error) error {
	return mysqlfamily.WithTempServer(ctx, t.d.cfg.Tool(context.Background(), "mysqld", args...), t.d.openAdmin, f)
}

// Command implements instance.Driver. MYSQLD_PARENT_PID tells mysqld a
// supervisor restarts it, so a RESTART exits with RestartExitCode rather
// than failing; the manager starts it again at once (RestartRequested).
func (d *Driver) Command() (*exec.Cmd, error) {
	cmd := exec.Command(d.cfg.Bin("mysqld"), ServerArgs(d.cfg, d.DataDir)...)
	cmd.Stdout, cmd.Stderr = d.cfg.Stdout, d.cfg.Stderr
	cmd.Env = append(instance.CleanEnv(), "MYSQLD_PARENT_PID="+strconv.Itoa(os.Getpid()))
	return cmd, nil
}

// StopSignal implements instance.Driver: SIGTERM is mysqld's normal
// shutdown.
func (d *Driver) StopSignal() syscall.Signal { return syscall.SIGTERM }

// RestartRequested implements instance.RestartRequester.
func (d *Driver) RestartRequested(exitCode int) bool { return exitCode == RestartExitCode }

// adminInterfaceGrantQuery tells whether the replication user may connect
// to the admin interface.
var adminInterfaceGrantQuery = fmt.Sprintf("SELECT count(*) AS n FROM mysql.global_grants WHERE USER = %s AND HOST = '%%' AND PRIV = 'SERVICE_CONNECTION_ADMIN'",
	mysqlfamily.QuoteString(api.ReplicationUser))

// Promote implements instance.Driver: mysqlfamily's promotion, then the
// admin interface's grant where the data lacks it (data made before mydb
// used the interface). Once writes are on, so the binary log takes the
// grant to the replicas; only then, so a primary that has it writes no
// transaction.
func (d *Driver) Promote(ctx context.Context) error {
	if err := d.Server.Promote(ctx); err != nil {
		return err
	}
	c, err := d.Admin()
	if err != nil {
		return err
	}
	row, err := c.QueryRow(ctx, adminInterfaceGrantQuery)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(row["n"])
	if err != nil {
		return fmt.Errorf("reading the replication user's grants: %q: %w", row["n"], err)
	}
	if n > 0 {
		return nil
	}
	d.cfg.Log.Info("giving the replication user the admin interface's grant (SERVICE_CONNECTION_ADMIN)")
	return c.Exec(ctx, adminInterfaceGrant)
}

// ReloadTLS implements instance.TLSReloader: the engine's port, then the
// admin interface, which has TLS files of its own.
func (d *Driver) ReloadTLS(ctx context.Context) error {
	if err := d.Server.ReloadTLS(ctx); err != nil {
		return err
	}
	if d.cfg.AdminPort <= 0 || !d.cfg.TLSEnabled() {
		return nil
	}
	c, err := d.Admin()
	if err != nil {
		return err
	}
	return c.Exec(ctx, "ALTER INSTANCE RELOAD TLS FOR CHANNEL mysql_admin")
}
