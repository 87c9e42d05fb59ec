package mysqlfamily

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

const (
	// CompleteMarker is written last into a bootstrapped or cloned data
	// directory before it is renamed into place.
	CompleteMarker = "mydb-complete"
	// SystemIDFile holds the identifier of the data set's lineage, made at
	// bootstrap and carried to clones.
	SystemIDFile = "mydb-system-id"
)

// Server is the lifecycle MariaDB and MySQL share around their Dialect:
// the data directory's markers, the admin connection over the unix socket,
// following a primary, promotion and the probe. The drivers add bootstrap,
// clone and the server's command line.
type Server struct {
	Cfg     instance.DriverConfig
	Dialect Dialect
	// DataDir is the server's datadir, one level below the volume's root.
	DataDir string
	// Open opens the admin connection (OpenAdmin on the socket, or a fake).
	Open func() (Conn, error)
	// PrepareFollow, when set, runs on the fenced server before its
	// replication is read (MariaDB adopts a fresh clone's GTID position).
	PrepareFollow func(ctx context.Context, c Conn) error
	// ApplyTimeout bounds Promote's wait for the relay log (default 30s).
	ApplyTimeout time.Duration
	// RecloneGrace is how long a source's "cannot serve" (1236) must last
	// before the replica re-clones (default ApplyTimeout): a replica that
	// follows a newly promoted primary at once asks for GTIDs that primary
	// may still be applying from its relay log, and it answers 1236 until
	// it has.
	RecloneGrace time.Duration
	// Now is the clock of RecloneGrace (time.Now when nil).
	Now func() time.Time

	mu   sync.Mutex
	conn Conn
	// cannotServe is since when the source at cannotServeFrom answered
	// that it cannot serve what the replica asks for.
	cannotServe     time.Time
	cannotServeFrom string
	// parameters are those SetParameters gave this server process.
	parameters map[string]string
}

