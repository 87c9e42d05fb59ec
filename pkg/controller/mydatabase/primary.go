package mydatabase

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Moving the primary role: switchover (asked for through POST .../switchover,
// which sets status.targetPrimary) and failover (decided here when the
// primary stays unready for spec.failoverDelay). Every decision is one
// status write with the resourceVersion the decision was made from, so two
// mydb replicas, or a leader that paused and resumed with a stale cache,
// cannot both decide: the loser's write conflicts, and it re-reads.

// Condition reasons and Event reasons of primary changes.
const (
	ReasonSwitchoverInProgress = "SwitchoverInProgress"
	ReasonSwitchoverCompleted  = "SwitchoverCompleted"
	ReasonSwitchoverAborted    = "SwitchoverAborted"
	ReasonFailoverCompleted    = "FailoverCompleted"
	ReasonFailoverImpossible   = "FailoverImpossible"
	ReasonPrimaryStable        = "PrimaryStable"
	// ReasonFailoverWouldLoseWrites: with Sync replication, a replica that
	// cannot take over (lost with the primary) last reported a position
	// beyond every one that can; the failover waits for it, or for an
	// operator's allowWriteLoss.
	ReasonFailoverWouldLoseWrites = examplev1.ReasonFailoverWouldLoseWrites
	// ReasonFailoverForced: an operator forced a held-back failover.
	ReasonFailoverForced = "FailoverForced"
)

// DefaultSwitchoverTimeout bounds a switchover: when the old primary has not
// fenced, or the target has not caught up with it, by then, the switchover
// is given up and the old primary takes writes again.
const DefaultSwitchoverTimeout = 60 * time.Second

// switchoverPoll is how soon a database is read again while a switchover
// is under way: writes are down until it completes.
const switchoverPoll = 200 * time.Millisecond

// primaryDecision is a change of status.currentPrimary / targetPrimary the
// controller decided, with what to say about it once it is written.
type primaryDecision struct {
	current, target, reason string
	condition               metav1.Condition
	eventType, eventReason  string
	message                 string
	// kind and result label the metrics; duration is the incident's.
	kind, result string
	duration     time.Duration
	// stale are the instances whose position was only carried over from
	// an earlier poll: reported relative to the old primary, it is dropped
	// when the primary changes.
	stale []string
}

// apply writes the decision into status.
func (d *primaryDecision) apply(s *examplev1.MyDatabaseStatus, now metav1.Time) {
	if d.current != s.CurrentPrimary {
		s.CurrentPrimary = d.current
		for i := range s.Instances {
			s.Instances[i].Role = examplev1.InstanceRoleReplica
			if s.Instances[i].Name == d.current {
				s.Instances[i].Role = examplev1.InstanceRolePrimary
			}
			if slices.Contains(d.stale, s.Instances[i].Name) {
				s.Instances[i].Position = nil
			}
		}
	}
	if d.target != s.TargetPrimary {
		at := metav1.NewMicroTime(now.Time)
		s.TargetPrimary, s.TargetPrimaryReason, s.TargetPrimaryTime = d.target, d.reason, &at
	}
	meta.SetStatusCondition(&s.Conditions, d.condition)
}

// unreadyTracker remembers since when each database's primary has been
// unready, as this controller saw it. It is in memory on purpose: a new
// leader starts counting anew, which can only delay a failover, and the
// status precondition keeps it from deciding a second one.
type unreadyTracker struct {
	mu    sync.Mutex
	since map[types.UID]unreadyPrimary
}

type unreadyPrimary struct {
	name  string
	since time.Time
	said  string // the reason of the Warning last written for this incident
}

// observe records whether primary is ready and returns since when it has
// been unready (zero when it is ready).
func (u *unreadyTracker) observe(db types.UID, primary string, ready bool, now time.Time) *unreadyPrimary {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.since == nil {
		u.since = map[types.UID]unreadyPrimary{}
	}
	if ready {
		delete(u.since, db)
		return nil
	}
	p, ok := u.since[db]
	if !ok || p.name != primary {
		p = unreadyPrimary{name: primary, since: now}
		u.since[db] = p
	}
	return &p
}

// say tells whether the Warning reason is news for this incident, and
// remembers it was said.
func (u *unreadyTracker) say(db types.UID, reason string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	p, ok := u.since[db]
	if !ok || p.said == reason {
		return false
	}
	p.said = reason
	u.since[db] = p
	return true
}

func (u *unreadyTracker) forget(db types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.since, db)
}

