// Package postgres runs PostgreSQL under the instance manager: initdb
// bootstrap, pg_basebackup clones, streaming replication with a slot per
// replica, pg_promote, and the status read from the server.
package postgres

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mydb-dev/mydb/pkg/instance"
)

const (
	// dataSubdir keeps PGDATA one level below the volume's root, where a
	// lost+found would make initdb refuse the directory.
	dataSubdir = "pgdata"
	// completeMarker is written last into a bootstrapped or cloned data
	// directory, before it is renamed into place.
	completeMarker = "mydb-complete"
	// superuser is the role the manager administers the server as, over
	// the unix socket with peer authentication.
	superuser = "postgres"
)

// Engine is PostgreSQL for the instance manager.
type Engine struct {
	cfg instance.EngineConfig

	mu    sync.Mutex
	pool  *pgxpool.Pool
	sysID string
	// receivedTimeline is the timeline the walreceiver last streamed on
	// (0: none seen yet); see standbyTimeline.
	receivedTimeline uint32
}

var _ instance.Engine = (*Engine)(nil)

// New returns the engine for cfg.
func New(cfg instance.EngineConfig) *Engine { return &Engine{cfg: cfg} }

// DataDir is PGDATA.
func (e *Engine) DataDir() string { return filepath.Join(e.cfg.DataRoot, dataSubdir) }

// StaleLocks implements instance.StaleLockOwner: postmaster.pid.
func (e *Engine) StaleLocks() []string { return []string{filepath.Join(e.DataDir(), "postmaster.pid")} }

func (e *Engine) passfile() string { return filepath.Join(e.cfg.RunDir, "pgpass") }

// HasData implements instance.Engine.
func (e *Engine) HasData() (bool, error) {
	_, err := os.Stat(filepath.Join(e.DataDir(), completeMarker))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SystemID implements instance.Engine with the system identifier initdb
// chose, which pg_basebackup clones share.
func (e *Engine) SystemID() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sysID != "" {
		return e.sysID, nil
	}
	if has, err := e.HasData(); err != nil || !has {
		return "", fmt.Errorf("no data")
	}
	out, err := exec.Command(e.cfg.Bin("pg_controldata"), "-D", e.DataDir()).Output()
	if err != nil {
		return "", fmt.Errorf("pg_controldata: %w", err)
	}
	id := controlDataField(out, "Database system identifier")
	if id == "" {
		return "", errors.New("pg_controldata shows no system identifier")
	}
	e.sysID = id
	return id, nil
}

func (e *Engine) forgetSystemID() {
	e.mu.Lock()
	e.sysID = ""
	e.mu.Unlock()
}

// controlDataField is the value of a "Name: value" line of pg_controldata.
func controlDataField(out []byte, name string) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Command implements instance.Engine. Settings the manager owns per
// instance go on the command line (where ALTER SYSTEM cannot override
// them); the shared ones are in postgresql.conf since bootstrap.
func (e *Engine) Command() (*exec.Cmd, error) {
	// The run dir may be new (a new pod): the standby's passfile must exist
	// before the walreceiver starts.
	if err := e.writePassfile(); err != nil {
		return nil, err
	}
	cmd := exec.Command(e.cfg.Bin("postgres"), e.serverArgs(e.DataDir(), strings.Join(e.cfg.ListenAddresses(), ","))...)
	cmd.Stdout, cmd.Stderr = e.cfg.Stdout, e.cfg.Stderr
	cmd.Env = instance.CleanEnv()
	return cmd, nil
}

func (e *Engine) serverArgs(dataDir, listen string) []string {
	return []string{
		"-D", dataDir,
		"-c", "listen_addresses=" + listen,
		"-c", fmt.Sprintf("port=%d", e.cfg.Port),
		"-c", "unix_socket_directories=" + e.cfg.RunDir,
		"-c", "cluster_name=" + e.cfg.Name,
	}
}

// StopSignal implements instance.Engine: SIGINT is Postgres' fast
// shutdown (abort transactions, checkpoint, exit), clean and quick.
func (e *Engine) StopSignal() syscall.Signal { return syscall.SIGINT }

// adminPool connects over the unix socket as the superuser (peer auth).
func (e *Engine) adminPool() (*pgxpool.Pool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool != nil {
		return e.pool, nil
	}
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable application_name=mydb-instance connect_timeout=5",
		e.cfg.RunDir, e.cfg.Port, superuser))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	e.pool = p
	return p, nil
}

// WaitReady implements instance.Engine.
func (e *Engine) WaitReady(ctx context.Context) error {
	p, err := e.adminPool()
	if err != nil {
		return err
	}
	return instance.PollUntil(ctx, 100*time.Millisecond, func() error {
		_, err := p.Exec(ctx, "SELECT 1")
		return err
	})
}

// Close implements instance.Engine.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pool != nil {
		e.pool.Close()
		e.pool = nil
	}
}
