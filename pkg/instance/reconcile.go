package instance

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/parameters"
)

// The decisions: what the instance must do to be what the topology says.

// reconcile moves the instance one step towards t; it is called on every
// tick and event and does nothing when the instance already is as t says.
func (m *Manager) reconcile(ctx context.Context, t Topology, restartAt time.Time) error {
	role := api.RoleReplica
	if t.Primary == m.opts.Name {
		role = api.RolePrimary
	}
	m.update(func(s *managerState) { s.role, s.topology = role, t })

	if why := t.fenceReason(m.opts.Name); why != "" {
		m.notAwaitingRestore("it is fenced: " + why)
		return m.fence(ctx, why, restartAt)
	}
	m.unfence(role)
	if role == api.RolePrimary {
		return m.reconcilePrimary(ctx, t, restartAt)
	}
	return m.reconcileReplica(ctx, t, restartAt)
}

func (m *Manager) reconcilePrimary(ctx context.Context, t Topology, restartAt time.Time) error {
	if m.child() == nil {
		has, err := m.driver.HasData()
		if err != nil {
			return err
		}
		if !has && m.opts.Restore {
			// The database starts from a backup: until one is loaded
			// completely there is no data to serve, and no bootstrap.
			if err := m.restoreOrAwait(ctx); err != nil {
				return err
			}
		} else if !has {
			// The controller names as primary only an instance whose data
			// it trusts; an empty one is a new database.
			m.log.Info("bootstrapping a new data set")
			if err := m.driver.Bootstrap(ctx); err != nil {
				return fmt.Errorf("bootstrap: %w", err)
			}
		}
	}
	// Recorded before the first write can happen, so a crash between
	// promotion and the record cannot hide that this data took writes.
	if err := m.recordState(stateFile{Role: api.RolePrimary, Primary: t.Primary}); err != nil {
		return err
	}
	if err := m.upgradeMajor(ctx); err != nil {
		return err
	}
	if err := m.ensureRunning(ctx, restartAt); err != nil {
		return err
	}
	p, err := m.driver.Probe(ctx)
	if err != nil {
		return err
	}
	// Synchronous replication is set before a promotion, not after: the
	// first commit the new primary takes must already wait for a replica
	// (the settings do nothing while the server is a replica).
	if s, ok := m.driver.(SyncReplicator); ok {
		if err := s.SetSynchronous(ctx, t.Synchronous); err != nil {
			return fmt.Errorf("synchronous replication %v: %w", t.Synchronous, err)
		}
	}
	m.applyParameters(ctx, t)
	if !p.Writable {
		m.log.Info("promoting")
		if err := m.driver.Promote(ctx); err != nil {
			return fmt.Errorf("promote: %w", err)
		}
	}
	return nil
}

// fence makes the primary refuse writes because another instance is to be
// the primary (or it cannot confirm it still is): the engine's Fence, after
// a clean stop when the engine fences by stopping. It stays fenced, and
// never promotes, until the topology says otherwise; its status reports the
// position of its last write, which the controller waits for the target to
// reach before it promotes it.
func (m *Manager) fence(ctx context.Context, why string, restartAt time.Time) error {
	m.mu.Lock()
	done := m.st.fencedPos != nil && m.st.fencedChild == m.st.child
	first := m.st.fenced == ""
	m.st.fenced = why
	m.mu.Unlock()
	if done {
		return nil
	}
	if first {
		m.log.Info("fencing: refusing writes", "why", why)
	}
	start := time.Now()
	if m.driver.FenceStops() {
		m.stopEngine()
	} else if err := m.ensureRunning(ctx, restartAt); err != nil {
		return err
	}
	pos, err := m.driver.Fence(ctx)
	if err != nil {
		return fmt.Errorf("fence: %w", err)
	}
	m.update(func(s *managerState) { s.fencedPos, s.fencedChild = &pos, s.child })
	m.log.Info("fenced", "why", why, "lastWrite", pos, "seconds", time.Since(start).Seconds())
	return nil
}

// unfence forgets a fence the topology no longer asks for: a primary takes
// writes again (reconcilePrimary restarts or promotes its engine), a
// replica follows the new primary (and re-clones, having served as one).
func (m *Manager) unfence(role api.Role) {
	m.mu.Lock()
	was := m.st.fenced
	m.st.fenced, m.st.fencedPos, m.st.fencedChild = "", nil, nil
	m.mu.Unlock()
	if was != "" {
		m.log.Info("fence lifted", "was", was, "role", role)
	}
}

