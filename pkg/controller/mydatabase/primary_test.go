package mydatabase

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
)

// primaryFixture drives decidePrimary with a fake clock and fake reports.
type primaryFixture struct {
	t        *testing.T
	c        *Controller
	clock    *testingclock.FakeClock
	recorder *record.FakeRecorder
	db       *examplev1.MyDatabase
	// instances and reports are what the last poll saw.
	instances []examplev1.InstanceStatus
	reports   []*api.Status
}

func newPrimaryFixture(t *testing.T) *primaryFixture {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := record.NewFakeRecorder(100)
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns", UID: "uid-1", Generation: 3}}
	db.Spec.FailoverDelay = &metav1.Duration{Duration: 30 * time.Second}
	db.Status.CurrentPrimary, db.Status.TargetPrimary = "shop-0", "shop-0"
	f := &primaryFixture{t: t, clock: clk, recorder: rec, db: db,
		c: &Controller{clock: clk, recorder: rec, config: Config{PollInterval: 2 * time.Second, SwitchoverTimeout: time.Minute}}}
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
// instance keeps the position it reported last, as pollInstances does.
func (f *primaryFixture) set(name string, ready bool, r *api.Status) {
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

func (f *primaryFixture) decide() *primaryDecision {
	d, _ := f.c.decidePrimary(f.db, f.instances, f.reports, f.clock.Now())
	return d
}

// commit applies a decision as the status write would.
func (f *primaryFixture) commit(d *primaryDecision) {
	d.apply(&f.db.Status, metav1.NewTime(f.clock.Now()))
}

func (f *primaryFixture) requestSwitchover(target string) {
	now := metav1.NewMicroTime(f.clock.Now())
	f.db.Status.TargetPrimary, f.db.Status.TargetPrimaryTime = target, &now
	f.db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonSwitchover
}

func TestSwitchoverWaitsForTheFenceAndTheCatchUp(t *testing.T) {
	f := newPrimaryFixture(t)
	f.requestSwitchover("shop-1")

	d := f.decide()
	if d == nil || d.eventReason != "" || d.current != "shop-0" || d.condition.Status != metav1.ConditionTrue ||
		!strings.Contains(d.condition.Message, "not fenced") {
		t.Fatalf("before the fence: %+v", d)
	}
	// Fenced, but the target has not replayed the last write.
	f.clock.Step(300 * time.Millisecond)
	f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: lsn("0/5000029")})
	f.set("shop-1", false, replicaAt("shop-0", "0/5000000"))
	if d := f.decide(); d == nil || d.eventReason != "" || !strings.Contains(d.condition.Message, "0/5000029") {
		t.Fatalf("target behind: %+v", d)
	}
	// Caught up: the target is the primary, in one decision.
	f.clock.Step(200 * time.Millisecond)
	f.set("shop-1", false, replicaAt("shop-0", "0/5000030"))
	d = f.decide()
	if d == nil || d.eventReason != ReasonSwitchoverCompleted || d.current != "shop-1" || d.target != "shop-1" ||
		d.duration != 500*time.Millisecond || d.kind != "switchover" || d.result != "completed" {
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
	f.clock.Step(time.Hour)
	if d := f.decide(); d != nil {
		t.Errorf("after the switchover: %+v", d)
	}
}

func TestSwitchoverIsGivenUpAfterItsTimeout(t *testing.T) {
	f := newPrimaryFixture(t)
	f.requestSwitchover("shop-1")
	f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: lsn("0/5000029")})
	f.clock.Step(59 * time.Second)
	if d := f.decide(); d == nil || d.eventReason != "" {
		t.Fatalf("before the timeout: %+v", d)
	}
	f.clock.Step(time.Second)
	d := f.decide()
	if d == nil || d.eventReason != ReasonSwitchoverAborted || d.current != "shop-0" || d.target != "shop-0" || d.result != "aborted" ||
		!strings.Contains(d.message, "shop-1 is at 1/0/4000000") {
		t.Fatalf("at the timeout: %+v", d)
	}
	// Aborted, the old primary unfences; failover timing starts only now.
	f.commit(d)
	f.clock.Step(29 * time.Second)
	if d := f.decide(); d != nil {
		t.Errorf("aborted switchover led to %+v", d)
	}
}