// HasData implements instance.Driver.
func (s *Server) HasData() (bool, error) {
	_, err := os.Stat(filepath.Join(s.DataDir, CompleteMarker))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// SystemID implements instance.Driver.
func (s *Server) SystemID() (string, error) {
	b, err := os.ReadFile(filepath.Join(s.DataDir, SystemIDFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Complete writes the system identifier, extra files and the completion
// marker (last) into a scratch data directory and renames it into place.
func (s *Server) Complete(scratch, systemID string, extra map[string]string) error {
	files := map[string]string{SystemIDFile: systemID}
	for k, v := range extra {
		files[k] = v
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(scratch, name), []byte(content+"\n"), 0o600); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(scratch, CompleteMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		return err
	}
	return instance.ReplaceDir(scratch, s.DataDir)
}

// BootstrapWith creates a new data set unless a complete one exists:
// build fills scratch (<data>.bootstrap, leftovers of an interrupted
// attempt removed) with an initialized data directory and runs the user
// statements on it; then a fresh random system identifier, the marker and
// the rename into place.
func (s *Server) BootstrapWith(ctx context.Context, build func(ctx context.Context, scratch string, users []string) error) error {
	if has, err := s.HasData(); err != nil || has {
		return err
	}
	users, err := s.UserStatements()
	if err != nil {
		return err
	}
	scratch := s.DataDir + ".bootstrap"
	if err := os.RemoveAll(scratch); err != nil {
		return err
	}
	if err := build(ctx, scratch, users); err != nil {
		return err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	return s.Complete(scratch, hex.EncodeToString(id), nil)
}

// Statements is a temporary server's work that runs stmts, an error
// naming what.
func Statements(what string, stmts ...string) func(context.Context, Conn) error {
	return func(ctx context.Context, c Conn) error {
		if err := c.Exec(ctx, stmts...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}

// UserStatements are the dialect's statements creating the application's
// database and user and the replication user, from the Secret.
func (s *Server) UserStatements() ([]string, error) {
	a, repl, err := s.Credentials()
	if err != nil {
		return nil, err
	}
	return s.Dialect.UserStatements(a, repl), nil
}

// Credentials are the application's and the replication user's from the
// Secret.
func (s *Server) Credentials() (a App, replicationPassword string, err error) {
	if a.User, err = s.Cfg.Secrets.Get(instance.SecretUsername); err != nil {
		return a, "", err
	}
	if a.Password, err = s.Cfg.Secrets.Get(instance.SecretPassword); err != nil {
		return a, "", err
	}
	if a.Database, err = s.Cfg.Secrets.Get(instance.SecretDatabase); err != nil {
		return a, "", err
	}
	switch a.User {
	case "root", "mysql", "mariadb.sys", "mysql.sys", "mysql.session", "mysql.infoschema", api.ReplicationUser:
		return a, "", fmt.Errorf("the application user may not be %q", a.User)
	}
	repl, err := s.Cfg.Secrets.Get(instance.SecretReplicationPassword)
	return a, repl, err
}

// Admin is the admin connection, opened on first use.
func (s *Server) Admin() (Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		return s.conn, nil
	}
	c, err := s.Open()
	if err != nil {
		return nil, err
	}
	s.conn = c
	return c, nil
}

// WaitReady implements instance.Driver.
func (s *Server) WaitReady(ctx context.Context) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	return instance.PollUntil(ctx, 100*time.Millisecond, func() error { return c.Ping(ctx) })
}

// Close implements instance.Driver.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	s.parameters = nil
}

func (s *Server) replicaStatus(ctx context.Context, c Conn) (ReplicaStatus, error) {
	row, err := c.QueryRow(ctx, s.Dialect.ReplicaStatusQuery())
	if err != nil {
		return ReplicaStatus{}, err
	}
	return s.Dialect.ParseReplicaStatus(row), nil
}

// Follow implements instance.Driver: fence writes, and unless the server
// already replicates from t's primary, point it there with GTID
// positioning. A source that purged what the replica needs means a re-clone.
func (s *Server) Follow(ctx context.Context, t instance.Topology) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	st, err := c.QueryRow(ctx, s.Dialect.StateQuery())
	if err != nil {
		return err
	}
	if st["fenced"] != "1" {
		if err := c.Exec(ctx, s.Dialect.FenceStatements()...); err != nil {
			return err
		}
	}
	if s.PrepareFollow != nil {
		if err := s.PrepareFollow(ctx, c); err != nil {
			return err
		}
	}
	rs, err := s.replicaStatus(ctx, c)
	if err != nil {
		return err
	}
	if rs.IORunning == "No" && s.Dialect.MustReclone(rs.IOErrno) && rs.Host == t.PrimaryHost && rs.Port == t.ReplicationPort() {
		since := s.cannotServeSince(net.JoinHostPort(t.PrimaryHost, strconv.Itoa(t.ReplicationPort())))
		if s.now().Sub(since) >= s.recloneGrace() {
			return fmt.Errorf("%w: %s", instance.ErrMustReclone, rs.LastError)
		}
		s.Cfg.Log.Info("the primary cannot serve the replica's position yet; retrying before a re-clone",
			"since", since, "grace", s.recloneGrace(), "lastError", rs.LastError)
	} else {
		s.cannotServeSince("")
	}
	if rs.Host == t.PrimaryHost && rs.Port == t.ReplicationPort() && rs.User == api.ReplicationUser && rs.IORunning != "No" && rs.SQLRunning == "Yes" {
		return nil
	}
	pw, err := s.Cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	if rs.Configured && (rs.Host != t.PrimaryHost || rs.Port != t.ReplicationPort()) && rs.SQLRunning == "Yes" {
		// Re-pointing discards the relay log, and GTID positioning asks the
		// new source for what follows the GTIDs applied: apply what was
		// received first, or the replica asks for history the new primary
		// may no longer have in its binlog (a clone's binlog starts at the
		// clone), and events a Sync primary acknowledged on the strength
		// of this relay log would be fetched again at best.
		if err := s.applyRelayLog(ctx, c); err != nil {
			return err
		}
	}
	s.Cfg.Log.Info("pointing the replica at the primary", "primary", t.Primary, "host", t.PrimaryHost, "port", t.ReplicationPort(), "wasFollowing", rs.Host, "lastError", rs.LastError)
	src := Source{Host: t.PrimaryHost, Port: t.ReplicationPort(), User: api.ReplicationUser, Password: pw, CAFile: s.CAFile()}
	if t.PrimaryAdminPort > 0 && src.CAFile != "" {
		src.ClientCertFile, src.ClientKeyFile = s.Cfg.TLS.InstanceCertFile, s.Cfg.TLS.InstanceKeyFile
	}
	return c.Exec(ctx, s.Dialect.FollowStatements(src)...)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Server) recloneGrace() time.Duration {
	switch {
	case s.RecloneGrace > 0:
		return s.RecloneGrace
	case s.ApplyTimeout > 0:
		return s.ApplyTimeout
	}
	return 30 * time.Second
}

// cannotServeSince records that source cannot serve the replica ("": the
// replica streams) and returns since when it has not.
func (s *Server) cannotServeSince(source string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if source == "" {
		s.cannotServeFrom, s.cannotServe = "", time.Time{}
		return time.Time{}
	}
	if s.cannotServeFrom != source {
		s.cannotServeFrom, s.cannotServe = source, s.now()
	}
	return s.cannotServe
}

// Promote implements instance.Driver: let the SQL thread apply what the IO
// thread already received (bounded), then stop replicating and take writes.
//
// A Sync database's new primary has semi-synchronous waits on already
// (its first client commit must wait for a replica), but the commits its
// SQL thread applies meanwhile must not wait: written to its binlog, they
// would wait for an acknowledgement that a replica already holding them
// (it streamed from the old primary further than this one applied) never
// sends, and the promotion would stall for the applier's whole bound. They
// were acknowledged on the old primary, or never to a client; so the waits
// are off while the relay log is applied and on again before read_only
// goes off.
func (s *Server) Promote(ctx context.Context) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	rs, err := s.replicaStatus(ctx, c)
	if err != nil {
		return err
	}
	if rs.Configured {
		sy, err := c.QueryRow(ctx, s.Dialect.SyncQuery())
		if err != nil {
			return err
		}
		waits := sy["enabled"] == "1"
		if waits {
			if err := c.Exec(ctx, s.Dialect.SyncStatements(false)...); err != nil {
				return err
			}
		}
		applyErr := s.applyRelayLog(ctx, c)
		if waits {
			// On again before any client may commit, whatever the apply
			// did: a failure leaves the server read-only, and waiting.
			if err := c.Exec(ctx, s.Dialect.SyncStatements(true)...); err != nil {
				return errors.Join(applyErr, err)
			}
		}
		if applyErr != nil {
			return applyErr
		}
	}
	return c.Exec(ctx, s.Dialect.PromoteStatements()...)
}

// applyRelayLog stops receiving and lets the SQL thread apply what the IO
// thread already received, for at most ApplyTimeout (default 30s): past
// it, it goes on with a warning, as a stuck applier must not block a
// promotion or a re-point for ever.
func (s *Server) applyRelayLog(ctx context.Context, c Conn) error {
	if err := c.Exec(ctx, s.Dialect.StopIOThreadStatement()); err != nil {
		return err
	}
	bound := s.ApplyTimeout
	if bound == 0 {
		bound = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err := instance.PollUntil(wctx, 100*time.Millisecond, func() error {
		rs, err := s.replicaStatus(wctx, c)
		if err != nil {
			return err
		}
		if !rs.AppliedAll && rs.SQLRunning == "Yes" {
			return fmt.Errorf("relay log not applied yet")
		}
		return nil
	})
	if err != nil {
		s.Cfg.Log.Warn("going on before the relay log is applied", "err", err)
	}
	return nil
}

// Probe implements instance.Driver.
func (s *Server) Probe(ctx context.Context) (instance.Probe, error) {
	var p instance.Probe
	c, err := s.Admin()
	if err != nil {
		return p, err
	}
	st, err := c.QueryRow(ctx, s.Dialect.StateQuery())
	if err != nil {
		return p, err
	}
	if st == nil {
		return p, errors.New("the state query returned no row")
	}
	p.Writable = st["writable"] == "1"
	id, _ := strconv.ParseUint(st["server_id"], 10, 32)
	p.ServerID = uint32(id)
	p.SystemIdentifier, _ = s.SystemID()
	p.Position.GTID = st["gtid"]
	rs, err := s.replicaStatus(ctx, c)
	if err != nil {
		return p, err
	}
	if rs.Configured {
		// What the replica applied, and further what its relay log holds:
		// a semi-synchronous primary acknowledged a commit once some
		// replica's relay log had it, and Promote applies the relay log
		// before the replica takes writes, so a failover compares this.
		p.Position.GTID = api.MergeGTIDs(st["replica_gtid"], rs.Received)
		p.Streaming = rs.Streaming()
		p.Upstream = net.JoinHostPort(rs.Host, strconv.Itoa(rs.Port))
		p.LagSeconds = rs.SecondsBehind
	}
	if p.Writable {
		sy, err := c.QueryRow(ctx, s.Dialect.SyncQuery())
		if err != nil {
			return p, err
		}
		p.Synchronous = sy["sync"] == "1"
		p.SyncReplicas, _ = strconv.Atoi(sy["sync_replicas"])
	}
	return p, nil
}

var _ instance.SyncReplicator = (*Server)(nil)

// SetSynchronous implements instance.SyncReplicator: the dialect's
// semi-synchronous source settings, when they differ. Turning it off
// releases the commits that wait for a replica.
func (s *Server) SetSynchronous(ctx context.Context, on bool) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	sy, err := c.QueryRow(ctx, s.Dialect.SyncQuery())
	if err != nil {
		return err
	}
	if on && sy["sync"] == "1" || !on && sy["enabled"] == "0" {
		return nil
	}
	s.Cfg.Log.Info("semi-synchronous replication", "on", on)
	return c.Exec(ctx, s.Dialect.SyncStatements(on)...)
}

// CAFile is the CA replicas and clones verify their source with, when the
// instance has a certificate: the database's, whatever the engines serve
// clients.
func (s *Server) CAFile() string {
	if !s.Cfg.TLSEnabled() {
		return ""
	}
	return s.Cfg.TLS.DatabaseCAFile
}

// ReloadTLS implements instance.TLSReloader.
func (s *Server) ReloadTLS(ctx context.Context) error {
	c, err := s.Admin()
	if err != nil {
		return err
	}
	return c.Exec(ctx, s.Dialect.ReloadTLSStatement())
}
