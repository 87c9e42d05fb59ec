package failover

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fixture drives Decide poll after poll as the controller does: it keeps
// the incident between decisions, gathers the Warnings said, and applies a
// change as the status write would.
type fixture struct {
	t      *testing.T
	now    time.Time
	policy Policy
	db     *examplev1.MyDatabase
	// instances and reports are what the last poll saw.
	instances []examplev1.InstanceStatus
	reports   []*api.Status
	incident  *Incident
	warnings  []Event
	// lost is what the health streams say between polls.
	lost map[string]time.Time
}

func newFixture(t *testing.T) *fixture {
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns", UID: "uid-1", Generation: 3}}
	db.Spec.FailoverDelay = &metav1.Duration{Duration: 30 * time.Second}
	db.Status.CurrentPrimary, db.Status.TargetPrimary = "shop-0", "shop-0"
	f := &fixture{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), db: db,
		policy: Policy{PollInterval: 2 * time.Second, SwitchoverTimeout: time.Minute}}
	// shop-0 a ready primary at 0/5000000, shop-1 and shop-2 replicas.
	f.set("shop-0", true, &api.Status{Role: api.RolePrimary, Primary: "shop-0", EngineRunning: true, Position: lsn("0/5000000")})
	f.set("shop-1", true, replicaAt("shop-0", "0/4000000"))
	f.set("shop-2", true, replicaAt("shop-0", "0/4800000"))
	return f
}

func lsn(s string) *api.Position { return &api.Position{Timeline: 1, LSN: s} }

func replicaAt(primary, at string) *api.Status {
	return &api.Status{Role: api.RoleReplica, Primary: primary, EngineRunning: true, Position: lsn(at)}
}

// set records what instance name reports (nil: it does not answer); the
// instance keeps the position it reported last, as the controller's poll
// does.
func (f *fixture) set(name string, ready bool, r *api.Status) {
	i := slices.IndexFunc(f.instances, func(in examplev1.InstanceStatus) bool { return in.Name == name })
	if i < 0 {
		i = len(f.instances)
		f.instances = append(f.instances, examplev1.InstanceStatus{Name: name})
		f.reports = append(f.reports, nil)
	}
	f.instances[i].Ready, f.reports[i] = ready, r
	if r != nil && r.Position != nil {
		f.instances[i].Position = api.PositionToV1(r.Position)
	}
}

func (f *fixture) step(d time.Duration) { f.now = f.now.Add(d) }

// decide is one poll's decision: the change, nil when there is none.
func (f *fixture) decide() *Change {
	d := Decide(Input{Database: f.db, Instances: f.instances, Reports: f.reports, Incident: f.incident, LostSince: f.lost, Now: f.now}, f.policy)
	f.incident = d.Incident
	f.warnings = append(f.warnings, d.Warnings...)
	return d.Change
}

// commit applies a change as the controller's status write does.
func (f *fixture) commit(c *Change) {
	c.Apply(&f.db.Status, f.now)
	f.incident = nil
}

func (f *fixture) requestSwitchover(target string) {
	now := metav1.NewMicroTime(f.now)
	f.db.Status.TargetPrimary, f.db.Status.TargetPrimaryTime = target, &now
	f.db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonSwitchover
}

