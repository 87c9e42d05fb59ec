package instance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/parameters"
	"github.com/mydb-dev/mydb/pkg/pki"
)

// serve starts the HTTP server: /healthz, /readyz, /v1/status, and
// /v1/clone for engines that clone through the manager.
func (m *Manager) serve() (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET "+api.PathReadyz, func(w http.ResponseWriter, r *http.Request) {
		// Open to anyone who reaches the pod, as the kubelet's probe must
		// be: answered from a probe result at most cachedProbeAge old.
		s := m.status(r.Context(), cachedProbeAge)
		if !s.Ready {
			http.Error(w, s.Reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// The controller reads every instance's status, a replica its
	// primary's: nobody else, so no one can tie up the probes.
	mux.HandleFunc("GET "+api.PathStatus, admit(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m.Status(r.Context()))
	}, pki.RoleController, pki.RoleInstance))
	// The controller only: each stream reads a probe at most
	// cachedProbeAge old, so any number of them costs the engine no more.
	mux.HandleFunc("GET "+api.PathHealth, admit(m.streamHealth, pki.RoleController))
	if cs, ok := m.driver.(CloneServer); ok {
		sem := make(chan struct{}, 1)
		// Only another instance of the database clones.
		mux.HandleFunc("GET "+api.PathClone, admit(func(w http.ResponseWriter, r *http.Request) {
			s := m.Status(r.Context())
			if s.Role != api.RolePrimary || !s.EngineRunning {
				http.Error(w, "not a running primary", http.StatusServiceUnavailable)
				return
			}
			// One backup at a time: a second replica waits for its turn.
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-r.Context().Done():
				return
			}
			m.log.Info("serving a clone", "client", r.RemoteAddr)
			cs.ServeClone(guardStalls(w, m.streamStall()), r)
		}, pki.RoleInstance))
	}
	m.handleBackups(mux)
	m.handleCredentials(mux)
	m.handleArchive(mux)
	m.handleObjects(mux)
	ln, err := net.Listen("tcp", m.opts.StatusAddress)
	if err != nil {
		return nil, fmt.Errorf("status server: %w", err)
	}
	// No write timeout: clones and backups stream for as long as they
	// take. A client that holds a connection without sending a request, or
	// sends one slowly, is dropped.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	srv.TLSConfig = m.opts.Identity.ServerConfig()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("status server", "err", err)
		}
	}()
	return srv, nil
}

// streamHealth sends the instance's health every api.HealthInterval until
// the client goes or the manager stops.
func (m *Manager) streamHealth(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The server's read deadline would end the request's context while
	// the stream runs; the write deadline bounds each line instead.
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	tick := time.NewTicker(api.HealthInterval)
	defer tick.Stop()
	for {
		_ = rc.SetWriteDeadline(time.Now().Add(api.HealthDeadline))
		if enc.Encode(api.HealthOf(m.status(r.Context(), cachedProbeAge))) != nil || rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-m.runContext().Done():
			return
		case <-tick.C:
		}
	}
}

// Status is the instance's current status; it probes the engine (or joins
// the probe in flight), so it is as fresh as the request.
func (m *Manager) Status(ctx context.Context) api.Status { return m.status(ctx, 0) }

