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

// Engine is MariaDB for the instance manager; the lifecycle it shares
// with MySQL is mysqlfamily.Server's.
type Engine struct {
	*mysqlfamily.Server
	cfg     instance.EngineConfig
	dialect Dialect
}

var (
	_ instance.Engine      = (*Engine)(nil)
	_ instance.CloneServer = (*Engine)(nil)
)

// New returns the engine for cfg.
func New(cfg instance.EngineConfig) *Engine {
	e := &Engine{cfg: cfg}
	e.Server = &mysqlfamily.Server{
		Cfg: cfg, Dialect: e.dialect, DataDir: filepath.Join(cfg.DataRoot, dataSubdir),
		Open: e.openAdmin, PrepareFollow: e.adoptCloneGTID,
	}
	return e
}

func (e *Engine) socket() string { return filepath.Join(e.cfg.RunDir, "mariadbd.sock") }

// openAdmin connects as the manager's OS user, which unix_socket
// authenticates.
func (e *Engine) openAdmin() (mysqlfamily.Conn, error) {
	u, err := user.Current()
	if err != nil {
		return nil, err
	}
	return mysqlfamily.OpenAdmin(e.socket(), u.Username)
}

// serverArgs are the options of every server run; --no-defaults keeps an
// image's my.cnf from changing what the manager decided.
func (e *Engine) serverArgs(dataDir string) []string {
	return []string{
		"--no-defaults",
		"--datadir=" + dataDir,
		"--socket=" + e.socket(),
		"--pid-file=" + filepath.Join(e.cfg.RunDir, "mariadbd.pid"),
		"--tmpdir=" + e.cfg.RunDir,
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_unicode_ci",
		"--skip-name-resolve",
	}
}

// Command implements instance.Engine. Every server starts read-only and
// without replication: the manager promotes a primary (read_only=OFF) or
// points a replica at its primary, so nothing is writable before the
// topology says so.
func (e *Engine) Command() (*exec.Cmd, error) {
	args := append(e.serverArgs(e.DataDir),
		// A list since MariaDB 10.11, the oldest version mydb runs.
		"--bind-address="+strings.Join(e.cfg.ListenAddresses(), ","),
		fmt.Sprintf("--port=%d", e.cfg.Port),
		fmt.Sprintf("--server-id=%d", e.cfg.ServerID),
		"--report-host="+e.cfg.ListenHost,
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
	cmd := exec.Command(e.cfg.Bin("mariadbd"), args...)
	cmd.Stdout, cmd.Stderr = e.cfg.Stdout, e.cfg.Stderr
	cmd.Env = instance.CleanEnv()
	return cmd, nil
}

// StopSignal implements instance.Engine: SIGTERM is MariaDB's normal
// shutdown (InnoDB flushes, "Shutdown complete").
func (e *Engine) StopSignal() syscall.Signal { return syscall.SIGTERM }