// said is the reason of the Event a change says once written ("" for a
// condition only).
func said(c *Change) string {
	if c == nil || c.Event == nil {
		return ""
	}
	return c.Event.Reason
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func TestSwitchoverWaitsForTheFenceAndTheCatchUp(t *testing.T) {
	f := newFixture(t)
	f.requestSwitchover("shop-1")

	d := f.decide()
	if d == nil || d.Event != nil || d.Current != "shop-0" || d.Condition.Status != metav1.ConditionTrue ||
		!strings.Contains(d.Condition.Message, "not fenced") {
		t.Fatalf("before the fence: %+v", d)
	}
	// Fenced, but the target has not replayed the last write.
	f.step(300 * time.Millisecond)
	f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: lsn("0/5000029")})
	f.set("shop-1", false, replicaAt("shop-0", "0/5000000"))
	if d := f.decide(); d == nil || d.Event != nil || !strings.Contains(d.Condition.Message, "0/5000029") {
		t.Fatalf("target behind: %+v", d)
	}
	// Caught up: the target is the primary, in one decision.
	f.step(200 * time.Millisecond)
	f.set("shop-1", false, replicaAt("shop-0", "0/5000030"))
	d = f.decide()
	if d == nil || said(d) != ReasonSwitchoverCompleted || d.Current != "shop-1" || d.Target != "shop-1" ||
		d.Duration != 500*time.Millisecond || d.Kind != "switchover" || d.Result != "completed" {
		t.Fatalf("caught up: %+v", d)
	}
	f.commit(d)
	s := f.db.Status
	if s.CurrentPrimary != "shop-1" || s.TargetPrimary != "shop-1" {
		t.Errorf("status after the switchover %+v", s)
	}
	c := findCondition(s.Conditions, examplev1.ConditionPrimaryChange)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonSwitchoverCompleted || c.ObservedGeneration != 3 ||
		!strings.Contains(c.Message, "shop-0 to shop-1 in 500ms") {
		t.Errorf("condition %+v", c)
	}
	// The old primary being unready now starts no failover: it is a replica.
	f.set("shop-1", true, &api.Status{Role: api.RolePrimary, Primary: "shop-1", EngineRunning: true})
	f.step(time.Hour)
	if d := f.decide(); d != nil {
		t.Errorf("after the switchover: %+v", d)
	}
}

func TestSwitchoverIsGivenUpAfterItsTimeout(t *testing.T) {
	f := newFixture(t)
	f.requestSwitchover("shop-1")
	f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: lsn("0/5000029")})
	f.step(59 * time.Second)
	if d := f.decide(); d == nil || d.Event != nil {
		t.Fatalf("before the timeout: %+v", d)
	}
	f.step(time.Second)
	d := f.decide()
	if d == nil || said(d) != ReasonSwitchoverAborted || d.Current != "shop-0" || d.Target != "shop-0" || d.Result != "aborted" ||
		!strings.Contains(d.Event.Message, "shop-1 is at 1/0/4000000") {
		t.Fatalf("at the timeout: %+v", d)
	}
	// Aborted, the old primary unfences; failover timing starts only now.
	f.commit(d)
	f.step(29 * time.Second)
	if d := f.decide(); d != nil {
		t.Errorf("aborted switchover led to %+v", d)
	}
}

