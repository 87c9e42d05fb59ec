package failover

import (
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecide is one row per branch of the state machine: one poll's
// decision from a stored status, the managers' reports, the remembered
// incident and the time. Rows marked "e2e:" are situations the end-to-end
// and real-node suites met that an earlier version decided wrongly.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const delay = 30 * time.Second
	policy := Policy{PollInterval: 2 * time.Second, SwitchoverTimeout: time.Minute}
	primary := &api.Status{Role: api.RolePrimary, Primary: "db-0", EngineRunning: true, Position: lsn("0/5000000")}
	fenced := &api.Status{Role: api.RolePrimary, Primary: "db-0", Fenced: true, FencedPosition: lsn("0/5000029")}
	replica := func(at string) *api.Status { return replicaAt("db-0", at) }
	gtidReplica := func(g string) *api.Status {
		return &api.Status{Role: api.RoleReplica, Primary: "db-0", EngineRunning: true, Position: &api.Position{GTID: g}}
	}
	gtidFenced := &api.Status{Role: api.RolePrimary, Primary: "db-0", Fenced: true, FencedPosition: &api.Position{GTID: "0-1-100"}}
	unreadySince := func(d time.Duration) *Incident { return &Incident{Primary: "db-0", Since: t0.Add(-d)} }

	type instance struct {
		ready  bool
		report *api.Status
		// last is the position carried over from an earlier poll when the
		// manager does not answer now.
		last *api.Position
	}
	for _, tc := range []struct {
		name string
		// status: the stored status's primary and target; targetAgo is
		// how long ago the target was set; reason its reason.
		current, target string
		targetAgo       time.Duration
		reason          string
		sync            bool
		engine          examplev1.Engine
		instances       []instance
		incident        *Incident

		// want: the change's current primary and Event reason ("" for a
		// condition only, "-" for no change), the condition's reason and a
		// piece of its message, the requeue, Warnings said, and whether an
		// incident is remembered.
		wantCurrent, wantEvent, wantCondition, wantMessage string
		wantRequeue                                        time.Duration
		wantWarning                                        string
		wantIncident                                       bool
		wantStale                                          []string
	}{
		{name: "no primary yet: nothing to decide", current: "", instances: []instance{{false, nil, nil}}, wantEvent: "-"},
		{name: "a ready primary: nothing, and no incident", current: "db-0", incident: unreadySince(10 * time.Second),
			instances: []instance{{true, primary, nil}, {true, replica("0/4000000"), nil}}, wantEvent: "-"},
		{name: "primary first seen unready: the count starts", current: "db-0",
			instances: []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}},
			wantEvent: "-", wantRequeue: 2 * time.Second, wantIncident: true},
		{name: "unready within the delay: look again when it ends", current: "db-0", incident: unreadySince(29 * time.Second),
			instances: []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}},
			wantEvent: "-", wantRequeue: time.Second, wantIncident: true},
		{name: "an incident of another primary starts anew", current: "db-0",
			incident:  &Incident{Primary: "db-9", Since: t0.Add(-time.Hour)},
			instances: []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}}, wantEvent: "-", wantRequeue: 2 * time.Second, wantIncident: true},
		{name: "past the delay: the most advanced replica is promoted", current: "db-0", incident: unreadySince(delay),
			instances:   []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}, {true, replica("0/4800000"), nil}},
			wantCurrent: "db-2", wantEvent: ReasonFailoverCompleted, wantCondition: ReasonFailoverCompleted,
			wantMessage: "failover from db-0 to db-2 (position 1/0/4800000)", wantIncident: true, wantStale: []string{"db-0"}},
		{name: "past the delay, no replica runs, follows and reports: FailoverImpossible, said once", current: "db-0", incident: unreadySince(delay),
			instances: []instance{{false, nil, nil}, {false, &api.Status{Role: api.RoleReplica, Primary: "db-0"}, nil},
				{false, replicaAt("db-9", "0/9000000"), nil}},
			wantEvent: "-", wantWarning: ReasonFailoverImpossible, wantIncident: true},
		{name: "FailoverImpossible already said for this incident", current: "db-0",
			incident:  &Incident{Primary: "db-0", Since: t0.Add(-time.Minute), Said: ReasonFailoverImpossible},
			instances: []instance{{false, nil, nil}, {false, nil, nil}}, wantEvent: "-", wantIncident: true},
		{name: "e2e: Sync, a replica lost with the primary was ahead: held back", current: "db-0", sync: true, incident: unreadySince(delay),
			instances: []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}, {false, nil, lsn("0/4800000")}},
			wantEvent: "", wantCurrent: "db-0", wantCondition: ReasonFailoverWouldLoseWrites,
			wantMessage: "db-2 (its manager does not answer) last reported 1/0/4800000", wantWarning: ReasonFailoverWouldLoseWrites, wantIncident: true},
		{name: "Sync, the replica ahead answers but runs no engine: held back", current: "db-0", sync: true, incident: unreadySince(delay),
			instances: []instance{{false, nil, nil}, {true, replica("0/4000000"), nil},
				{false, &api.Status{Role: api.RoleReplica, Primary: "db-0", Position: lsn("0/4800000")}, nil}},
			wantEvent: "", wantCurrent: "db-0", wantCondition: ReasonFailoverWouldLoseWrites, wantMessage: "its engine does not run",
			wantWarning: ReasonFailoverWouldLoseWrites, wantIncident: true},
		{name: "Async does not wait for a lost replica that was ahead", current: "db-0", incident: unreadySince(delay),
			instances:   []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}, {false, nil, lsn("0/4800000")}},
			wantCurrent: "db-1", wantEvent: ReasonFailoverCompleted, wantCondition: ReasonFailoverCompleted, wantIncident: true,
			wantStale: []string{"db-0", "db-2"}},
		{name: "e2e: a new primary still promoting (relay log) is not failed over", current: "db-0", target: "db-0", targetAgo: 45 * time.Second,
			reason: examplev1.TargetPrimaryReasonSwitchover, incident: unreadySince(45 * time.Second),
			instances: []instance{{false, primary, nil}, {true, replica("0/4000000"), nil}}, wantEvent: "-"},
		{name: "past the switchover timeout a promoting primary is unready like any other", current: "db-0", target: "db-0",
			targetAgo: time.Minute, reason: examplev1.TargetPrimaryReasonSwitchover, incident: unreadySince(delay),
			instances:   []instance{{false, primary, nil}, {true, replica("0/4000000"), nil}},
			wantCurrent: "db-1", wantEvent: ReasonFailoverCompleted, wantCondition: ReasonFailoverCompleted, wantIncident: true},
		{name: "switchover: the old primary does not answer", current: "db-0", target: "db-1", reason: examplev1.TargetPrimaryReasonSwitchover,
			incident:  unreadySince(time.Hour),
			instances: []instance{{false, nil, nil}, {true, replica("0/5000000"), nil}}, wantCurrent: "db-0", wantEvent: "",
			wantCondition: ReasonSwitchoverInProgress, wantMessage: "the old primary db-0 does not answer", wantRequeue: SwitchoverPoll},
		{name: "switchover: the old primary has not fenced", current: "db-0", target: "db-1", reason: examplev1.TargetPrimaryReasonSwitchover,
			instances: []instance{{true, primary, nil}, {true, replica("0/5000000"), nil}}, wantCurrent: "db-0", wantEvent: "",
			wantCondition: ReasonSwitchoverInProgress, wantMessage: "has not fenced yet", wantRequeue: SwitchoverPoll},
		{name: "switchover: the target does not answer", current: "db-0", target: "db-1", reason: examplev1.TargetPrimaryReasonSwitchover,
			instances: []instance{{false, fenced, nil}, {false, nil, nil}}, wantCurrent: "db-0", wantEvent: "",
			wantCondition: ReasonSwitchoverInProgress, wantMessage: "the target db-1 does not answer", wantRequeue: SwitchoverPoll},
		{name: "switchover: the target follows another primary", current: "db-0", target: "db-1", reason: examplev1.TargetPrimaryReasonSwitchover,
			instances: []instance{{false, fenced, nil}, {true, replicaAt("db-2", "0/5000029"), nil}}, wantCurrent: "db-0", wantEvent: "",
			wantCondition: ReasonSwitchoverInProgress, wantMessage: "is not a running replica of db-0", wantRequeue: SwitchoverPoll},
		{name: "switchover: the target is behind the old primary's last write", current: "db-0", target: "db-1", reason: examplev1.TargetPrimaryReasonSwitchover,
			instances: []instance{{false, fenced, nil}, {true, replica("0/5000000"), nil}}, wantCurrent: "db-0", wantEvent: "",
			wantCondition: ReasonSwitchoverInProgress, wantMessage: "the target db-1 is at 1/0/5000000, the old primary's last write at 1/0/5000029",
			wantRequeue: SwitchoverPoll},
		{name: "switchover completes once the target has the last write", current: "db-0", target: "db-1", targetAgo: 500 * time.Millisecond,
			reason:      examplev1.TargetPrimaryReasonSwitchover,
			instances:   []instance{{false, fenced, nil}, {true, replica("0/5000030"), nil}, {true, replica("0/4000000"), nil}},
			wantCurrent: "db-1", wantEvent: ReasonSwitchoverCompleted, wantCondition: ReasonSwitchoverCompleted,
			wantMessage: "switchover from db-0 to db-1 in 500ms", wantStale: []string{"db-0"}},
		{name: "e2e: MariaDB Sync switchover waits for every ready replica to reach the last write", current: "db-0", target: "db-1",
			reason: examplev1.TargetPrimaryReasonSwitchover, sync: true, engine: examplev1.EngineMariaDB,
			instances:   []instance{{false, gtidFenced, nil}, {true, gtidReplica("0-1-100"), nil}, {true, gtidReplica("0-1-90"), nil}},
			wantCurrent: "db-0", wantEvent: "", wantCondition: ReasonSwitchoverInProgress,
			wantMessage: "the replica db-2 is at 0-1-90", wantRequeue: SwitchoverPoll},
		{name: "MariaDB Sync switchover does not wait for a replica that is not ready", current: "db-0", target: "db-1",
			reason: examplev1.TargetPrimaryReasonSwitchover, sync: true, engine: examplev1.EngineMariaDB,
			instances:   []instance{{false, gtidFenced, nil}, {true, gtidReplica("0-1-100"), nil}, {false, gtidReplica("0-1-90"), nil}},
			wantCurrent: "db-1", wantEvent: ReasonSwitchoverCompleted, wantCondition: ReasonSwitchoverCompleted, wantStale: []string{"db-0"}},
		{name: "PostgreSQL Sync switchover does not wait for the other replicas", current: "db-0", target: "db-1",
			reason: examplev1.TargetPrimaryReasonSwitchover, sync: true, engine: examplev1.EnginePostgres,
			instances:   []instance{{false, fenced, nil}, {true, replica("0/5000029"), nil}, {true, replica("0/4000000"), nil}},
			wantCurrent: "db-1", wantEvent: ReasonSwitchoverCompleted, wantCondition: ReasonSwitchoverCompleted, wantStale: []string{"db-0"}},
		{name: "switchover given up at its timeout: the old primary again", current: "db-0", target: "db-1", targetAgo: time.Minute,
			reason:      examplev1.TargetPrimaryReasonSwitchover,
			instances:   []instance{{false, fenced, nil}, {true, replica("0/4000000"), nil}},
			wantCurrent: "db-0", wantEvent: ReasonSwitchoverAborted, wantCondition: ReasonSwitchoverAborted,
			wantMessage: "switchover from db-0 to db-1 given up after 1m0s: the target db-1 is at 1/0/4000000"},
		{name: "forced failover: the target runs as a replica, promoted at once", current: "db-0", target: "db-1", targetAgo: 100 * time.Millisecond,
			reason: examplev1.TargetPrimaryReasonForcedFailover, sync: true,
			instances:   []instance{{false, nil, nil}, {true, replica("0/4000000"), nil}, {false, nil, lsn("0/4800000")}},
			wantCurrent: "db-1", wantEvent: ReasonFailoverForced, wantCondition: ReasonFailoverForced, wantMessage: "allowWriteLoss",
			wantStale: []string{"db-0", "db-2"}},
		{name: "forced failover waits for a running target", current: "db-0", target: "db-1", reason: examplev1.TargetPrimaryReasonForcedFailover,
			instances: []instance{{false, nil, nil}, {false, nil, nil}}, wantCurrent: "db-0", wantEvent: "",
			wantCondition: ReasonSwitchoverInProgress, wantMessage: "forced failover from db-0 to db-1 under way", wantRequeue: SwitchoverPoll},
		{name: "forced failover given up at the timeout", current: "db-0", target: "db-1", targetAgo: time.Minute,
			reason:    examplev1.TargetPrimaryReasonForcedFailover,
			instances: []instance{{false, nil, nil}, {false, nil, nil}}, wantCurrent: "db-0", wantEvent: ReasonSwitchoverAborted,
			wantCondition: ReasonSwitchoverAborted, wantMessage: "forced failover from db-0 to db-1 given up"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 7}}
			db.Spec.FailoverDelay = &metav1.Duration{Duration: delay}
			db.Spec.Engine = tc.engine
			if tc.sync {
				db.Spec.Replication = &examplev1.ReplicationSpec{Mode: examplev1.ReplicationModeSync}
			}
			db.Status.CurrentPrimary, db.Status.TargetPrimary, db.Status.TargetPrimaryReason = tc.current, tc.target, tc.reason
			if tc.target == "" {
				db.Status.TargetPrimary = tc.current
			}
			if tc.target != "" {
				at := metav1.NewMicroTime(t0.Add(-tc.targetAgo))
				db.Status.TargetPrimaryTime = &at
			}
			in := Input{Database: db, Incident: tc.incident, Now: t0}
			for i, inst := range tc.instances {
				status := examplev1.InstanceStatus{Name: "db-" + string(rune('0'+i)), Ready: inst.ready}
				if inst.report != nil && inst.report.Position != nil {
					status.Position = api.PositionToV1(inst.report.Position)
				} else if inst.last != nil {
					status.Position = api.PositionToV1(inst.last)
				}
				in.Instances, in.Reports = append(in.Instances, status), append(in.Reports, inst.report)
			}

			d := Decide(in, policy)

			c := d.Change
			switch {
			case tc.wantEvent == "-":
				if c != nil {
					t.Fatalf("a change %+v, want none", c)
				}
			case c == nil:
				t.Fatalf("no change, want %q", tc.wantEvent)
			default:
				if said(c) != tc.wantEvent || c.Current != tc.wantCurrent || c.Condition.Reason != tc.wantCondition ||
					!strings.Contains(c.Condition.Message, tc.wantMessage) || c.Condition.ObservedGeneration != 7 {
					t.Errorf("change %q to %s, condition %s %q (generation %d); want %q to %s, %s containing %q",
						said(c), c.Current, c.Condition.Reason, c.Condition.Message, c.Condition.ObservedGeneration,
						tc.wantEvent, tc.wantCurrent, tc.wantCondition, tc.wantMessage)
				}
				if c.Event != nil && c.Event.Message != c.Condition.Message {
					t.Errorf("the event says %q, the condition %q", c.Event.Message, c.Condition.Message)
				}
				if got := strings.Join(c.Stale, ","); got != strings.Join(tc.wantStale, ",") {
					t.Errorf("stale %v, want %v", c.Stale, tc.wantStale)
				}
			}
			if d.Requeue != tc.wantRequeue {
				t.Errorf("requeue %s, want %s", d.Requeue, tc.wantRequeue)
			}
			var warned string
			for _, w := range d.Warnings {
				if w.Type != corev1.EventTypeWarning {
					t.Errorf("warning of type %s", w.Type)
				}
				warned += w.Reason
			}
			if warned != tc.wantWarning {
				t.Errorf("warnings %q, want %q", warned, tc.wantWarning)
			}
			if (d.Incident != nil) != tc.wantIncident {
				t.Errorf("incident %+v, want one remembered: %v", d.Incident, tc.wantIncident)
			}
			if tc.incident != nil && d.Incident != nil && d.Incident.Primary == tc.incident.Primary && !d.Incident.Since.Equal(tc.incident.Since) {
				t.Errorf("the incident's start moved from %s to %s", tc.incident.Since, d.Incident.Since)
			}
		})
	}
}

func TestDelayAndFenceAfter(t *testing.T) {
	if got := Delay(examplev1.MyDatabaseSpec{}); got != examplev1.DefaultFailoverDelay {
		t.Errorf("Delay of an empty spec = %s, want the default %s", got, examplev1.DefaultFailoverDelay)
	}
	spec := examplev1.MyDatabaseSpec{FailoverDelay: &metav1.Duration{Duration: 8 * time.Second}}
	if got := Delay(spec); got != 8*time.Second {
		t.Errorf("Delay = %s, want 8s", got)
	}
	// The instance manager fences before the controller may promote.
	if got := FenceAfter(Delay(spec)); got != 4*time.Second {
		t.Errorf("FenceAfter(8s) = %s, want 4s", got)
	}
}