func TestFailoverAfterTheDelayPromotesTheMostAdvancedReplica(t *testing.T) {
	f := newPrimaryFixture(t)
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
	f.clock.Step(29 * time.Second)
	if d := f.decide(); d != nil {
		t.Fatalf("before failoverDelay: %+v", d)
	}
	// A moment of readiness restarts the count.
	f.set("shop-0", true, &api.Status{Role: api.RolePrimary, Primary: "shop-0", EngineRunning: true})
	f.decide()
	f.set("shop-0", false, nil)
	f.clock.Step(time.Second)
	if d := f.decide(); d != nil {
		t.Fatalf("the count did not restart: %+v", d)
	}
	f.clock.Step(30 * time.Second)
	d := f.decide()
	if d == nil || d.eventReason != ReasonFailoverCompleted || d.current != "shop-2" || d.target != "shop-2" ||
		d.reason != examplev1.TargetPrimaryReasonFailover || d.duration != 30*time.Second || d.kind != "failover" {
		t.Fatalf("after failoverDelay: %+v", d)
	}
	f.commit(d)
	if s := f.db.Status; s.CurrentPrimary != "shop-2" || s.TargetPrimaryReason != examplev1.TargetPrimaryReasonFailover {
		t.Errorf("status %+v", s)
	}
	// One promotion per incident: the next decision is about shop-2.
	f.set("shop-2", true, &api.Status{Role: api.RolePrimary, Primary: "shop-2", EngineRunning: true})
	f.clock.Step(time.Minute)
	if d := f.decide(); d != nil {
		t.Errorf("a second promotion: %+v", d)
	}
}

func TestFailoverNeedsAReplicaThatCanTakeOver(t *testing.T) {
	f := newPrimaryFixture(t)
	f.set("shop-0", false, nil)
	// One replica follows another primary, one does not run its engine.
	f.set("shop-1", false, replicaAt("shop-9", "0/9000000"))
	f.set("shop-2", false, &api.Status{Role: api.RoleReplica, Primary: "shop-0"})
	f.decide()
	f.clock.Step(time.Minute)
	if d := f.decide(); d != nil {
		t.Fatalf("promoted %+v", d)
	}
	f.decide()
	if n := len(f.recorder.Events); n != 1 {
		t.Errorf("%d events, want one FailoverImpossible per incident", n)
	}
	if e := <-f.recorder.Events; !strings.Contains(e, ReasonFailoverImpossible) {
		t.Errorf("event %q", e)
	}
}