func TestFailoverAfterTheDelayPromotesTheMostAdvancedReplica(t *testing.T) {
	f := newFixture(t)
	if d := f.decide(); d != nil {
		t.Fatalf("healthy: %+v", d)
	}
	// The primary's manager stops answering; the replicas stop streaming.
	f.set("shop-0", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	f.set("shop-2", false, replicaAt("shop-0", "0/4800000"))
	if d := f.decide(); d != nil {
		t.Fatalf("at once: %+v", d)
	}
	f.step(29 * time.Second)
	if d := f.decide(); d != nil {
		t.Fatalf("before failoverDelay: %+v", d)
	}
	// A moment of readiness restarts the count.
	f.set("shop-0", true, &api.Status{Role: api.RolePrimary, Primary: "shop-0", EngineRunning: true})
	f.decide()
	f.set("shop-0", false, nil)
	f.step(time.Second)
	if d := f.decide(); d != nil {
		t.Fatalf("the count did not restart: %+v", d)
	}
	f.step(30 * time.Second)
	d := f.decide()
	if d == nil || said(d) != ReasonFailoverCompleted || d.Current != "shop-2" || d.Target != "shop-2" ||
		d.Reason != examplev1.TargetPrimaryReasonFailover || d.Duration != 30*time.Second || d.Kind != "failover" {
		t.Fatalf("after failoverDelay: %+v", d)
	}
	f.commit(d)
	if s := f.db.Status; s.CurrentPrimary != "shop-2" || s.TargetPrimaryReason != examplev1.TargetPrimaryReasonFailover {
		t.Errorf("status %+v", s)
	}
	// One promotion per incident: the next decision is about shop-2.
	f.set("shop-2", true, &api.Status{Role: api.RolePrimary, Primary: "shop-2", EngineRunning: true})
	f.step(time.Minute)
	if d := f.decide(); d != nil {
		t.Errorf("a second promotion: %+v", d)
	}
}

// failoverDelay counts from when the health stream lost the primary, not
// from the poll that confirmed it: the poll may come up to an interval (and
// a status timeout) later.
func TestFailoverDelayCountsFromTheLoss(t *testing.T) {
	f := newFixture(t)
	f.decide()
	lost := f.now
	f.step(2500 * time.Millisecond) // the poll the stream's break caused
	f.lost = map[string]time.Time{"shop-0": lost, "shop-1": lost.Add(-time.Hour)}
	f.set("shop-0", false, nil)
	d := Decide(Input{Database: f.db, Instances: f.instances, Reports: f.reports, Incident: f.incident, LostSince: f.lost, Now: f.now}, f.policy)
	if d.Change != nil || d.Incident == nil || !d.Incident.Since.Equal(lost) || d.Requeue != f.policy.PollInterval {
		t.Fatalf("first unready poll: %+v, want an incident since the loss", d)
	}
	f.decide()
	f.step(30*time.Second - 2500*time.Millisecond)
	if c := f.decide(); c == nil || said(c) != ReasonFailoverCompleted || c.Duration != 30*time.Second {
		t.Fatalf("failoverDelay after the loss: %+v", c)
	}

	// A replica lost (unready) long before it was promoted: as the
	// primary, its incident starts no earlier than the promotion, so it
	// gets its failoverDelay like any primary.
	p := newFixture(t)
	promoted := metav1.NewMicroTime(p.now.Add(-time.Second))
	p.db.Status.TargetPrimaryTime = &promoted
	p.set("shop-0", false, nil)
	p.lost = map[string]time.Time{"shop-0": p.now.Add(-time.Minute)}
	p.decide()
	if p.incident == nil || !p.incident.Since.Equal(promoted.Time) {
		t.Errorf("incident %+v, want since the promotion %s", p.incident, promoted.Time)
	}

	// A loss the stream says is later than the poll (clocks read in
	// another order) starts nothing earlier than the poll.
	g := newFixture(t)
	g.set("shop-0", false, nil)
	g.lost = map[string]time.Time{"shop-0": g.now.Add(time.Second)}
	g.decide()
	if g.incident == nil || !g.incident.Since.Equal(g.now) {
		t.Errorf("incident %+v, want since the poll", g.incident)
	}
}

func TestFailoverNeedsAReplicaThatCanTakeOver(t *testing.T) {
	f := newFixture(t)
	f.set("shop-0", false, nil)
	// One replica follows another primary, one does not run its engine.
	f.set("shop-1", false, replicaAt("shop-9", "0/9000000"))
	f.set("shop-2", false, &api.Status{Role: api.RoleReplica, Primary: "shop-0"})
	f.decide()
	f.step(time.Minute)
	if d := f.decide(); d != nil {
		t.Fatalf("promoted %+v", d)
	}
	f.decide()
	if n := len(f.warnings); n != 1 || f.warnings[0].Reason != ReasonFailoverImpossible || f.warnings[0].Type != corev1.EventTypeWarning {
		t.Errorf("warnings %+v, want one FailoverImpossible per incident", f.warnings)
	}
}

func TestNoFailoverWhileASwitchoverIsUnderWay(t *testing.T) {
	f := newFixture(t)
	f.requestSwitchover("shop-1")
	f.set("shop-0", false, nil)
	f.step(45 * time.Second)
	if d := f.decide(); d == nil || d.Event != nil {
		t.Fatalf("during the switchover: %+v", d)
	}
}

func TestMostAdvancedReplicaWithGTIDs(t *testing.T) {
	instances := []examplev1.InstanceStatus{{Name: "db-0"}, {Name: "db-1"}, {Name: "db-2"}}
	gtid := func(g string) *api.Status {
		return &api.Status{Role: api.RoleReplica, Primary: "db-0", EngineRunning: true, Position: &api.Position{GTID: g}}
	}
	name, _ := mostAdvancedReplica("db-0", instances, []*api.Status{nil, gtid("0-1-41"), gtid("0-1-42")})
	if name != "db-2" {
		t.Errorf("picked %q", name)
	}
	name, _ = mostAdvancedReplica("db-0", instances, []*api.Status{nil, gtid("0-1-42"), gtid("0-1-42")})
	if name != "db-1" {
		t.Errorf("a tie picked %q, want the lowest ordinal", name)
	}
}

// syncFixture is newPrimaryFixture with Sync replication, and the primary
// lost after failoverDelay.
func syncFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.db.Spec.Replication = &examplev1.ReplicationSpec{Mode: examplev1.ReplicationModeSync}
	f.decide()
	f.set("shop-0", false, nil)
	f.decide()
	f.step(30 * time.Second)
	return f
}

