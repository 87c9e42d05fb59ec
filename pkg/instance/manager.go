package instance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Options configure a Manager.
type Options struct {
	// Name is the instance name; the topology's Primary is compared to it.
	Name string
	// PodUID is the UID of the pod the manager runs in, reported in its
	// status: a pod made anew under the same name (and, on some networks,
	// the same IP) is another instance, and the controller must not take
	// the old process's answers for it.
	PodUID string
	// Engine is the engine's name, for the status.
	Engine   string
	DataRoot string
	// StatusAddress is where the HTTP server listens (":8000", api.Port).
	StatusAddress string
	// MetricsAddress is where the metrics server listens (":9187",
	// api.MetricsPort); empty: no metrics server.
	MetricsAddress string
	// StopTimeout bounds the engine's clean shutdown before it is killed.
	StopTimeout time.Duration
	// MaxReadyLag and MaxReadyLagBytes bound a ready replica's lag.
	MaxReadyLag      time.Duration
	MaxReadyLagBytes int64
	// Identity is the instance's certificate: the manager serves HTTPS
	// with it and admits peers by the chain of theirs.
	Identity *Identity
	// Restore makes a primary without data wait for POST /v1/restore and
	// load that backup instead of bootstrapping a new data set. Replicas
	// clone from their primary whatever it says.
	Restore bool
	// StreamStall is how long a write of a clone or backup stream may
	// block before the stream is given up (0: DefaultStreamStall for
	// clones, DefaultBackupStall for backups).
	StreamStall time.Duration
	// CredentialExpiryInterval is how often short-lived users are expired
	// (0: CredentialExpiryInterval).
	CredentialExpiryInterval time.Duration
	// ArchiveWAL makes the instance archive its WAL while it is the primary,
	// to where PUT /v1/archive says; ArchiveTimeout is how often an idle
	// primary's WAL is closed and archived (0: DefaultArchiveTimeout).
	ArchiveWAL     bool
	ArchiveTimeout time.Duration
	// ArchiveParallelism is how many files are uploaded at once: the one
	// the engine hands over and those it will hand over next (1: one at a
	// time).
	ArchiveParallelism int
	// LocalSocket is where the engine's archive and restore commands reach
	// the manager (empty: nowhere, and neither works).
	LocalSocket string
	// OpenStore opens the bucket of a backup or restore (default OpenS3).
	OpenStore func(api.S3Object) (ObjectStore, error)
	Log       *slog.Logger
}

// Manager runs one database instance: it acts on the topology it is given
// from one loop goroutine, supervises the engine process and serves status.
type Manager struct {
	opts   Options
	driver Driver
	source TopologySource
	log    *slog.Logger
	// managers calls the other managers of the database.
	managers *api.Client

	// reap is set when the manager is PID 1 and must collect orphans.
	reap bool
	// recorded is the state file's content as last written.
	recorded *stateFile
	// majorUpgradeFailed is when the last upgrade of the data to the
	// server's major version failed, with majorUpgradeErr (loop only).
	majorUpgradeFailed time.Time
	majorUpgradeErr    error

	// wake makes the loop reconcile at once (a restore was asked for).
	wake chan struct{}

	mu       sync.Mutex
	st       managerState
	stopping bool
	ops      operations
	// runCtx is Run's context: backups end with the manager.
	runCtx context.Context
	// probes shares the engine probes of status reads over HTTP.
	probes probeShare
	// metrics shares the reads of the engine's figures of /metrics scrapes.
	metrics metricsShare
	// archive is the WAL archive's state, under its own lock.
	archive walArchive
	// objects is the spec's databases and roles as last asked and
	// reconciled, under its own lock.
	objects objectsState
}

