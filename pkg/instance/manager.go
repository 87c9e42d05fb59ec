package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"
)

// Options configure a Manager.
type Options struct {
	// Name is the instance name; the topology's Primary is compared to it.
	Name string
	// Engine is the engine's name, for the status.
	Engine   string
	DataRoot string
	// StatusAddress is where the HTTP server listens (":8000").
	StatusAddress string
	// StopTimeout bounds the engine's clean shutdown before it is killed.
	StopTimeout time.Duration
	// MaxReadyLag and MaxReadyLagBytes bound a ready replica's lag.
	MaxReadyLag      time.Duration
	MaxReadyLagBytes int64
	// ReplicationPassword returns the password clone clients must present.
	ReplicationPassword func() (string, error)
	Log                 *slog.Logger
}

// Manager runs one database instance: it acts on the topology it is given
// from one loop goroutine, supervises the engine process and serves status.
type Manager struct {
	opts   Options
	eng    Engine
	source TopologySource
	log    *slog.Logger
	http   *http.Client

	// reap is set when the manager is PID 1 and must collect orphans.
	reap bool
	// recorded is the state file's content as last written.
	recorded *stateFile

	mu       sync.Mutex
	st       managerState
	stopping bool
}

// managerState is the part of the status the loop owns.
type managerState struct {
	role     Role
	topology Topology
	child    *child
	restarts int
	lastExit string
	exitTime time.Time
	// problem is the last reconcile error, shown as the not-ready reason.
	problem string
}

// NewManager returns a Manager for eng, acting on the topologies source sends.
func NewManager(opts Options, eng Engine, source TopologySource) *Manager {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Manager{
		opts:   opts,
		eng:    eng,
		source: source,
		log:    opts.Log,
		http:   &http.Client{Timeout: 3 * time.Second},
		st:     managerState{role: RoleWaiting},
		reap:   os.Getpid() == 1,
	}
}