func TestSyncFailoverPromotesTheMostAdvancedWhenEveryReplicaAnswers(t *testing.T) {
	f := syncFixture(t)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	f.set("shop-2", false, replicaAt("shop-0", "0/4800000"))
	d := f.decide()
	if d == nil || said(d) != ReasonFailoverCompleted || d.Current != "shop-2" {
		t.Fatalf("%+v", d)
	}
	// shop-0 did not answer: its position, reported for the old primary,
	// goes with the change.
	if !slices.Equal(d.Stale, []string{"shop-0"}) {
		t.Errorf("stale %v", d.Stale)
	}
}

func TestSyncFailoverWaitsForALostReplicaThatWasAhead(t *testing.T) {
	f := syncFixture(t)
	// shop-2 was ahead when it was lost with the primary; shop-1 answers.
	f.set("shop-2", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	d := f.decide()
	if d == nil || d.Event != nil || d.Current != "shop-0" || d.Target != "shop-0" ||
		d.Condition.Status != metav1.ConditionTrue || d.Condition.Reason != ReasonFailoverWouldLoseWrites {
		t.Fatalf("held back: %+v", d)
	}
	for _, want := range []string{"shop-1, is at 1/0/4000000", "shop-2 (its manager does not answer) last reported 1/0/4800000", "--to shop-1 --allow-write-loss"} {
		if !strings.Contains(d.Condition.Message, want) {
			t.Errorf("message lacks %q: %s", want, d.Condition.Message)
		}
	}
	// Said once per incident, however long it waits.
	f.step(time.Minute)
	f.decide()
	if n := len(f.warnings); n != 1 || f.warnings[0].Reason != ReasonFailoverWouldLoseWrites || f.warnings[0].Type != corev1.EventTypeWarning {
		t.Errorf("warnings %+v, want one FailoverWouldLoseWrites", f.warnings)
	}
	// shop-2 comes back: it is the most advanced, and is promoted.
	f.set("shop-2", false, replicaAt("shop-0", "0/4800000"))
	if d := f.decide(); d == nil || said(d) != ReasonFailoverCompleted || d.Current != "shop-2" {
		t.Fatalf("after shop-2 is back: %+v", d)
	}
}

func TestSyncFailoverHoldsForAReplicaThatAnswersButCannotTakeOver(t *testing.T) {
	f := syncFixture(t)
	f.set("shop-2", false, &api.Status{Role: api.RoleReplica, Primary: "shop-0", Position: lsn("0/4800000")})
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	d := f.decide()
	if d == nil || d.Condition.Reason != ReasonFailoverWouldLoseWrites || !strings.Contains(d.Condition.Message, "its engine does not run") {
		t.Fatalf("%+v", d)
	}
}

func TestSyncFailoverIgnoresPositionsItsCandidateIsAtOrBeyond(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lost      *api.Position
		candidate *api.Position
		holds     bool
	}{
		{"lost replica behind", lsn("0/3000000"), lsn("0/4000000"), false},
		{"lost replica equal", lsn("0/4000000"), lsn("0/4000000"), false},
		{"lost replica ahead", lsn("0/4000001"), lsn("0/4000000"), true},
		{"lost replica on an older timeline", &api.Position{Timeline: 1, LSN: "0/9000000"}, &api.Position{Timeline: 2, LSN: "0/4000000"}, false},
		{"lost replica on a newer timeline", &api.Position{Timeline: 3, LSN: "0/1000000"}, &api.Position{Timeline: 2, LSN: "0/4000000"}, true},
		{"gtid behind", &api.Position{GTID: "0-1-41"}, &api.Position{GTID: "0-1-42"}, false},
		{"gtid ahead", &api.Position{GTID: "0-1-43"}, &api.Position{GTID: "0-1-42"}, true},
		{"gtid in a domain the candidate lacks", &api.Position{GTID: "0-1-40,1-2-1"}, &api.Position{GTID: "0-1-42"}, true},
		{"nothing reported", &api.Position{}, lsn("0/4000000"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := syncFixture(t)
			f.set("shop-2", false, &api.Status{Role: api.RoleReplica, Primary: "shop-0", EngineRunning: true, Position: tc.lost})
			f.set("shop-2", false, nil)
			f.set("shop-1", false, &api.Status{Role: api.RoleReplica, Primary: "shop-0", EngineRunning: true, Position: tc.candidate})
			d := f.decide()
			if held := d != nil && d.Condition.Reason == ReasonFailoverWouldLoseWrites; held != tc.holds || d == nil {
				t.Errorf("held %v, want %v: %+v", held, tc.holds, d)
			}
		})
	}
}