func TestNoFailoverWhileASwitchoverIsUnderWay(t *testing.T) {
	f := newPrimaryFixture(t)
	f.requestSwitchover("shop-1")
	f.set("shop-0", false, nil)
	f.clock.Step(45 * time.Second)
	if d := f.decide(); d == nil || d.eventReason != "" {
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
func syncFixture(t *testing.T) *primaryFixture {
	f := newPrimaryFixture(t)
	f.db.Spec.Replication = &examplev1.ReplicationSpec{Mode: examplev1.ReplicationModeSync}
	f.decide()
	f.set("shop-0", false, nil)
	f.decide()
	f.clock.Step(30 * time.Second)
	return f
}

func TestSyncFailoverPromotesTheMostAdvancedWhenEveryReplicaAnswers(t *testing.T) {
	f := syncFixture(t)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	f.set("shop-2", false, replicaAt("shop-0", "0/4800000"))
	d := f.decide()
	if d == nil || d.eventReason != ReasonFailoverCompleted || d.current != "shop-2" {
		t.Fatalf("%+v", d)
	}
	// shop-0 did not answer: its position, reported for the old primary,
	// goes with the change.
	if !slices.Equal(d.stale, []string{"shop-0"}) {
		t.Errorf("stale %v", d.stale)
	}
}

func TestSyncFailoverWaitsForALostReplicaThatWasAhead(t *testing.T) {
	f := syncFixture(t)
	// shop-2 was ahead when it was lost with the primary; shop-1 answers.
	f.set("shop-2", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	d := f.decide()
	if d == nil || d.eventReason != "" || d.current != "shop-0" || d.target != "shop-0" ||
		d.condition.Status != metav1.ConditionTrue || d.condition.Reason != ReasonFailoverWouldLoseWrites {
		t.Fatalf("held back: %+v", d)
	}
	for _, want := range []string{"shop-1, is at 1/0/4000000", "shop-2 (its manager does not answer) last reported 1/0/4800000", "--to shop-1 --allow-write-loss"} {
		if !strings.Contains(d.condition.Message, want) {
			t.Errorf("message lacks %q: %s", want, d.condition.Message)
		}
	}
	// Said once per incident, however long it waits.
	f.clock.Step(time.Minute)
	f.decide()
	if n := len(f.recorder.Events); n != 1 {
		t.Errorf("%d events, want one FailoverWouldLoseWrites", n)
	}
	if e := <-f.recorder.Events; !strings.Contains(e, "Warning "+ReasonFailoverWouldLoseWrites) {
		t.Errorf("event %q", e)
	}
	// shop-2 comes back: it is the most advanced, and is promoted.
	f.set("shop-2", false, replicaAt("shop-0", "0/4800000"))
	if d := f.decide(); d == nil || d.eventReason != ReasonFailoverCompleted || d.current != "shop-2" {
		t.Fatalf("after shop-2 is back: %+v", d)
	}
}

func TestSyncFailoverHoldsForAReplicaThatAnswersButCannotTakeOver(t *testing.T) {
	f := syncFixture(t)
	f.set("shop-2", false, &api.Status{Role: api.RoleReplica, Primary: "shop-0", Position: lsn("0/4800000")})
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	d := f.decide()
	if d == nil || d.condition.Reason != ReasonFailoverWouldLoseWrites || !strings.Contains(d.condition.Message, "its engine does not run") {
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
			if held := d != nil && d.condition.Reason == ReasonFailoverWouldLoseWrites; held != tc.holds || d == nil {
				t.Errorf("held %v, want %v: %+v", held, tc.holds, d)
			}
		})
	}
}

func TestAsyncFailoverDoesNotWaitForALostReplica(t *testing.T) {
	f := newPrimaryFixture(t)
	f.decide()
	f.set("shop-0", false, nil)
	f.set("shop-2", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	f.decide()
	f.clock.Step(30 * time.Second)
	d := f.decide()
	if d == nil || d.eventReason != ReasonFailoverCompleted || d.current != "shop-1" {
		t.Fatalf("%+v", d)
	}
	if !slices.Equal(d.stale, []string{"shop-0", "shop-2"}) {
		t.Errorf("stale %v", d.stale)
	}
}

func TestForcedFailoverPromotesTheTargetAtOnce(t *testing.T) {
	f := syncFixture(t)
	f.set("shop-2", false, nil)
	f.set("shop-1", false, replicaAt("shop-0", "0/4000000"))
	if d := f.decide(); d == nil || d.condition.Reason != ReasonFailoverWouldLoseWrites {
		t.Fatalf("%+v", d)
	}
	// What POST .../switchover with allowWriteLoss records.
	f.requestSwitchover("shop-1")
	f.db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonForcedFailover
	f.clock.Step(100 * time.Millisecond)
	d := f.decide()
	if d == nil || d.eventReason != ReasonFailoverForced || d.current != "shop-1" || d.target != "shop-1" ||
		d.kind != "failover" || d.result != "forced" || d.eventType != corev1.EventTypeWarning ||
		!strings.Contains(d.message, "allowWriteLoss") {
		t.Fatalf("%+v", d)
	}
}

func TestForcedFailoverIsGivenUpWithoutARunningTarget(t *testing.T) {
	f := syncFixture(t)
	f.requestSwitchover("shop-1")
	f.db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonForcedFailover
	f.set("shop-1", false, nil)
	if d := f.decide(); d == nil || d.eventReason != "" || !strings.Contains(d.condition.Message, "forced failover from shop-0 to shop-1 under way") {
		t.Fatalf("%+v", d)
	}
	f.clock.Step(time.Minute)
	d := f.decide()
	if d == nil || d.eventReason != ReasonSwitchoverAborted || d.current != "shop-0" || d.kind != "failover" || d.result != "aborted" {
		t.Fatalf("%+v", d)
	}
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// TestSwitchoverDecisionIsOneConditionalStatusWrite: through sync, the
// completion is a status write carrying the resourceVersion it was decided
// from; a write that loses (another leader decided first) says nothing and
// is retried from a fresh read.
func TestSwitchoverDecisionIsOneConditionalStatusWrite(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.ResourceVersion = "42"
	start := metav1.NewMicroTime(now.Add(-time.Second))
	db.Status.TargetPrimary, db.Status.TargetPrimaryTime = "prod-mysql-1", &start
	db.Status.TargetPrimaryReason = examplev1.TargetPrimaryReasonSwitchover
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	var p0, p1 string
	for _, obj := range children {
		if p, ok := obj.(*corev1.Pod); ok && p.Name == "prod-mysql-0" {
			p0 = p.Status.PodIP
		} else if ok && p.Name == "prod-mysql-1" {
			p1 = p.Status.PodIP
		}
	}
	old := f.statuses[p0]
	old.Ready, old.Fenced, old.FencedPosition = false, true, &api.Position{GTID: "0-1-42"}
	f.statuses[p0] = old
	target := f.statuses[p1]
	target.EngineRunning, target.Position = true, &api.Position{GTID: "0-1-42"}
	f.statuses[p1] = target
	c := f.newController()
	lose := true
	var sentRV string
	f.mydbClient.PrependReactor("update", "mydatabases", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		sentRV = a.(core.UpdateAction).GetObject().(*examplev1.MyDatabase).ResourceVersion
		if lose {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "mydatabases"}, db.Name, fmt.Errorf("stale"))
		}
		return false, nil, nil
	})
	key := cache.ObjectName{Namespace: db.Namespace, Name: db.Name}
	if err := c.sync(context.Background(), key); !apierrors.IsConflict(err) {
		t.Fatalf("a lost decision: %v, want the conflict", err)
	}
	if sentRV != "42" {
		t.Errorf("the decision was written with resourceVersion %q, want the one it was made from", sentRV)
	}
	if n := len(f.recorder.Events); n != 0 {
		t.Errorf("a lost decision wrote %d events", n)
	}
	lose = false
	if err := c.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	got := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if got.CurrentPrimary != "prod-mysql-1" || got.TargetPrimary != "prod-mysql-1" {
		t.Errorf("status after the decision: primary %q, target %q", got.CurrentPrimary, got.TargetPrimary)
	}
	for _, in := range got.Instances {
		if (in.Role == examplev1.InstanceRolePrimary) != (in.Name == "prod-mysql-1") {
			t.Errorf("instance %s has role %s", in.Name, in.Role)
		}
		if in.Name == "prod-mysql-1" && (in.Position == nil || in.Position.GTID != "0-1-42") {
			t.Errorf("instance %s position %+v, want what its manager reported", in.Name, in.Position)
		}
		if in.Name == "prod-mysql-0" && !in.Fenced {
			t.Errorf("the fenced old primary is not reported fenced")
		}
	}
	if e := <-f.recorder.Events; !strings.Contains(e, ReasonSwitchoverCompleted) || !strings.Contains(e, "prod-mysql-0 to prod-mysql-1") {
		t.Errorf("event %q", e)
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
			f := newPrimaryFixture(t)
			f.db.Spec.Engine = tc.engine
			f.db.Spec.Replication = &examplev1.ReplicationSpec{Mode: tc.mode}
			f.requestSwitchover("shop-1")
			f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: gtid("0-1-100")})
			f.set("shop-1", true, replica("0-1-100"))
			f.set("shop-2", true, replica("0-1-90"))
			d := f.decide()
			if waits := d != nil && d.eventReason == ""; waits != tc.waits {
				t.Fatalf("waits %v, want %v: %+v", waits, tc.waits, d)
			}
			if !tc.waits {
				return
			}
			if !strings.Contains(d.condition.Message, "the replica shop-2 is at 0-1-90") {
				t.Errorf("message %q", d.condition.Message)
			}
			// A replica that is not ready is not waited for.
			f.set("shop-2", false, replica("0-1-90"))
			if d := f.decide(); d == nil || d.eventReason != ReasonSwitchoverCompleted {
				t.Errorf("with shop-2 not ready: %+v", d)
			}
			f.set("shop-2", true, replica("0-1-100"))
			if d := f.decide(); d == nil || d.eventReason != ReasonSwitchoverCompleted {
				t.Errorf("with shop-2 caught up: %+v", d)
			}
		})
	}
}