// status is Status with an engine probe up to maxAge old.
func (m *Manager) status(ctx context.Context, maxAge time.Duration) api.Status {
	m.mu.Lock()
	st, stopping := m.st, m.stopping
	backup, restore := m.ops.backupOp(), m.ops.restoreOp()
	m.mu.Unlock()

	s := api.Status{
		Name:     m.opts.Name,
		PodUID:   m.opts.PodUID,
		Engine:   m.opts.Engine,
		Role:     st.role,
		Primary:  st.topology.Primary,
		Restarts: st.restarts,
		LastExit: st.lastExit,
		Backup:   backup,
		Restore:  restore,
	}
	if m.opts.ArchiveWAL {
		s.Archive = m.archive.snapshot()
	}
	if m.opts.Identity != nil {
		s.Certificates = m.opts.Identity.Report()
	}
	s.Objects = m.objects.snapshot()
	restoring := restore != nil && restore.Phase == api.OperationRunning
	s.AwaitingRestore = st.awaitingRestore && !restoring
	if !st.exitTime.IsZero() {
		t := st.exitTime.UTC()
		s.LastExitTime = &t
	}
	if id, err := m.driver.SystemID(); err == nil {
		s.SystemIdentifier = id
	}
	if st.child != nil && st.parametersChild == st.child {
		if s.ParametersError = st.parametersError; s.ParametersError == "" {
			s.Parameters = parameters.Hash(st.parameters)
		}
	}
	if st.child != nil {
		s.EngineRunning = true
		s.EnginePID = st.child.pid()
	}
	s.Ready, s.Reason = false, ""
	if st.fenced != "" {
		s.Fenced, s.FencedReason, s.FencedPosition = true, st.fenced, st.fencedPos
	}
	switch {
	case stopping:
		s.Reason = "shutting down"
		return s
	case st.fenced != "":
		s.Reason = "fenced: " + st.fenced
		if st.fencedPos == nil {
			s.Reason += " (fencing)"
			if st.problem != "" {
				s.Reason += ": " + st.problem
			}
		}
		return s
	case st.role == api.RoleWaiting:
		s.Reason = "waiting for a topology"
		return s
	case restoring && st.child == nil:
		s.Reason = fmt.Sprintf("restoring backup %s: %d of %d bytes loaded", restore.ID, restore.Bytes, restore.Size)
		return s
	case s.AwaitingRestore:
		s.Reason = errAwaitingRestore.Error()
		if restore != nil && restore.Phase == api.OperationFailed {
			s.Reason += "; restore " + restore.ID + " failed: " + restore.Message
		}
		return s
	case st.child == nil:
		s.Reason = "engine not running"
		if st.lastExit != "" {
			s.Reason += " (last exit: " + st.lastExit + ")"
		}
		if st.problem != "" {
			s.Reason += ": " + st.problem
		}
		return s
	}
	p, err := m.probes.read(ctx, maxAge, m.driver.Probe)
	if err != nil {
		s.Reason = "probe: " + err.Error()
		return s
	}
	if p.SystemIdentifier != "" {
		s.SystemIdentifier = p.SystemIdentifier
	}
	pos := p.Position
	s.ServerID, s.Position, s.Streaming, s.Upstream = p.ServerID, &pos, p.Streaming, p.Upstream
	s.LagBytes, s.LagSeconds = p.LagBytes, p.LagSeconds
	s.Synchronous, s.SyncReplicas = p.Synchronous, p.SyncReplicas
	s.Ready, s.Reason = m.readiness(st, p)
	return s
}

// readiness is ready only when the role's promise holds: a primary takes
// writes; a replica streams from the right primary within the lag bounds.
func (m *Manager) readiness(st managerState, p Probe) (bool, string) {
	if st.role == api.RolePrimary {
		if !p.Writable {
			return false, "primary not writable yet"
		}
		return true, "primary accepting writes"
	}
	want := net.JoinHostPort(st.topology.PrimaryHost, fmt.Sprint(st.topology.ReplicationPort()))
	switch {
	case p.Writable:
		return false, "replica is writable"
	case p.Upstream != want:
		return false, fmt.Sprintf("following %q, not %s", p.Upstream, want)
	case !p.Streaming:
		return false, "not streaming from " + want
	case p.LagBytes != nil && m.opts.MaxReadyLagBytes > 0 && *p.LagBytes > m.opts.MaxReadyLagBytes:
		return false, fmt.Sprintf("lag %d bytes exceeds %d", *p.LagBytes, m.opts.MaxReadyLagBytes)
	case p.LagSeconds != nil && m.opts.MaxReadyLag > 0 && *p.LagSeconds > m.opts.MaxReadyLag.Seconds():
		return false, fmt.Sprintf("lag %.1fs exceeds %s", *p.LagSeconds, m.opts.MaxReadyLag)
	}
	return true, "streaming from " + want
}