func TestAsyncFailoverDoesNotWaitForALostReplica(t *testing.T) {
	f := newFixture(t)
	f.decide()
	f.set("shop-0", false, nil)
	f.set("shop-2", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	f.decide()
	f.step(30 * time.Second)
	d := f.decide()
	if d == nil || said(d) != ReasonFailoverCompleted || d.Current != "shop-1" {
		t.Fatalf("%+v", d)
	}
	if !slices.Equal(d.Stale, []string{"shop-0", "shop-2"}) {
		t.Errorf("stale %v", d.Stale)
	}
}

func TestForcedFailoverPromotesTheTargetAtOnce(t *testing.T) {
	f := syncFixture(t)
	f.set("shop-2", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	if d := f.decide(); d == nil || d.Condition.Reason != ReasonFailoverWouldLoseWrites {
		t.Fatalf("%+v", d)
	}
	// What POST .../switchover with allowWriteLoss records.
	f.requestSwitchover("shop-1")
	f.db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonForcedFailover
	f.step(100 * time.Millisecond)
	d := f.decide()
	if d == nil || said(d) != ReasonFailoverForced || d.Current != "shop-1" || d.Target != "shop-1" ||
		d.Kind != "failover" || d.Result != "forced" || d.Event.Type != corev1.EventTypeWarning ||
		!strings.Contains(d.Event.Message, "allowWriteLoss") {
		t.Fatalf("%+v", d)
	}
}

func TestForcedFailoverIsGivenUpWithoutARunningTarget(t *testing.T) {
	f := syncFixture(t)
	f.requestSwitchover("shop-1")
	f.db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonForcedFailover
	f.set("shop-1", false, nil)
	if d := f.decide(); d == nil || d.Event != nil || !strings.Contains(d.Condition.Message, "forced failover from shop-0 to shop-1 under way") {
		t.Fatalf("%+v", d)
	}
	f.step(time.Minute)
	d := f.decide()
	if d == nil || said(d) != ReasonSwitchoverAborted || d.Current != "shop-0" || d.Kind != "failover" || d.Result != "aborted" {
		t.Fatalf("%+v", d)
	}
}

func TestSyncMariaDBSwitchoverWaitsForEveryReadyReplica(t *testing.T) {
	gtid := func(g string) *api.Position { return &api.Position{GTID: g} }
	replica := func(g string) *api.Status {
		return &api.Status{Role: api.RoleReplica, Primary: "shop-0", EngineRunning: true, Streaming: true, Position: gtid(g)}
	}
	for _, tc := range []struct {
		engine examplev1.Engine
		mode   examplev1.ReplicationMode
		waits  bool
	}{
		{examplev1.EngineMariaDB, examplev1.ReplicationModeSync, true},
		{examplev1.EngineMariaDB, examplev1.ReplicationModeAsync, false},
		{examplev1.EnginePostgres, examplev1.ReplicationModeSync, false},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.engine, tc.mode), func(t *testing.T) {
			f := newFixture(t)
			f.db.Spec.Engine = tc.engine
			f.db.Spec.Replication = &examplev1.ReplicationSpec{Mode: tc.mode}
			f.requestSwitchover("shop-1")
			f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: gtid("0-1-100")})
			f.set("shop-1", true, replica("0-1-100"))
			f.set("shop-2", true, replica("0-1-90"))
			d := f.decide()
			if waits := d != nil && d.Event == nil; waits != tc.waits {
				t.Fatalf("waits %v, want %v: %+v", waits, tc.waits, d)
			}
			if !tc.waits {
				return
			}
			if !strings.Contains(d.Condition.Message, "the replica shop-2 is at 0-1-90") {
				t.Errorf("message %q", d.Condition.Message)
			}
			// A replica that is not ready is not waited for.
			f.set("shop-2", false, replica("0-1-90"))
			if d := f.decide(); d == nil || said(d) != ReasonSwitchoverCompleted {
				t.Errorf("with shop-2 not ready: %+v", d)
			}
			f.set("shop-2", true, replica("0-1-100"))
			if d := f.decide(); d == nil || said(d) != ReasonSwitchoverCompleted {
				t.Errorf("with shop-2 caught up: %+v", d)
			}
		})
	}
}