// failoverDelay is db's spec.failoverDelay or its default.
func failoverDelay(db *examplev1.MyDatabase) time.Duration {
	if d := db.Spec.FailoverDelay; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return examplev1.DefaultFailoverDelay
}

// syncReplication tells whether db acknowledges a commit only once a
// replica has it.
func syncReplication(db *examplev1.MyDatabase) bool {
	return db.Spec.Replication != nil && db.Spec.Replication.Mode == examplev1.ReplicationModeSync
}

// decidePrimary is the state machine of the primary role, from the status
// as stored and what the instance managers just reported (reports[i] is
// instances[i]'s, nil when it did not answer; instances[i].Position is
// the last position it reported, carried over while it does not answer).
// It returns the decision to write, if any, and how soon to look again
// (0: the poll interval).
func (c *Controller) decidePrimary(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, reports []*api.Status, now time.Time) (*primaryDecision, time.Duration) {
	d, soon := c.decidePrimaryRole(db, instances, reports, now)
	if d != nil && d.current != db.Status.CurrentPrimary {
		for i, in := range instances {
			if i >= len(reports) || reports[i] == nil || reports[i].Position == nil {
				d.stale = append(d.stale, in.Name)
			}
		}
	}
	return d, soon
}

func (c *Controller) decidePrimaryRole(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, reports []*api.Status, now time.Time) (*primaryDecision, time.Duration) {
	s := db.Status
	if s.CurrentPrimary == "" {
		return nil, 0
	}
	report := func(name string) (*examplev1.InstanceStatus, *api.Status) {
		for i := range instances {
			if instances[i].Name == name {
				if i < len(reports) {
					return &instances[i], reports[i]
				}
				return &instances[i], nil
			}
		}
		return nil, nil
	}
	condition := func(status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: examplev1.ConditionPrimaryChange, Status: status, Reason: reason, Message: message,
			ObservedGeneration: db.Generation, LastTransitionTime: metav1.NewTime(now)}
	}

	if s.TargetPrimary != "" && s.TargetPrimary != s.CurrentPrimary {
		c.unready.forget(db.UID)
		return c.decideSwitchover(db, instances, reports, report, condition, now)
	}

	// No switchover under way: watch the primary for a failover.
	in, r := report(s.CurrentPrimary)
	ready := in != nil && in.Ready || c.promoting(s, r, now)
	p := c.unready.observe(db.UID, s.CurrentPrimary, ready, now)
	if p == nil {
		return nil, 0
	}
	delay := failoverDelay(db)
	if down := now.Sub(p.since); down < delay {
		return nil, min(delay-down, c.config.PollInterval)
	}
	candidate, pos := mostAdvancedReplica(s.CurrentPrimary, instances, reports)
	if candidate == "" {
		if c.unready.say(db.UID, ReasonFailoverImpossible) {
			c.recorder.Eventf(db, corev1.EventTypeWarning, ReasonFailoverImpossible,
				"Primary %s has been unready for %s, but no replica can take over (none runs, follows it and reports a position)",
				s.CurrentPrimary, now.Sub(p.since).Round(time.Second))
		}
		return nil, 0
	}
	if syncReplication(db) {
		if holder, why, at := aheadOfCandidate(s.CurrentPrimary, candidate, *pos, instances, reports); holder != "" {
			// Every acknowledged commit is on some replica; the one that
			// may have the last ones cannot take over, so promoting the
			// candidate could lose them. Wait, and say how to force it.
			msg := fmt.Sprintf("failover from %s held back: the most advanced replica that can take over, %s, is at %s, "+
				"but %s (%s) last reported %s, and with Sync replication it may hold acknowledged writes %s lacks; "+
				"mydb waits for %s to come back, or for an operator to accept losing those writes "+
				"(kubectl mydb switchover %s --to %s --allow-write-loss)",
				s.CurrentPrimary, candidate, positionString(pos), holder, why, positionString(at), candidate, holder, db.Name, candidate)
			if c.unready.say(db.UID, ReasonFailoverWouldLoseWrites) {
				c.recorder.Event(db, corev1.EventTypeWarning, ReasonFailoverWouldLoseWrites, msg)
			}
			return &primaryDecision{current: s.CurrentPrimary, target: s.TargetPrimary, reason: s.TargetPrimaryReason,
				condition: condition(metav1.ConditionTrue, ReasonFailoverWouldLoseWrites, msg)}, 0
		}
	}
	down := now.Sub(p.since)
	msg := fmt.Sprintf("failover from %s to %s (position %s): the primary was unready for %s (failoverDelay %s)",
		s.CurrentPrimary, candidate, positionString(pos), down.Round(100*time.Millisecond), delay)
	return &primaryDecision{
		current: candidate, target: candidate, reason: examplev1.TargetPrimaryReasonFailover,
		condition: condition(metav1.ConditionFalse, ReasonFailoverCompleted, msg),
		eventType: corev1.EventTypeWarning, eventReason: ReasonFailoverCompleted, message: msg,
		kind: "failover", result: "completed", duration: down,
	}, 0
}