func (m *Manager) reconcileReplica(ctx context.Context, t Topology, restartAt time.Time) error {
	m.notAwaitingRestore("it is a replica now, which clones from its primary")
	if m.child() == nil || m.servedAsPrimary() {
		if reason := m.cloneReason(ctx, t); reason != "" {
			if err := m.clone(ctx, t, reason); err != nil {
				return err
			}
		}
	}
	if err := m.recordState(stateFile{Role: api.RoleReplica, Primary: t.Primary}); err != nil {
		return err
	}
	if u, ok := m.driver.(MajorUpgrader); ok && m.child() == nil {
		old, err := u.OlderMajor()
		if err != nil {
			return err
		}
		if old != "" {
			return m.clone(ctx, t, fmt.Sprintf("the data is of major version %s, older than the server's: a replica is cloned again from the upgraded primary", old))
		}
	}
	if err := m.ensureRunning(ctx, restartAt); err != nil {
		return err
	}
	m.applyParameters(ctx, t)
	err := m.driver.Follow(ctx, t)
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
	if err := m.driver.Clone(ctx, t); err != nil {
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
	return err == nil && s.Role == api.RolePrimary
}

// cloneReason says why the data must be replaced by a clone of t's
// primary, or "" when it can be kept.
func (m *Manager) cloneReason(ctx context.Context, t Topology) string {
	has, err := m.driver.HasData()
	if err != nil || !has {
		return "no data"
	}
	if m.servedAsPrimary() {
		return "it served as primary and may have diverged"
	}
	local, err := m.driver.SystemID()
	if err != nil {
		return "unreadable data: " + err.Error()
	}
	remote, err := PrimarySystemID(ctx, m.managers, m.opts.Identity.Credentials(), t)
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

// PrimarySystemID asks t's primary's manager (GET /v1/status) which data
// set it serves, as the instance whose credentials creds are.
func PrimarySystemID(ctx context.Context, client *api.Client, creds *api.Credentials, t Topology) (string, error) {
	if t.PrimaryStatusURL == "" {
		return "", errors.New("topology has no primaryStatusURL")
	}
	u, err := url.Parse(t.PrimaryStatusURL)
	if err != nil {
		return "", fmt.Errorf("primaryStatusURL: %w", err)
	}
	s, err := client.Status(ctx, u.Host, api.Auth{Credentials: creds, Name: t.Primary})
	if err != nil {
		return "", err
	}
	if s.Name != t.Primary || s.SystemIdentifier == "" {
		return "", fmt.Errorf("%s answers as %q with system identifier %q", t.PrimaryStatusURL, s.Name, s.SystemIdentifier)
	}
	return s.SystemIdentifier, nil
}

// applyParameters gives the running engine the live parameters t names,
// once per engine process and whenever they change. A refusal is reported
// (status parametersError) and not tried again before they change or the
// engine restarts; it stops nothing else: the instance serves on with the
// values it had.
func (m *Manager) applyParameters(ctx context.Context, t Topology) {
	setter, ok := m.driver.(ParameterSetter)
	if !ok {
		return
	}
	m.mu.Lock()
	child, done := m.st.child, m.st.parameters == t.Parameters && m.st.parametersChild == m.st.child
	m.mu.Unlock()
	if child == nil || done {
		return
	}
	err := setter.SetParameters(ctx, parameters.Decode(t.Parameters))
	m.update(func(s *managerState) {
		s.parameters, s.parametersChild, s.parametersError = t.Parameters, child, ""
		if err != nil {
			s.parametersError = err.Error()
		}
	})
	if err != nil {
		m.log.Warn("engine parameters refused", "parameters", parameters.Hash(t.Parameters), "err", err)
		return
	}
	m.log.Info("engine parameters applied", "parameters", parameters.Hash(t.Parameters))
}

// majorUpgradeRetry is how long a failed major upgrade waits before it is
// tried again (each try runs initdb and pg_upgrade).
const majorUpgradeRetry = 30 * time.Second

// upgradeMajor upgrades a stopped primary's data of an older major version
// before the server starts on it.
func (m *Manager) upgradeMajor(ctx context.Context) error {
	u, ok := m.driver.(MajorUpgrader)
	if !ok || m.child() != nil {
		return nil
	}
	old, err := u.OlderMajor()
	if err != nil || old == "" {
		return err
	}
	if wait := time.Until(m.majorUpgradeFailed.Add(majorUpgradeRetry)); wait > 0 {
		return fmt.Errorf("%w: the upgrade of the data of major version %s failed; next try in %s: %s", errBackoff, old, wait.Round(time.Second), m.majorUpgradeErr)
	}
	m.log.Info("upgrading the data to the server's major version", "from", old)
	start := time.Now()
	if err := u.UpgradeMajor(ctx); err != nil {
		m.majorUpgradeFailed, m.majorUpgradeErr = time.Now(), err
		m.log.Error("the upgrade of the data failed; the data is the old major's still", "from", old, "err", err)
		return fmt.Errorf("upgrading the data of major version %s: %w", old, err)
	}
	m.majorUpgradeFailed, m.majorUpgradeErr = time.Time{}, nil
	m.log.Info("upgraded the data to the server's major version", "from", old, "seconds", time.Since(start).Seconds())
	return nil
}
