package instance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Driver is what the Manager needs to run a database engine; each engine's
// package (postgres, mariadb, mysql) implements it. Every method but Probe
// is called from the Manager's one loop goroutine; Probe may be called
// concurrently (HTTP requests).
type Driver interface {
	// HasData tells whether the data directory holds a complete data set
	// (a bootstrap or clone that ran to its end).
	HasData() (bool, error)
	// SystemID identifies the data set's lineage without a running server.
	SystemID() (string, error)
	// Bootstrap creates a new data set with the application and
	// replication users, in a scratch directory renamed into place when
	// complete, so an interrupted bootstrap starts over clean.
	Bootstrap(ctx context.Context) error
	// Clone replaces the data with a copy of the primary t names, the same
	// way: complete or not at all.
	Clone(ctx context.Context, t Topology) error
	// Command is the engine's server process for the data as it is (a
	// replica's data starts as a replica; Promote makes it a primary).
	Command() (*exec.Cmd, error)
	// StopSignal asks the server for a fast, clean shutdown.
	StopSignal() syscall.Signal
	// WaitReady returns once the started server accepts the manager's
	// admin connection.
	WaitReady(ctx context.Context) error
	// Follow makes the running server a replica of t's primary; it is
	// called repeatedly and must do nothing when that is already so.
	Follow(ctx context.Context, t Topology) error
	// Promote makes the running server a writable primary; idempotent.
	Promote(ctx context.Context) error
	// FenceStops tells how the engine fences: true when it can refuse
	// writes for good only by not running (Postgres: any superuser could
	// undo a read-only setting, and a clean stop sends all WAL to the
	// standbys), false when the running server can (MariaDB read_only).
	FenceStops() bool
	// Fence makes the server refuse client writes until Promote, ends the
	// client sessions, and returns the position a replica must have reached
	// (Position.Reached) to hold every write the server took. When
	// FenceStops, the manager has stopped the server cleanly before.
	Fence(ctx context.Context) (api.Position, error)
	// Probe reads the running server's state.
	Probe(ctx context.Context) (Probe, error)
	// Close drops the admin connections (the server stopped).
	Close()
}

// Probe is what a driver reads from its engine's running server.
type Probe struct {
	// Writable tells whether the server accepts writes (not in recovery,
	// not read-only).
	Writable         bool
	SystemIdentifier string
	ServerID         uint32
	Position         api.Position
	Streaming        bool
	Upstream         string
	LagBytes         *int64
	LagSeconds       *float64
	// Synchronous tells whether the primary's commits wait for a replica;
	// SyncReplicas counts the replicas that acknowledge them now.
	Synchronous  bool
	SyncReplicas int
}

// SyncReplicator is implemented by drivers whose engine can make the
// primary's commits wait for a replica (synchronous or semi-synchronous
// replication). The Manager calls SetSynchronous on the writable primary at
// every reconcile with the topology's Synchronous; it must do nothing when
// the server already is so.
type SyncReplicator interface {
	SetSynchronous(ctx context.Context, on bool) error
}

// ErrMustReclone is wrapped by Follow when the replica cannot catch up from
// its data (the primary no longer has the history it needs, as after a long
// absence or with a claim kept from an earlier scale-down); the Manager
// then replaces the data with a fresh clone.
var ErrMustReclone = errors.New("the replica's data cannot catch up with the primary")

// CloneServer is implemented by drivers whose replicas clone through the
// primary's manager (MariaDB's mariadb-backup stream) rather than with the
// engine's own protocol (pg_basebackup). The Manager serves it on
// GET /v1/clone to clients authenticated as the replication user.
type CloneServer interface {
	ServeClone(w http.ResponseWriter, r *http.Request)
}

// Backuper is implemented by drivers that back their data up and restore
// it (every engine's driver).
type Backuper interface {
	// BackupFormat names the format Backup writes and Restore reads
	// (Operation.Format).
	BackupFormat() string
	// Backup streams a consistent physical backup of the running server,
	// a primary or a replica, to w and returns the position it holds. It
	// may run while the Manager's loop goes on.
	Backup(ctx context.Context, w io.Writer) (api.Position, error)
	// Restore loads a backup read from r into a scratch directory: it reads
	// r to its end, then calls verify, and only when verify accepts the
	// stream does it finish the load (recovery to a consistent state, this
	// instance's credentials) and rename the data into place with its
	// completion marker. On error the scratch is gone and HasData is false.
	Restore(ctx context.Context, r io.Reader, verify func() error) error
	// DiscardRestore removes what an interrupted Restore left.
	DiscardRestore() error
}

// ParameterSetter is implemented by drivers whose engine takes, while it
// runs, the parameters of spec.parameters that need no restart.
type ParameterSetter interface {
	// SetParameters makes the running server use params, and its defaults
	// for any parameter it was given before (by this method, in this or an
	// earlier run on the same data) that params lacks. An error names the
	// parameters the engine refused.
	SetParameters(ctx context.Context, params map[string]string) error
}

// DataUpgrader is implemented by drivers whose engine, started on data an
// earlier release line wrote, upgrades that data itself once it runs
// (MariaDB's mariadb-upgrade of the system tables). The Manager calls
// UpgradeData after every start, before the server takes its role; it must
// do nothing when the data is the running server's own.
type DataUpgrader interface {
	UpgradeData(ctx context.Context) error
}

// MajorUpgrader is implemented by drivers whose engine's server does not
// start on data of an earlier major version (PostgreSQL): a primary's data
// is upgraded before the server starts, with it stopped (pg_upgrade); a
// replica's is not, it is cloned again from the upgraded primary.
type MajorUpgrader interface {
	// OlderMajor is the major version of the data when it is older than
	// the server's, "" when it is not (or there is no data).
	OlderMajor() (string, error)
	// UpgradeMajor upgrades the data to the server's major version,
	// completely or not at all: on error the data is the old major's still.
	UpgradeMajor(ctx context.Context) error
}

