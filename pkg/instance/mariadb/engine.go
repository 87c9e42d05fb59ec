// Package mariadb runs MariaDB under the instance manager:
// mariadb-install-db bootstrap, physical clones streamed by the primary's
// manager (mariadb-backup over GET /v1/clone), GTID replication, promotion
// and the status read from the server.
package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

const (
	// dataSubdir keeps the data one level below the volume's root, where
	// a lost+found would upset the server (pitfall 13).
	dataSubdir = "mariadb"
	// completeMarker is written last into a bootstrapped or cloned data
	// directory before it is renamed into place.
	completeMarker = "mydb-complete"
	// systemIDFile holds the identifier of the data set's lineage, made at
	// bootstrap and carried to clones by the clone endpoint.
	systemIDFile = "mydb-system-id"
	// cloneGTIDFile holds the GTID position a fresh clone's data is at,
	// until the replica has set gtid_slave_pos from it.
	cloneGTIDFile = "mydb-clone-gtid"
)

// Engine is MariaDB for the instance manager.
type Engine struct {
	cfg     instance.EngineConfig
	dialect Dialect

	mu sync.Mutex
	db *sql.DB
}

var (
	_ instance.Engine      = (*Engine)(nil)
	_ instance.CloneServer = (*Engine)(nil)
)

// New returns the engine for cfg.
func New(cfg instance.EngineConfig) *Engine { return &Engine{cfg: cfg} }

// DataDir is the server's datadir.
func (e *Engine) DataDir() string { return filepath.Join(e.cfg.DataRoot, dataSubdir) }

func (e *Engine) socket() string { return filepath.Join(e.cfg.RunDir, "mariadbd.sock") }

// HasData implements instance.Engine.
func (e *Engine) HasData() (bool, error) {
	_, err := os.Stat(filepath.Join(e.DataDir(), completeMarker))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SystemID implements instance.Engine.
func (e *Engine) SystemID() (string, error) {
	b, err := os.ReadFile(filepath.Join(e.DataDir(), systemIDFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
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
	args := append(e.serverArgs(e.DataDir()),
		"--bind-address="+e.cfg.ListenHost,
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

func (e *Engine) admin() (*sql.DB, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.db != nil {
		return e.db, nil
	}
	db, err := mysqlfamily.OpenAdmin(e.socket())
	if err != nil {
		return nil, err
	}
	e.db = db
	return db, nil
}

// WaitReady implements instance.Engine.
func (e *Engine) WaitReady(ctx context.Context) error {
	db, err := e.admin()
	if err != nil {
		return err
	}
	return instance.PollUntil(ctx, 100*time.Millisecond, func() error { return db.PingContext(ctx) })
}

// Close implements instance.Engine.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.db != nil {
		e.db.Close()
		e.db = nil
	}
}
