package mydatabase

import (
	"context"
	"fmt"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance"
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
	name     string
	since    time.Time
	reported bool // FailoverImpossible was said for this incident
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

func (u *unreadyTracker) markReported(db types.UID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p, ok := u.since[db]; ok {
		p.reported = true
		u.since[db] = p
	}
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

// decidePrimary is the state machine of the primary role, from the status
// as stored and what the instance managers just reported (reports[i] is
// instances[i]'s, nil when it did not answer). It returns the decision to
// write, if any, and how soon to look again (0: the poll interval).
func (c *Controller) decidePrimary(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, reports []*instance.Status, now time.Time) (*primaryDecision, time.Duration) {
	s := db.Status
	if s.CurrentPrimary == "" {
		return nil, 0
	}
	report := func(name string) (*examplev1.InstanceStatus, *instance.Status) {
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
		return c.decideSwitchover(db, report, condition, now)
	}

	// No switchover under way: watch the primary for a failover.
	in, _ := report(s.CurrentPrimary)
	ready := in != nil && in.Ready
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
		if !p.reported {
			c.unready.markReported(db.UID)
			c.recorder.Eventf(db, corev1.EventTypeWarning, ReasonFailoverImpossible,
				"Primary %s has been unready for %s, but no replica can take over (none runs, follows it and reports a position)",
				s.CurrentPrimary, now.Sub(p.since).Round(time.Second))
		}
		return nil, 0
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

func (c *Controller) decideSwitchover(db *examplev1.MyDatabase, report func(string) (*examplev1.InstanceStatus, *instance.Status),
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
	var waiting string
	switch {
	case oldReport == nil:
		waiting = fmt.Sprintf("the old primary %s does not answer", old)
	case !oldReport.Fenced || oldReport.FencedPosition == nil:
		waiting = fmt.Sprintf("the old primary %s has not fenced yet", old)
	case targetReport == nil:
		waiting = fmt.Sprintf("the target %s does not answer", target)
	case targetReport.Role != instance.RoleReplica || targetReport.Primary != old || !targetReport.EngineRunning || targetReport.Position == nil:
		waiting = fmt.Sprintf("the target %s is not a running replica of %s", target, old)
	case !targetReport.Position.Reached(*oldReport.FencedPosition):
		waiting = fmt.Sprintf("the target %s is at %s, the old primary's last write at %s",
			target, positionString(targetReport.Position), positionString(oldReport.FencedPosition))
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
		msg := fmt.Sprintf("switchover from %s to %s given up after %s: %s; %s takes writes again",
			old, target, elapsed.Round(time.Millisecond), waiting, old)
		return &primaryDecision{
			current: old, target: old, reason: s.TargetPrimaryReason,
			condition: condition(metav1.ConditionFalse, ReasonSwitchoverAborted, msg),
			eventType: corev1.EventTypeWarning, eventReason: ReasonSwitchoverAborted, message: msg,
			kind: "switchover", result: "aborted", duration: elapsed,
		}, 0
	}
	// Still under way: say so in the condition (written with the rest of the
	// status) and look again soon.
	msg := fmt.Sprintf("switchover from %s to %s under way: waiting because %s", old, target, waiting)
	cond := condition(metav1.ConditionTrue, ReasonSwitchoverInProgress, msg)
	return &primaryDecision{current: old, target: target, reason: s.TargetPrimaryReason, condition: cond}, switchoverPoll
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
func mostAdvancedReplica(primary string, instances []examplev1.InstanceStatus, reports []*instance.Status) (string, *instance.Position) {
	var best string
	var bestPos *instance.Position
	for i, in := range instances {
		if i >= len(reports) || in.Name == primary {
			continue
		}
		r := reports[i]
		if r == nil || r.Role != instance.RoleReplica || r.Primary != primary || !r.EngineRunning || r.Position == nil {
			continue
		}
		if bestPos == nil || r.Position.Compare(*bestPos) > 0 {
			best, bestPos = in.Name, r.Position
		}
	}
	return best, bestPos
}

func positionString(p *instance.Position) string {
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
