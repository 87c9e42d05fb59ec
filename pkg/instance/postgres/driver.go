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
	"github.com/mydb-dev/mydb/pkg/parameters"
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

// Driver runs PostgreSQL for the instance manager.
type Driver struct {
	cfg instance.DriverConfig

	mu    sync.Mutex
	pool  *pgxpool.Pool
	sysID string
	// receivedTimeline is the timeline the walreceiver last streamed on
	// (0: none seen yet); see standbyTimeline.
	receivedTimeline uint32
	// major is the postgres binary's major version, once read.
	major string
}

var _ instance.Driver = (*Driver)(nil)

// New returns the driver for cfg.
func New(cfg instance.DriverConfig) *Driver { return &Driver{cfg: cfg} }

// DataDir is PGDATA.
func (d *Driver) DataDir() string { return filepath.Join(d.cfg.DataRoot, dataSubdir) }

// StaleLocks implements instance.StaleLockOwner: postmaster.pid.
func (d *Driver) StaleLocks() []string { return []string{filepath.Join(d.DataDir(), "postmaster.pid")} }

func (d *Driver) passfile() string { return filepath.Join(d.cfg.RunDir, "pgpass") }

// HasData implements instance.Driver.
func (d *Driver) HasData() (bool, error) {
	if err := d.finishInterruptedUpgrade(); err != nil {
		return false, err
	}
	_, err := os.Stat(filepath.Join(d.DataDir(), completeMarker))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SystemID implements instance.Driver with the system identifier initdb
// chose, which pg_basebackup clones share.
func (d *Driver) SystemID() (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sysID != "" {
		return d.sysID, nil
	}
	if has, err := d.HasData(); err != nil || !has {
		return "", fmt.Errorf("no data")
	}
	out, err := exec.Command(d.cfg.Bin("pg_controldata"), "-D", d.DataDir()).Output()
	if err != nil {
		return "", fmt.Errorf("pg_controldata: %w", err)
	}
	id := controlDataField(out, "Database system identifier")
	if id == "" {
		return "", errors.New("pg_controldata shows no system identifier")
	}
	d.sysID = id
	return id, nil
}

func (d *Driver) forgetSystemID() {
	d.mu.Lock()
	d.sysID = ""
	d.mu.Unlock()
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

// Command implements instance.Driver. Settings the manager owns per
// instance go on the command line (where ALTER SYSTEM cannot override
// them); the shared ones are in postgresql.conf since bootstrap.
func (d *Driver) Command() (*exec.Cmd, error) {
	// The run dir may be new (a new pod): the standby's passfile must exist
	// before the walreceiver starts.
	if err := d.writePassfile(); err != nil {
		return nil, err
	}
	if err := writeAuthConfig(d.DataDir(), d.cfg.TLSEnabled(), d.cfg.RequireClientTLS); err != nil {
		return nil, err
	}
	args := append(d.serverArgs(d.DataDir(), strings.Join(d.cfg.ListenAddresses(), ",")), d.archiveArgs()...)
	cmd := exec.Command(d.cfg.Bin("postgres"), args...)
	cmd.Stdout, cmd.Stderr = d.cfg.Stdout, d.cfg.Stderr
	cmd.Env = instance.CleanEnv()
	return cmd, nil
}

func (d *Driver) serverArgs(dataDir, listen string) []string {
	args := []string{
		"-D", dataDir,
		"-c", "listen_addresses=" + listen,
		"-c", fmt.Sprintf("port=%d", d.cfg.Port),
		"-c", "unix_socket_directories=" + d.cfg.RunDir,
		"-c", "cluster_name=" + d.cfg.Name,
	}
	if d.cfg.TLSEnabled() {
		// The instance's certificate, renewed by the manager, which then
		// reloads the configuration (ReloadTLS).
		args = append(args, "-c", "ssl=on", "-c", "ssl_cert_file="+d.cfg.TLS.CertFile, "-c", "ssl_key_file="+d.cfg.TLS.KeyFile,
			"-c", "ssl_min_protocol_version=TLSv1.2")
	}
	// spec.parameters read only at start; the live ones are in
	// parametersFile.
	for _, p := range parameters.Sorted(d.cfg.StartParameters) {
		args = append(args, "-c", p)
	}
	return args
}

// StopSignal implements instance.Driver: SIGINT is Postgres' fast
// shutdown (abort transactions, checkpoint, exit), clean and quick.
func (d *Driver) StopSignal() syscall.Signal { return syscall.SIGINT }

// adminPool connects over the unix socket as the superuser (peer auth).
func (d *Driver) adminPool() (*pgxpool.Pool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil {
		return d.pool, nil
	}
	cfg, err := pgxpool.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable application_name=mydb-instance connect_timeout=5",
		d.cfg.RunDir, d.cfg.Port, superuser))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	d.pool = p
	return p, nil
}

// WaitReady implements instance.Driver.
func (d *Driver) WaitReady(ctx context.Context) error {
	p, err := d.adminPool()
	if err != nil {
		return err
	}
	return instance.PollUntil(ctx, 100*time.Millisecond, func() error {
		_, err := p.Exec(ctx, "SELECT 1")
		return err
	})
}

// Close implements instance.Driver.
func (d *Driver) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil {
		d.pool.Close()
		d.pool = nil
	}
}