func (c *Controller) decideSwitchover(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, reports []*api.Status,
	report func(string) (*examplev1.InstanceStatus, *api.Status),
	condition func(metav1.ConditionStatus, string, string) metav1.Condition, now time.Time) (*primaryDecision, time.Duration) {
	s := db.Status
	old, target := s.CurrentPrimary, s.TargetPrimary
	started := now
	if s.TargetPrimaryTime != nil {
		started = s.TargetPrimaryTime.Time
	}
	elapsed := now.Sub(started)

	_, oldReport := report(old)
	_, targetReport := report(target)
	forced := s.TargetPrimaryReason == examplev1.TargetPrimaryReasonForcedFailover
	kind, what := "switchover", "switchover"
	if forced {
		kind, what = "failover", "forced failover"
	}
	var waiting string
	switch {
	case forced:
		// The operator accepted the loss: the target needs only to run as
		// a replica; the old primary fences when it sees the target.
		if targetReport == nil || targetReport.Role != api.RoleReplica || !targetReport.EngineRunning || targetReport.Position == nil {
			waiting = fmt.Sprintf("the target %s is not a running replica", target)
		}
	case oldReport == nil:
		waiting = fmt.Sprintf("the old primary %s does not answer", old)
	case !oldReport.Fenced || oldReport.FencedPosition == nil:
		waiting = fmt.Sprintf("the old primary %s has not fenced yet", old)
	case targetReport == nil:
		waiting = fmt.Sprintf("the target %s does not answer", target)
	case targetReport.Role != api.RoleReplica || targetReport.Primary != old || !targetReport.EngineRunning || targetReport.Position == nil:
		waiting = fmt.Sprintf("the target %s is not a running replica of %s", target, old)
	case !targetReport.Position.Reached(*oldReport.FencedPosition):
		waiting = fmt.Sprintf("the target %s is at %s, the old primary's last write at %s",
			target, positionString(targetReport.Position), positionString(oldReport.FencedPosition))
	case syncReplication(db) && db.Spec.Engine != examplev1.EnginePostgres:
		// A MySQL-family replica behind the start of the target's binlog
		// (a target cloned since that replica's position) cannot follow
		// it and needs a clone, and a clone waits (BACKUP STAGE
		// BLOCK_COMMIT) behind the commits that wait for a replica: with
		// the old primary cloning too, no replica would ever acknowledge.
		// So every ready replica first reaches the old primary's last
		// write, which the target's binlog holds.
		for i, in := range instances {
			r := reportOf(i, reports)
			if in.Name == old || in.Name == target || !in.Ready || r == nil || r.Position == nil {
				continue
			}
			if !r.Position.Reached(*oldReport.FencedPosition) {
				waiting = fmt.Sprintf("the replica %s is at %s, the old primary's last write at %s (with Sync replication every ready replica catches up first)",
					in.Name, positionString(r.Position), positionString(oldReport.FencedPosition))
				break
			}
		}
	}
	if waiting == "" && forced {
		msg := fmt.Sprintf("forced failover from %s to %s (position %s), allowWriteLoss: acknowledged writes that only a lost replica had are lost",
			old, target, positionString(targetReport.Position))
		return &primaryDecision{
			current: target, target: target, reason: s.TargetPrimaryReason,
			condition: condition(metav1.ConditionFalse, ReasonFailoverForced, msg),
			eventType: corev1.EventTypeWarning, eventReason: ReasonFailoverForced, message: msg,
			kind: kind, result: "forced", duration: elapsed,
		}, 0
	}
	if waiting == "" {
		msg := fmt.Sprintf("switchover from %s to %s in %s: %s has every write of %s (up to %s)",
			old, target, elapsed.Round(time.Millisecond), target, old, positionString(oldReport.FencedPosition))
		return &primaryDecision{
			current: target, target: target, reason: s.TargetPrimaryReason,
			condition: condition(metav1.ConditionFalse, ReasonSwitchoverCompleted, msg),
			eventType: corev1.EventTypeNormal, eventReason: ReasonSwitchoverCompleted, message: msg,
			kind: "switchover", result: "completed", duration: elapsed,
		}, 0
	}
	if elapsed >= c.switchoverTimeout() {
		msg := fmt.Sprintf("%s from %s to %s given up after %s: %s; %s is the primary again",
			what, old, target, elapsed.Round(time.Millisecond), waiting, old)
		return &primaryDecision{
			current: old, target: old, reason: s.TargetPrimaryReason,
			condition: condition(metav1.ConditionFalse, ReasonSwitchoverAborted, msg),
			eventType: corev1.EventTypeWarning, eventReason: ReasonSwitchoverAborted, message: msg,
			kind: kind, result: "aborted", duration: elapsed,
		}, 0
	}
	// Still under way: say so in the condition (written with the rest of the
	// status) and look again soon.
	msg := fmt.Sprintf("%s from %s to %s under way: waiting because %s", what, old, target, waiting)
	cond := condition(metav1.ConditionTrue, ReasonSwitchoverInProgress, msg)
	return &primaryDecision{current: old, target: target, reason: s.TargetPrimaryReason, condition: cond}, switchoverPoll
}

