package mydatabase

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
)

// The decisions themselves are package failover's (its tests); these are
// the controller's part: gathering, writing, saying.

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
	if e := <-f.recorder.Events; !strings.Contains(e, failover.ReasonSwitchoverCompleted) || !strings.Contains(e, "prod-mysql-0 to prod-mysql-1") {
		t.Errorf("event %q", e)
	}
}

// TestFailoverThroughSync: between syncs the controller remembers since
// when the primary has been unready, says a Warning once per incident, and
// writes the failover once spec.failoverDelay has passed.
func TestFailoverThroughSync(t *testing.T) {
	db := myDatabase()
	db.Spec.FailoverDelay = &metav1.Duration{Duration: 5 * time.Second}
	db, children, statuses := convergedState(t, db)
	// The primary's manager stops answering; the replicas answer, but run no
	// engine yet, so none can take over.
	delete(statuses, "10.244.0.10")
	for _, ip := range []string{"10.244.0.11", "10.244.0.12"} {
		s := statuses[ip]
		s.Ready, s.EngineRunning = false, false
		statuses[ip] = s
	}
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	c := f.newController()
	clk := clocktesting.NewFakePassiveClock(now)
	c.clock = clk
	key := cache.ObjectName{Namespace: db.Namespace, Name: db.Name}
	sync := func() {
		t.Helper()
		if err := c.sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	clk.SetTime(now.Add(6 * time.Second))
	sync()
	sync()
	var said []string
	for len(f.recorder.Events) > 0 {
		said = append(said, <-f.recorder.Events)
	}
	if len(said) != 1 || !strings.HasPrefix(said[0], "Warning "+failover.ReasonFailoverImpossible) {
		t.Fatalf("events after the delay without a candidate %q, want one FailoverImpossible", said)
	}
	// The replicas run: the most advanced is promoted, in one write.
	for ip, gtid := range map[string]string{"10.244.0.11": "0-1-40", "10.244.0.12": "0-1-42"} {
		s := statuses[ip]
		s.EngineRunning, s.Position = true, &api.Position{GTID: gtid}
		statuses[ip] = s
	}
	sync()
	var got *examplev1.MyDatabase
	for _, a := range f.mydbClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			if d := u.GetObject().(*examplev1.MyDatabase); d.Status.CurrentPrimary != db.Status.CurrentPrimary {
				got = d
			}
		}
	}
	if got == nil || got.Status.CurrentPrimary != "prod-mysql-2" || got.Status.TargetPrimaryReason != examplev1.TargetPrimaryReasonFailover {
		t.Fatalf("no failover to prod-mysql-2 written: %+v", got)
	}
	if e := <-f.recorder.Events; !strings.Contains(e, "Warning "+failover.ReasonFailoverCompleted) || !strings.Contains(e, "prod-mysql-0 to prod-mysql-2") {
		t.Errorf("event %q", e)
	}
}
