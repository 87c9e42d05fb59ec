package failover

import (
	"fmt"
	"slices"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition reasons (of the PrimaryChange condition) and Event reasons.
const (
	ReasonSwitchoverInProgress = "SwitchoverInProgress"
	ReasonSwitchoverCompleted  = "SwitchoverCompleted"
	ReasonSwitchoverAborted    = "SwitchoverAborted"
	ReasonFailoverCompleted    = "FailoverCompleted"
	ReasonFailoverImpossible   = "FailoverImpossible"
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

// SwitchoverPoll is how soon a database is read again while a switchover
// is under way: writes are down until it completes.
const SwitchoverPoll = 200 * time.Millisecond

// Policy is what the controller's configuration adds to the database's spec.
type Policy struct {
	// PollInterval is how often the instance managers are read.
	PollInterval time.Duration
	// SwitchoverTimeout bounds a switchover (DefaultSwitchoverTimeout when 0).
	SwitchoverTimeout time.Duration
}

func (p Policy) switchoverTimeout() time.Duration {
	if p.SwitchoverTimeout > 0 {
		return p.SwitchoverTimeout
	}
	return DefaultSwitchoverTimeout
}

// Incident is what the controller remembers between polls of a primary
// that is not ready: since when, as this controller saw it, and the reason
// of the Warning it last said about it. It is kept in memory on purpose: a
// new leader starts counting anew, which can only delay a failover, and the
// status write's precondition keeps it from deciding a second one.
type Incident struct {
	Primary string
	Since   time.Time
	Said    string
}

// Input is what a decision is made from.
type Input struct {
	// Database is the database as stored: its spec, generation and status.
	Database *examplev1.MyDatabase
	// Instances are the instances as this poll computed them, and
	// Reports[i] what Instances[i]'s manager just reported (nil when it did
	// not answer); Instances[i].Position is the last position it reported,
	// carried over while it does not answer.
	Instances []examplev1.InstanceStatus
	Reports   []*api.Status
	// Incident is the one remembered since the last poll, or nil.
	Incident *Incident
	// LostSince is when this controller learned, between polls, that an
	// instance was lost (its health stream broke or said it was unready),
	// for those it has not seen ready since: a primary's incident starts
	// then (but not before status.targetPrimaryTime), not at the poll that
	// confirms it.
	LostSince map[string]time.Time
	Now       time.Time
}

// Event is an Event to record on the database.
type Event struct {
	Type, Reason, Message string
}

// Decision is what to do after a poll.
type Decision struct {
	// Change is the change of status to write, or nil. One that carries an
	// Event moves the primary or the target (or gives a switchover up) and
	// is written on its own, with the resourceVersion it was decided from;
	// its Event and metrics follow only once the write won. One without
	// (a switchover under way, a held-back failover) is a condition written
	// with the rest of the status.
	Change *Change
	// Requeue is how soon to look again (0: the poll interval).
	Requeue time.Duration
	// Warnings are said now: each once per incident.
	Warnings []Event
	// Incident is what to remember until the next poll (nil: nothing).
	Incident *Incident
}

// Change is a change of status.currentPrimary and targetPrimary, with the
// PrimaryChange condition and what to say once it is written.
type Change struct {
	Current, Target, Reason string
	Condition               metav1.Condition
	// Event is said once the change is written; nil for a condition only.
	Event *Event
	// Kind ("switchover", "failover") and Result ("completed", "aborted",
	// "forced") label the metrics; Duration is the incident's.
	Kind, Result string
	Duration     time.Duration
	// Stale are the instances whose position was only carried over from an
	// earlier poll: reported relative to the old primary, it is dropped when
	// the primary changes.
	Stale []string
}

// Apply writes the change into status.
func (c *Change) Apply(s *examplev1.MyDatabaseStatus, now time.Time) {
	if c.Current != s.CurrentPrimary {
		s.CurrentPrimary = c.Current
		for i := range s.Instances {
			s.Instances[i].Role = examplev1.InstanceRoleReplica
			if s.Instances[i].Name == c.Current {
				s.Instances[i].Role = examplev1.InstanceRolePrimary
			}
			if slices.Contains(c.Stale, s.Instances[i].Name) {
				s.Instances[i].Position = nil
			}
		}
	}
	if c.Target != s.TargetPrimary {
		at := metav1.NewMicroTime(now)
		s.TargetPrimary, s.TargetPrimaryReason, s.TargetPrimaryTime = c.Target, c.Reason, &at
	}
	meta.SetStatusCondition(&s.Conditions, c.Condition)
}

// Decide is the state machine of the primary role.
func Decide(in Input, p Policy) Decision {
	d := decide(in, p)
	if c := d.Change; c != nil && c.Current != in.Database.Status.CurrentPrimary {
		for i, instance := range in.Instances {
			if r := reportOf(i, in.Reports); r == nil || r.Position == nil {
				c.Stale = append(c.Stale, instance.Name)
			}
		}
	}
	return d
}

func decide(in Input, p Policy) Decision {
	db, s := in.Database, in.Database.Status
	if s.CurrentPrimary == "" {
		return Decision{}
	}
	if s.TargetPrimary != "" && s.TargetPrimary != s.CurrentPrimary {
		// A switchover under way: no failover incident meanwhile.
		return decideSwitchover(in, p)
	}

	// No switchover under way: watch the primary for a failover.
	instance, r := find(in, s.CurrentPrimary)
	if instance != nil && instance.Ready || promoting(s, r, in.Now, p) {
		return Decision{}
	}
	incident := in.Incident
	if incident == nil || incident.Primary != s.CurrentPrimary {
		since := in.Now
		if lost, ok := in.LostSince[s.CurrentPrimary]; ok {
			// Lost before it was made the primary is lost as a replica
			// (a promotion's own unready moments): as the primary, no
			// earlier than that.
			if t := s.TargetPrimaryTime; t != nil && lost.Before(t.Time) {
				lost = t.Time
			}
			if lost.Before(since) {
				since = lost
			}
		}
		incident = &Incident{Primary: s.CurrentPrimary, Since: since}
	} else {
		copied := *incident
		incident = &copied
	}
	delay, down := Delay(db.Spec), in.Now.Sub(incident.Since)
	if down < delay {
		return Decision{Requeue: min(delay-down, p.PollInterval), Incident: incident}
	}
	d := Decision{Incident: incident}
	candidate, pos := mostAdvancedReplica(s.CurrentPrimary, in.Instances, in.Reports)
	if candidate == "" {
		d.warn(corev1.EventTypeWarning, ReasonFailoverImpossible, fmt.Sprintf(
			"Primary %s has been unready for %s, but no replica can take over (none runs, follows it and reports a position)",
			s.CurrentPrimary, down.Round(time.Second)))
		return d
	}
	if Synchronous(db.Spec) {
		if holder, why, at := aheadOfCandidate(s.CurrentPrimary, candidate, *pos, in.Instances, in.Reports); holder != "" {
			// Every acknowledged commit is on some replica; the one that
			// may have the last ones cannot take over, so promoting the
			// candidate could lose them. Wait, and say how to force it.
			msg := fmt.Sprintf("failover from %s held back: the most advanced replica that can take over, %s, is at %s, "+
				"but %s (%s) last reported %s, and with Sync replication it may hold acknowledged writes %s lacks; "+
				"mydb waits for %s to come back, or for an operator to accept losing those writes "+
				"(kubectl mydb switchover %s --to %s --allow-write-loss)",
				s.CurrentPrimary, candidate, PositionString(pos), holder, why, PositionString(at), candidate, holder, db.Name, candidate)
			d.warn(corev1.EventTypeWarning, ReasonFailoverWouldLoseWrites, msg)
			d.Change = &Change{Current: s.CurrentPrimary, Target: s.TargetPrimary, Reason: s.TargetPrimaryReason,
				Condition: condition(db, in.Now, metav1.ConditionTrue, ReasonFailoverWouldLoseWrites, msg)}
			return d
		}
	}
	msg := fmt.Sprintf("failover from %s to %s (position %s): the primary was unready for %s (failoverDelay %s)",
		s.CurrentPrimary, candidate, PositionString(pos), down.Round(100*time.Millisecond), delay)
	d.Change = &Change{
		Current: candidate, Target: candidate, Reason: examplev1.TargetPrimaryReasonFailover,
		Condition: condition(db, in.Now, metav1.ConditionFalse, ReasonFailoverCompleted, msg),
		Event:     &Event{Type: corev1.EventTypeWarning, Reason: ReasonFailoverCompleted, Message: msg},
		Kind:      "failover", Result: "completed", Duration: down,
	}
	return d
}

// warn says a Warning once per incident: not again while the incident's
// last Warning had the same reason.
func (d *Decision) warn(eventType, reason, message string) {
	if d.Incident.Said == reason {
		return
	}
	d.Incident.Said = reason
	d.Warnings = append(d.Warnings, Event{Type: eventType, Reason: reason, Message: message})
}

func decideSwitchover(in Input, p Policy) Decision {
	db, s := in.Database, in.Database.Status
	old, target := s.CurrentPrimary, s.TargetPrimary
	started := in.Now
	if s.TargetPrimaryTime != nil {
		started = s.TargetPrimaryTime.Time
	}
	elapsed := in.Now.Sub(started)

	_, oldReport := find(in, old)
	_, targetReport := find(in, target)
	forced := s.TargetPrimaryReason == examplev1.TargetPrimaryReasonForcedFailover
	kind, what := "switchover", "switchover"
	if forced {
		kind, what = "failover", "forced failover"
	}
	waiting := switchoverWaitsFor(in, oldReport, targetReport, forced)
	change := func(current string, status metav1.ConditionStatus, reason, msg string) *Change {
		return &Change{Current: current, Target: current, Reason: s.TargetPrimaryReason,
			Condition: condition(db, in.Now, status, reason, msg), Kind: kind, Duration: elapsed}
	}
	switch {
	case waiting == "" && forced:
		msg := fmt.Sprintf("forced failover from %s to %s (position %s), allowWriteLoss: acknowledged writes that only a lost replica had are lost",
			old, target, PositionString(targetReport.Position))
		c := change(target, metav1.ConditionFalse, ReasonFailoverForced, msg)
		c.Event, c.Result = &Event{Type: corev1.EventTypeWarning, Reason: ReasonFailoverForced, Message: msg}, "forced"
		return Decision{Change: c}
	case waiting == "":
		msg := fmt.Sprintf("switchover from %s to %s in %s: %s has every write of %s (up to %s)",
			old, target, elapsed.Round(time.Millisecond), target, old, PositionString(oldReport.FencedPosition))
		c := change(target, metav1.ConditionFalse, ReasonSwitchoverCompleted, msg)
		c.Event, c.Result = &Event{Type: corev1.EventTypeNormal, Reason: ReasonSwitchoverCompleted, Message: msg}, "completed"
		return Decision{Change: c}
	case elapsed >= p.switchoverTimeout():
		msg := fmt.Sprintf("%s from %s to %s given up after %s: %s; %s is the primary again",
			what, old, target, elapsed.Round(time.Millisecond), waiting, old)
		c := change(old, metav1.ConditionFalse, ReasonSwitchoverAborted, msg)
		c.Event, c.Result = &Event{Type: corev1.EventTypeWarning, Reason: ReasonSwitchoverAborted, Message: msg}, "aborted"
		return Decision{Change: c}
	}
	// Still under way: say so in the condition (written with the rest of the
	// status) and look again soon.
	msg := fmt.Sprintf("%s from %s to %s under way: waiting because %s", what, old, target, waiting)
	return Decision{Change: &Change{Current: old, Target: target, Reason: s.TargetPrimaryReason,
		Condition: condition(db, in.Now, metav1.ConditionTrue, ReasonSwitchoverInProgress, msg)}, Requeue: SwitchoverPoll}
}

// switchoverWaitsFor says what a switchover still waits for ("" when it can
// complete).
func switchoverWaitsFor(in Input, oldReport, targetReport *api.Status, forced bool) string {
	db, s := in.Database, in.Database.Status
	old, target := s.CurrentPrimary, s.TargetPrimary
	switch {
	case forced:
		// The operator accepted the loss: the target needs only to run as
		// a replica; the old primary fences when it sees the target.
		if targetReport == nil || targetReport.Role != api.RoleReplica || !targetReport.EngineRunning || targetReport.Position == nil {
			return fmt.Sprintf("the target %s is not a running replica", target)
		}
	case oldReport == nil:
		return fmt.Sprintf("the old primary %s does not answer", old)
	case !oldReport.Fenced || oldReport.FencedPosition == nil:
		return fmt.Sprintf("the old primary %s has not fenced yet", old)
	case targetReport == nil:
		return fmt.Sprintf("the target %s does not answer", target)
	case targetReport.Role != api.RoleReplica || targetReport.Primary != old || !targetReport.EngineRunning || targetReport.Position == nil:
		return fmt.Sprintf("the target %s is not a running replica of %s", target, old)
	case !targetReport.Position.Reached(*oldReport.FencedPosition):
		return fmt.Sprintf("the target %s is at %s, the old primary's last write at %s",
			target, PositionString(targetReport.Position), PositionString(oldReport.FencedPosition))
	case Synchronous(db.Spec) && db.Spec.Engine != examplev1.EnginePostgres:
		// A MySQL-family replica behind the start of the target's binlog
		// (a target cloned since that replica's position) cannot follow
		// it and needs a clone, and a clone waits (BACKUP STAGE
		// BLOCK_COMMIT) behind the commits that wait for a replica: with
		// the old primary cloning too, no replica would ever acknowledge.
		// So every ready replica first reaches the old primary's last
		// write, which the target's binlog holds.
		for i, instance := range in.Instances {
			r := reportOf(i, in.Reports)
			if instance.Name == old || instance.Name == target || !instance.Ready || r == nil || r.Position == nil {
				continue
			}
			if !r.Position.Reached(*oldReport.FencedPosition) {
				return fmt.Sprintf("the replica %s is at %s, the old primary's last write at %s (with Sync replication every ready replica catches up first)",
					instance.Name, PositionString(r.Position), PositionString(oldReport.FencedPosition))
			}
		}
	}
	return ""
}

// promoting tells whether the current primary, named a moment ago (within
// the switchover timeout of status.targetPrimaryTime), is still becoming
// one: its manager answers, acts as this primary, runs its engine and
// probes it, and only the engine does not take writes yet (a MySQL-family
// replica applies its relay log first, which under load takes seconds).
// Such a primary is not lost: failing it over would only move the primary
// again, to a replica that has less.
func promoting(s examplev1.MyDatabaseStatus, r *api.Status, now time.Time, p Policy) bool {
	return r != nil && r.Role == api.RolePrimary && r.Primary == s.CurrentPrimary && r.EngineRunning && !r.Fenced &&
		r.Position != nil && s.TargetPrimaryTime != nil && now.Sub(s.TargetPrimaryTime.Time) < p.switchoverTimeout()
}

func condition(db *examplev1.MyDatabase, now time.Time, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: examplev1.ConditionPrimaryChange, Status: status, Reason: reason, Message: message,
		ObservedGeneration: db.Generation, LastTransitionTime: metav1.NewTime(now)}
}

// find returns the instance named name and its report.
func find(in Input, name string) (*examplev1.InstanceStatus, *api.Status) {
	for i := range in.Instances {
		if in.Instances[i].Name == name {
			return &in.Instances[i], reportOf(i, in.Reports)
		}
	}
	return nil, nil
}

func reportOf(i int, reports []*api.Status) *api.Status {
	if i < len(reports) {
		return reports[i]
	}
	return nil
}