func TestANewPrimaryThatIsStillPromotingIsNotFailedOver(t *testing.T) {
	f := newFixture(t)
	f.requestSwitchover("shop-1")
	f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: lsn("0/5000029")})
	f.set("shop-1", false, replicaAt("shop-0", "0/5000030"))
	d := f.decide()
	if d == nil || said(d) != ReasonSwitchoverCompleted {
		t.Fatalf("%+v", d)
	}
	f.commit(d)
	// shop-1 answers as the primary and runs, but does not take writes yet.
	f.set("shop-1", false, &api.Status{Role: api.RolePrimary, Primary: "shop-1", EngineRunning: true, Position: lsn("0/5000030")})
	f.decide()
	f.step(45 * time.Second)
	if d := f.decide(); d != nil {
		t.Fatalf("a promoting primary failed over: %+v", d)
	}
	// Past the switchover timeout it is unready like any other.
	f.set("shop-2", true, replicaAt("shop-1", "0/5000030"))
	f.step(20 * time.Second)
	f.decide()
	f.step(30 * time.Second)
	if d := f.decide(); d == nil || said(d) != ReasonFailoverCompleted {
		t.Fatalf("a primary that never took writes: %+v", d)
	}
	// A primary that does not answer is never promoting.
	g := newFixture(t)
	now := metav1.NewMicroTime(g.now)
	g.db.Status.TargetPrimaryTime = &now
	g.decide()
	g.set("shop-0", false, nil)
	g.decide()
	g.step(30 * time.Second)
	if d := g.decide(); d == nil || said(d) != ReasonFailoverCompleted {
		t.Fatalf("a lost primary named a moment ago: %+v", d)
	}
}