// promoting tells whether the current primary, named a moment ago (within
// the switchover timeout of status.targetPrimaryTime), is still becoming
// one: its manager answers, acts as this primary, runs its engine and
// probes it, and only the engine does not take writes yet (a MySQL-family
// replica applies its relay log first, which under load takes seconds).
// Such a primary is not lost: failing it over would only move the primary
// again, to a replica that has less.
func (c *Controller) promoting(s examplev1.MyDatabaseStatus, r *api.Status, now time.Time) bool {
	return r != nil && r.Role == api.RolePrimary && r.Primary == s.CurrentPrimary && r.EngineRunning && !r.Fenced &&
		r.Position != nil && s.TargetPrimaryTime != nil && now.Sub(s.TargetPrimaryTime.Time) < c.switchoverTimeout()
}

func (c *Controller) switchoverTimeout() time.Duration {
	if c.config.SwitchoverTimeout > 0 {
		return c.config.SwitchoverTimeout
	}
	return DefaultSwitchoverTimeout
}

// mostAdvancedReplica is the replica a failover promotes: of those whose
// manager answers, run their engine and follow primary, the one with the
// most advanced position; ties go to the lowest ordinal.
func mostAdvancedReplica(primary string, instances []examplev1.InstanceStatus, reports []*api.Status) (string, *api.Position) {
	var best string
	var bestPos *api.Position
	for i, in := range instances {
		if i >= len(reports) || in.Name == primary {
			continue
		}
		r := reports[i]
		if r == nil || r.Role != api.RoleReplica || r.Primary != primary || !r.EngineRunning || r.Position == nil {
			continue
		}
		if bestPos == nil || r.Position.Compare(*bestPos) > 0 {
			best, bestPos = in.Name, r.Position
		}
	}
	return best, bestPos
}