func TestANewPrimaryThatIsStillPromotingIsNotFailedOver(t *testing.T) {
	f := newPrimaryFixture(t)
	f.requestSwitchover("shop-1")
	f.set("shop-0", false, &api.Status{Role: api.RolePrimary, Primary: "shop-0", Fenced: true, FencedPosition: lsn("0/5000029")})
	f.set("shop-1", false, replicaAt("shop-0", "0/5000030"))
	d := f.decide()
	if d == nil || d.eventReason != ReasonSwitchoverCompleted {
		t.Fatalf("%+v", d)
	}
	f.commit(d)
	// shop-1 answers as the primary and runs, but does not take writes yet.
	f.set("shop-1", false, &api.Status{Role: api.RolePrimary, Primary: "shop-1", EngineRunning: true, Position: lsn("0/5000030")})
	f.decide()
	f.clock.Step(45 * time.Second)
	if d := f.decide(); d != nil {
		t.Fatalf("a promoting primary failed over: %+v", d)
	}
	// Past the switchover timeout it is unready like any other.
	f.set("shop-2", true, replicaAt("shop-1", "0/5000030"))
	f.clock.Step(20 * time.Second)
	f.decide()
	f.clock.Step(30 * time.Second)
	if d := f.decide(); d == nil || d.eventReason != ReasonFailoverCompleted {
		t.Fatalf("a primary that never took writes: %+v", d)
	}
	// A primary that does not answer is never promoting.
	g := newPrimaryFixture(t)
	now := metav1.NewMicroTime(g.clock.Now())
	g.db.Status.TargetPrimaryTime = &now
	g.decide()
	g.set("shop-0", false, nil)
	g.decide()
	g.clock.Step(30 * time.Second)
	if d := g.decide(); d == nil || d.eventReason != ReasonFailoverCompleted {
		t.Fatalf("a lost primary named a moment ago: %+v", d)
	}
}