// managerState is the part of the status the loop owns.
type managerState struct {
	role     api.Role
	topology Topology
	child    *child
	restarts int
	lastExit string
	exitTime time.Time
	// problem is the last reconcile error, shown as the not-ready reason.
	problem string
	// fenced says why the instance, named primary, refuses writes;
	// fencedPos is where its last write ends once fencing completed, and
	// fencedChild the engine process it was fenced in (nil when fencing
	// stopped the engine).
	fenced      string
	fencedPos   *api.Position
	fencedChild *child
	// awaitingRestore tells that the instance, a primary with no data
	// started with --restore, waits for POST /v1/restore.
	awaitingRestore bool
	// parameters are the live parameters (Topology.Parameters) the engine
	// process parametersChild took; parametersError says why the last
	// ones asked for were refused.
	parameters      string
	parametersChild *child
	parametersError string
}

// NewManager returns a Manager of driver's engine, acting on the topologies
// source sends.
func NewManager(opts Options, driver Driver, source TopologySource) *Manager {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Manager{
		opts:     opts,
		driver:   driver,
		source:   source,
		log:      opts.Log,
		managers: &api.Client{Timeout: 3 * time.Second},
		st:       managerState{role: api.RoleWaiting},
		wake:     make(chan struct{}, 1),
		reap:     os.Getpid() == 1,
	}
}

// Run serves status and acts on the topology until ctx is done, then stops
// the engine cleanly. It returns nil when the engine stopped cleanly (or
// never ran).
func (m *Manager) Run(ctx context.Context) error {
	m.update(func(*managerState) { m.runCtx = ctx })
	srv, err := m.serve()
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if m.opts.MetricsAddress != "" && m.opts.Identity != nil {
		metrics, err := m.serveMetrics()
		if err != nil {
			return err
		}
		defer metrics.Close()
	}

	if ai, ok := m.driver.(AdminInterfaceServer); ok {
		admin, err := ai.ServeAdminInterface()
		if err != nil {
			return err
		}
		if admin != nil {
			defer admin.Close()
		}
	}
	go m.expireCredentials(ctx)
	if m.opts.LocalSocket != "" {
		local, err := m.serveLocal(m.opts.LocalSocket)
		if err != nil {
			return err
		}
		defer local.Close()
	}
	if wa, ok := m.driver.(WALArchiver); ok && m.opts.ArchiveWAL {
		go m.archiveHeartbeats(ctx, wa)
	}
	if ba, ok := m.driver.(BinlogArchiver); ok && m.opts.ArchiveWAL {
		go m.archiveBinlogs(ctx, ba)
	}

	topologies := m.source.Watch(ctx)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var (
		want      *Topology
		crashes   int       // consecutive unrequested exits
		restartAt time.Time // no engine start before this
	)
	for {
		var exited <-chan struct{}
		if c := m.child(); c != nil {
			exited = c.done
		}
		var restart <-chan time.Time
		if d := time.Until(restartAt); d > 0 {
			restart = time.After(d)
		}
		select {
		case <-ctx.Done():
			return m.shutdown()
		case t, ok := <-topologies:
			if !ok {
				topologies = nil
				continue
			}
			if want == nil || *want != t {
				m.log.Info("topology", "primary", t.Primary, "host", t.PrimaryHost, "port", t.PrimaryPort)
			}
			want = &t
		case <-exited:
			c := m.child()
			if m.restartRequested(c) {
				m.log.Info("engine exited to be restarted", "reason", c.exitReason())
				m.driver.Close()
				m.update(func(s *managerState) { s.child = nil })
				restartAt = time.Time{}
				break // reconcile now: it starts the engine again
			}
			if time.Since(c.started) > 30*time.Second {
				crashes = 0
			}
			crashes++
			restartAt = time.Now().Add(backoff(crashes))
			reason := c.exitReason()
			m.log.Error("engine exited on its own", "reason", reason, "restartIn", backoff(crashes).String())
			m.driver.Close()
			m.update(func(s *managerState) {
				s.child = nil
				s.restarts++
				s.lastExit = reason
				s.exitTime = time.Now()
			})
			continue
		case <-restart:
		case <-m.wake:
		case <-tick.C:
			if m.reap {
				pid := 0
				if c := m.child(); c != nil {
					pid = c.pid()
				}
				reapOrphans(pid)
			}
		}
		if want == nil {
			continue
		}
		err := m.reconcile(ctx, *want, restartAt)
		if err != nil && ctx.Err() == nil && !errors.Is(err, errBackoff) && !errors.Is(err, errAwaitingRestore) {
			m.log.Warn("reconcile", "err", err)
		}
		m.update(func(s *managerState) {
			s.problem = ""
			if err != nil {
				s.problem = err.Error()
			}
		})
	}
}

