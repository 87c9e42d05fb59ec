// Package mariadb runs MariaDB under the instance manager:
// mariadb-install-db bootstrap, physical clones streamed by the primary's
// manager (mariadb-backup over GET /v1/clone), GTID replication, promotion
// and the status read from the server.
package mariadb

import (
	"fmt"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

const (
	// dataSubdir keeps the data one level below the volume's root, where
	// a lost+found would upset the server (pitfall 13).
	dataSubdir = "mariadb"
	// cloneGTIDFile holds the GTID position a fresh clone's data is at,
	// until the replica has set gtid_slave_pos from it.
	cloneGTIDFile = "mydb-clone-gtid"
)

// Driver runs MariaDB for the instance manager; the lifecycle it shares
// with MySQL is mysqlfamily.Server's.
type Driver struct {
	*mysqlfamily.Server
	cfg     instance.DriverConfig
	dialect Dialect
}

var (
	_ instance.Driver      = (*Driver)(nil)
	_ instance.CloneServer = (*Driver)(nil)
)

// New returns the driver for cfg.
func New(cfg instance.DriverConfig) *Driver {
	d := &Driver{cfg: cfg}
	d.Server = &mysqlfamily.Server{
		Cfg: cfg, Dialect: d.dialect, DataDir: filepath.Join(cfg.DataRoot, dataSubdir),
		Open: d.openAdmin, PrepareFollow: d.adoptCloneGTID,
	}
	return d
}

func (d *Driver) socket() string { return filepath.Join(d.cfg.RunDir, "mariadbd.sock") }

// openAdmin connects as the manager's OS user, which unix_socket
// authenticates.
func (d *Driver) openAdmin() (mysqlfamily.Conn, error) {
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	return mysqlfamily.OpenAdmin(d.socket(), u.Username)
}

// serverArgs are the options of every server run; --no-defaults keeps an
// image's my.cnf from changing what the manager decided.
func (d *Driver) serverArgs(dataDir string) []string {
	return []string{
		"--no-defaults",
		"--datadir=" + dataDir,
		"--socket=" + d.socket(),
		"--pid-file=" + filepath.Join(d.cfg.RunDir, "mariadbd.pid"),
		"--tmpdir=" + d.cfg.RunDir,
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_unicode_ci",
		"--skip-name-resolve",
	}
}

// Command implements instance.Driver. Every server starts read-only and
// without replication: the manager promotes a primary (read_only=OFF) or
// points a replica at its primary, so nothing is writable before the
// topology says so.
func (d *Driver) Command() (*exec.Cmd, error) {
	args := append(d.serverArgs(d.DataDir),
		// A list since MariaDB 10.11, the oldest version mydb runs.
		"--bind-address="+strings.Join(d.cfg.ListenAddresses(), ","),
		fmt.Sprintf("--port=%d", d.cfg.Port),
		fmt.Sprintf("--server-id=%d", d.cfg.ServerID),
		"--report-host="+d.cfg.ListenHost,
		// Names from the log basename, not from the host name, so they
		// survive a pod's new host name.
		"--log-basename=mydb",
		"--log-bin",
		"--binlog-format=ROW",
		"--sync-binlog=1",
		"--binlog-expire-logs-seconds=604800",
		"--gtid-strict-mode=ON",
		"--log-slave-updates=ON",
		"--skip-slave-start",
		"--slave-net-timeout=10",
		"--read-only=ON",
		// Every server acknowledges as a semi-synchronous replica; only a
		// primary in Sync mode waits for it (SyncStatements).
		"--rpl-semi-sync-slave-enabled=ON",
		"--innodb-flush-log-at-trx-commit=1",
	)
	if d.cfg.TLSEnabled() {
		// The instance's certificate, renewed by the manager, which then
		// has the server read it again (ReloadTLS).
		args = append(args, "--ssl-cert="+d.cfg.TLS.CertFile, "--ssl-key="+d.cfg.TLS.KeyFile, "--tls-version=TLSv1.2,TLSv1.3")
	}
	args = append(args, mysqlfamily.StartArgs(d.cfg)...)
	cmd := exec.Command(d.cfg.Bin("mariadbd"), args...)
	cmd.Stdout, cmd.Stderr = d.cfg.Stdout, d.cfg.Stderr
	cmd.Env = instance.CleanEnv()
	return cmd, nil
}

// StopSignal implements instance.Driver: SIGTERM is MariaDB's normal
// shutdown (InnoDB flushes, "Shutdown complete").
func (d *Driver) StopSignal() syscall.Signal { return syscall.SIGTERM }