// aheadOfCandidate finds, among the instances other than the primary and
// the candidate, one whose last reported position may hold commits the
// candidate at pos lacks: the most advanced such, with why it cannot take
// over and its position ("" when there is none). Positions of an older
// Postgres timeline than the candidate's are history the candidate's
// timeline already settled; a newer timeline, or a GTID domain further
// along, is ahead.
func aheadOfCandidate(primary, candidate string, pos api.Position, instances []examplev1.InstanceStatus, reports []*api.Status) (string, string, *api.Position) {
	var holder, why string
	var at *api.Position
	for i, in := range instances {
		if in.Name == primary || in.Name == candidate || in.Position == nil {
			continue
		}
		p := api.PositionFromV1(*in.Position)
		if !mayHoldMore(p, pos) || (at != nil && p.Compare(*at) <= 0) {
			continue
		}
		holder, at = in.Name, &p
		switch r := reportOf(i, reports); {
		case r == nil:
			why = "its manager does not answer"
		case !r.EngineRunning:
			why = "its engine does not run"
		default:
			why = fmt.Sprintf("it acts as %s following %q", r.Role, r.Primary)
		}
	}
	return holder, why, at
}

func reportOf(i int, reports []*api.Status) *api.Status {
	if i < len(reports) {
		return reports[i]
	}
	return nil
}

// mayHoldMore tells whether a replica at p may hold commits one at
// candidate lacks.
func mayHoldMore(p, candidate api.Position) bool {
	switch {
	case p.LSN != "":
		if p.Timeline != candidate.Timeline {
			return p.Timeline > candidate.Timeline
		}
		return !candidate.Reached(p)
	case p.GTID != "":
		return !candidate.Reached(p)
	}
	return false
}

func positionString(p *api.Position) string {
	switch {
	case p == nil:
		return "unknown"
	case p.LSN != "":
		return fmt.Sprintf("%d/%s", p.Timeline, p.LSN)
	case p.GTID != "":
		return p.GTID
	}
	return "empty"
}

// writePrimaryDecision writes a decision that changes the primary or the
// target with the resourceVersion it was made from, then says it: Event and
// metrics only once the write won.
func (c *Controller) writePrimaryDecision(ctx context.Context, db *examplev1.MyDatabase, status examplev1.MyDatabaseStatus, d *primaryDecision) error {
	updated := db.DeepCopy()
	updated.Status = status
	d.apply(&updated.Status, metav1.NewTime(c.clock.Now()))
	if _, err := c.mydbClient.ExampleV1().MyDatabases(db.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.unready.forget(db.UID)
	if d.current != db.Status.CurrentPrimary {
		c.positions.forget(cache.MetaObjectToName(db))
	}
	c.recorder.Event(db, d.eventType, d.eventReason, d.message)
	observePrimaryChange(db, d.kind, d.result, d.duration)
	return nil
}