// Run serves status and acts on the topology until ctx is done, then stops
// the engine cleanly. It returns nil when the engine stopped cleanly (or
// never ran).
func (m *Manager) Run(ctx context.Context) error {
	srv, err := m.serve()
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

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
			if time.Since(c.started) > 30*time.Second {
				crashes = 0
			}
			crashes++
			restartAt = time.Now().Add(backoff(crashes))
			reason := c.exitReason()
			m.log.Error("engine exited on its own", "reason", reason, "restartIn", backoff(crashes).String())
			m.eng.Close()
			m.update(func(s *managerState) {
				s.child = nil
				s.restarts++
				s.lastExit = reason
				s.exitTime = time.Now()
			})
			continue
		case <-restart:
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
		if err != nil && ctx.Err() == nil && !errors.Is(err, errBackoff) {
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

// reconcile moves the instance one step towards t; it is called on every
// tick and event and does nothing when the instance already is as t says.
func (m *Manager) reconcile(ctx context.Context, t Topology, restartAt time.Time) error {
	role := RoleReplica
	if t.Primary == m.opts.Name {
		role = RolePrimary
	}
	m.update(func(s *managerState) { s.role, s.topology = role, t })

	if role == RolePrimary {
		return m.reconcilePrimary(ctx, t, restartAt)
	}
	return m.reconcileReplica(ctx, t, restartAt)
}

func (m *Manager) reconcilePrimary(ctx context.Context, t Topology, restartAt time.Time) error {
	if m.child() == nil {
		has, err := m.eng.HasData()
		if err != nil {
			return err
		}
		if !has {
			// The controller names as primary only an instance whose data
			// it trusts; an empty one is a new database.
			m.log.Info("bootstrapping a new data set")
			if err := m.eng.Bootstrap(ctx); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
		}
	}
	// Recorded before the first write can happen, so a crash between
	// promotion and the record cannot hide that this data took writes.
	if err := m.recordState(stateFile{Role: RolePrimary, Primary: t.Primary}); err != nil {
		return err
	}
	if err := m.ensureRunning(ctx, restartAt); err != nil {
		return err
	}
	p, err := m.eng.Probe(ctx)
	if err != nil {
		return err
	}
	if !p.Writable {
		m.log.Info("promoting")
		if err := m.eng.Promote(ctx); err != nil {
			return fmt.Errorf("promote: %w", err)
		}
	}
	return nil
}

func (m *Manager) reconcileReplica(ctx context.Context, t Topology, restartAt time.Time) error {
	if m.child() == nil || m.servedAsPrimary() {
		if reason := m.cloneReason(ctx, t); reason != "" {
			if err := m.clone(ctx, t, reason); err != nil {
				return err
			}
		}
	}
	if err := m.recordState(stateFile{Role: RoleReplica, Primary: t.Primary}); err != nil {
		return err
	}
	if err := m.ensureRunning(ctx, restartAt); err != nil {
		return err
	}
	err := m.eng.Follow(ctx, t)
	if errors.Is(err, ErrMustReclone) {
		return m.clone(ctx, t, err.Error())
	}
	return err
}

// clone stops the engine and replaces its data with a clone of t's primary.
// The state file keeps saying primary (if it did) until the clone replaced
// the data: a failed clone must not leave old data looking safe.
func (m *Manager) clone(ctx context.Context, t Topology, why string) error {
	m.log.Info("cloning from the primary", "primary", t.Primary, "why", why)
	m.stopEngine()
	start := time.Now()
	if err := m.eng.Clone(ctx, t); err != nil {
		return fmt.Errorf("clone from %s: %w", t.Primary, err)
	}
	m.log.Info("cloned", "primary", t.Primary, "seconds", time.Since(start).Seconds())
	return nil
}

// recordState writes the state file when s differs from what it holds.
func (m *Manager) recordState(s stateFile) error {
	if m.recorded != nil && *m.recorded == s {
		return nil
	}
	if err := writeState(m.opts.DataRoot, s); err != nil {
		return err
	}
	m.recorded = &s
	return nil
}

// servedAsPrimary tells whether the data served as a primary: told to be a
// replica, such an instance stops and re-clones, because its data may hold
// writes the new primary lacks. Demotion with pg_rewind or GTID
// reconciliation is a later step; a fresh clone is always safe.
func (m *Manager) servedAsPrimary() bool {
	s, err := readState(m.opts.DataRoot)
	return err == nil && s.Role == RolePrimary
}

// cloneReason says why the data must be replaced by a clone of t's
// primary, or "" when it can be kept.
func (m *Manager) cloneReason(ctx context.Context, t Topology) string {
	has, err := m.eng.HasData()
	if err != nil || !has {
		return "no data"
	}
	if m.servedAsPrimary() {
		return "it served as primary and may have diverged"
	}
	local, err := m.eng.SystemID()
	if err != nil {
		return "unreadable data: " + err.Error()
	}
	remote, err := m.primarySystemID(ctx, t)
	if err != nil {
		// Keep the data: the primary may just be restarting, and
		// following it will tell once it is back.
		m.log.Warn("cannot read the primary's system identifier; keeping the data", "err", err)
		return ""
	}
	if remote != local {
		return fmt.Sprintf("data is of system %s, the primary's of %s", local, remote)
	}
	return ""
}

func (m *Manager) primarySystemID(ctx context.Context, t Topology) (string, error) {
	if t.PrimaryStatusURL == "" {
		return "", errors.New("topology has no primaryStatusURL")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.PrimaryStatusURL+"/v1/status", nil)
	if err != nil {
		return "", err
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var s Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return "", err
	}
	if s.Name != t.Primary || s.SystemIdentifier == "" {
		return "", fmt.Errorf("%s answers as %q with system identifier %q", t.PrimaryStatusURL, s.Name, s.SystemIdentifier)
	}
	return s.SystemIdentifier, nil
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
	cmd, err := m.eng.Command()
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
	if err := m.eng.WaitReady(wctx); err != nil {
		return fmt.Errorf("engine not accepting connections: %w", err)
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
	clean := c.stop(m.eng.StopSignal(), m.opts.StopTimeout)
	m.eng.Close()
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