// restartRequested tells whether c exited asking to be started again.
func (m *Manager) restartRequested(c *child) bool {
	rr, ok := m.driver.(RestartRequester)
	if !ok {
		return false
	}
	var ee *exec.ExitError
	return errors.As(c.err, &ee) && ee.Exited() && rr.RestartRequested(ee.ExitCode())
}

func (m *Manager) child() *child {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.child
}

func (m *Manager) update(f func(*managerState)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(&m.st)
}

// errBackoff is the engine waiting out its restart backoff: expected, and
// shown in the status rather than logged on every tick.
var errBackoff = errors.New("engine restarts")

// ensureRunning starts the engine unless it runs or its restart backoff
// has not elapsed, and waits until it accepts the admin connection.
func (m *Manager) ensureRunning(ctx context.Context, restartAt time.Time) error {
	if c := m.child(); c != nil {
		return nil
	}
	if d := time.Until(restartAt); d > 0 {
		return fmt.Errorf("%w in %s", errBackoff, d.Round(100*time.Millisecond))
	}
	cmd, err := m.driver.Command()
	if err != nil {
		return err
	}
	c, err := startChild(cmd)
	if err != nil {
		return fmt.Errorf("start engine: %w", err)
	}
	m.log.Info("engine started", "pid", c.pid())
	m.update(func(s *managerState) { s.child = c })

	// Wait for the admin connection, but give up as soon as the engine dies.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-wctx.Done():
		}
	}()
	if err := m.driver.WaitReady(wctx); err != nil {
		return fmt.Errorf("engine not accepting connections: %w", err)
	}
	if u, ok := m.driver.(DataUpgrader); ok {
		if err := u.UpgradeData(wctx); err != nil {
			// The server does not go on with data half upgraded: stopped,
			// it counts as an exit (the restart backoff, the status's last
			// exit saying why), and the next start tries the upgrade again.
			err = fmt.Errorf("upgrading the data to the server's version: %w", err)
			c.stoppedFor = err.Error()
			c.signal(m.driver.StopSignal())
			return err
		}
	}
	return nil
}

// stopEngine stops a running engine cleanly (or kills it after the stop
// timeout) and reports whether it stopped cleanly.
func (m *Manager) stopEngine() bool {
	c := m.child()
	if c == nil {
		return true
	}
	m.log.Info("stopping engine", "pid", c.pid())
	start := time.Now()
	clean := c.stop(m.driver.StopSignal(), m.opts.StopTimeout)
	m.driver.Close()
	m.update(func(s *managerState) { s.child = nil })
	m.log.Info("engine stopped", "clean", clean, "seconds", time.Since(start).Seconds())
	return clean
}

func (m *Manager) shutdown() error {
	m.update(func(*managerState) { m.stopping = true })
	if !m.stopEngine() {
		return errors.New("the engine did not stop cleanly")
	}
	return nil
}

// Forward passes a signal other than the stop signals to the engine (SIGHUP
// makes both engines reload their configuration).
func (m *Manager) Forward(sig syscall.Signal) {
	if c := m.child(); c != nil {
		c.signal(sig)
	}
}

// ReloadTLS has a running engine read its renewed certificate, when its
// driver can without a restart; it logs what fails (the old certificate
// serves on until the next start).
func (m *Manager) ReloadTLS(ctx context.Context) {
	reloader, ok := m.driver.(TLSReloader)
	if !ok || m.child() == nil {
		return
	}
	if err := reloader.ReloadTLS(ctx); err != nil {
		m.log.Warn("the engine did not reload its renewed certificate; it serves the old one until it restarts", "err", err)
		return
	}
	m.log.Info("the engine reloaded its renewed certificate")
}