// AdminInterfaceServer is implemented by drivers whose engine lacks the
// admin interface replicas connect to while clients get a certificate of
// the user's own (MariaDB): the manager serves it in the engine's place,
// on DriverConfig.AdminPort. The Manager calls it once, before the engine
// starts, and closes what it returns when it stops.
type AdminInterfaceServer interface {
	ServeAdminInterface() (io.Closer, error)
}

// RestartRequester is implemented by drivers whose engine may exit asking
// to be started again (MySQL exits with status 16 after RESTART or a clone
// into its own data directory, when a supervisor announced itself). The
// Manager starts such a server again at once and does not count the exit
// as a crash.
type RestartRequester interface {
	RestartRequested(exitCode int) bool
}

// ListenAddresses are the addresses the engine listens on: ListenHost, and
// 127.0.0.1 with ListenLoopback.
func (c DriverConfig) ListenAddresses() []string {
	if c.ListenLoopback && c.ListenHost != "127.0.0.1" {
		return []string{c.ListenHost, "127.0.0.1"}
	}
	return []string{c.ListenHost}
}

// DriverConfig is what every driver is built from.
type DriverConfig struct {
	// Name is the instance name (db-1).
	Name string
	// DataRoot is the volume's mount point; the engine keeps its data in
	// a subdirectory, so a lost+found at the root does no harm.
	DataRoot string
	// RunDir holds sockets, passfiles and scratch files.
	RunDir     string
	ListenHost string
	// ListenLoopback makes the engine listen on 127.0.0.1 too, as it
	// should in a pod, whose loopback is its own: `kubectl port-forward`
	// connects there. (Instances that share a host's loopback, as the
	// engine suite's and the rig's do, may not.)
	ListenLoopback bool
	Port           int
	// AdminPort is the admin interface on ListenHost (0: none): MySQL's
	// own, or for MariaDB the manager's relay (AdminInterfaceServer). It
	// always serves the instance's own certificate (EngineTLS's Instance
	// files), so replicas verify the primary by its address there while
	// clients get a certificate of the user's own on Port.
	AdminPort int
	// BinDir holds the engine's binaries; empty means PATH.
	BinDir  string
	Secrets Secrets
	// Identity is the instance's certificate, for calls to the other
	// instances' managers; TLS is where the engine finds its copy.
	Identity *Identity
	TLS      EngineTLS
	// RequireClientTLS refuses clients that connect over the network
	// without TLS (PostgreSQL hostssl, MySQL-family
	// require_secure_transport); the unix socket, which only the pod
	// reaches, stays open to the manager.
	RequireClientTLS bool
	// ServerID is the MySQL-family server_id.
	ServerID uint32
	// ArchiveCommand and RestoreCommand are shell commands that hand a
	// closed WAL file to the manager and fetch one from the archive a
	// restore replays (mydb-instance wal-archive and wal-restore, with
	// PostgreSQL's %p and %f). ArchiveWAL makes the engine archive with
	// ArchiveCommand, closing its WAL at least every ArchiveTimeout.
	ArchiveCommand, RestoreCommand string
	ArchiveWAL                     bool
	ArchiveTimeout                 time.Duration
	// StartParameters are the parameters of spec.parameters the engine
	// reads only when it starts (--engine-parameter): they go on its
	// command line.
	StartParameters map[string]string
	// Stdout and Stderr receive the engine's and its tools' output.
	Stdout, Stderr io.Writer
	Log            *slog.Logger
}

// TLSReloader is a driver whose engine reads a renewed certificate
// (EngineTLS's files) without a restart.
type TLSReloader interface {
	ReloadTLS(ctx context.Context) error
}

// TLSEnabled tells whether the engine serves TLS with the instance's
// certificate (TLS names its files), and replicates over TLS.
func (c DriverConfig) TLSEnabled() bool { return c.TLS.CertFile != "" }

// Bin is the path of the engine binary name.
func (c DriverConfig) Bin(name string) string {
	if c.BinDir != "" {
		return filepath.Join(c.BinDir, name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return name
}

// Tool is a short-lived engine tool with its output going to the engine's
// streams, so its errors land in the pod's log.
func (c DriverConfig) Tool(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Bin(name), args...)
	cmd.Stdout, cmd.Stderr = c.Stdout, c.Stderr
	cmd.Env = CleanEnv()
	return cmd
}

// StaleLockOwner is a driver whose engine keeps lock files of its own
// besides those in the run directory (Postgres' postmaster.pid in PGDATA).
type StaleLockOwner interface {
	// StaleLocks are the paths of those lock files.
	StaleLocks() []string
}

// RemoveStaleLocks removes the engines' sockets, socket locks and pid
// files from runDir, and driver's StaleLocks. Only for a manager that knows
// no engine of an earlier run can be alive: a container's PID 1.
func RemoveStaleLocks(runDir string, driver Driver) error {
	entries, err := os.ReadDir(runDir)
	if err != nil {
		return err
	}
	var paths []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".s.PGSQL.") || strings.HasSuffix(name, ".sock") ||
			strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".pid") {
			paths = append(paths, filepath.Join(runDir, name))
		}
	}
	if o, ok := driver.(StaleLockOwner); ok {
		paths = append(paths, o.StaleLocks()...)
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the stale %s: %w", p, err)
		}
	}
	return nil
}

// LastLines are the last n lines of a tool's output s, joined with " | ":
// what an error message quotes of it.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
