package mydatabase

import (
	"fmt"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// lifecycle plays a new database from its create to Ready as the API
// server, the StatefulSet controller, the kubelet and the instance managers
// move it along, reconciling it twice at every step (the child's event and
// the database's own), and counts the controller's status writes.
type lifecycle struct {
	t        *testing.T
	db       *examplev1.MyDatabase
	objects  []runtime.Object
	statuses fakeStatuses
	writes   int
}

func (l *lifecycle) step(what string) {
	l.t.Helper()
	for range 2 {
		f := newFixture(l.t, []*examplev1.MyDatabase{l.db}, l.objects...)
		f.statuses = l.statuses
		if err := f.sync(); err != nil {
			l.t.Fatalf("%s: %v", what, err)
		}
		if l.objects == nil {
			l.objects = storedChildren(l.t, f, l.db)
		}
		for _, a := range f.mydbClient.Actions() {
			u, ok := a.(core.UpdateAction)
			if !ok || a.GetSubresource() != "status" {
				continue
			}
			l.writes++
			l.t.Logf("status write %d at %q", l.writes, what)
			db := u.GetObject().(*examplev1.MyDatabase)
			l.db = l.db.DeepCopy()
			l.db.Status = db.Status
			l.db.ResourceVersion = fmt.Sprint(l.writes + 1)
		}
	}
}

func (l *lifecycle) statefulSet() *appsv1.StatefulSet {
	return findObject[*appsv1.StatefulSet](l.objects)
}

// createToReady plays db's way to Ready and returns the status writes.
func createToReady(t *testing.T, db *examplev1.MyDatabase) int {
	db.CreationTimestamp = metav1.NewTime(now)
	l := &lifecycle{t: t, db: db, statuses: fakeStatuses{}}
	l.step("create")
	replicas := desiredReplicas(db)
	sts := l.statefulSet()
	sts.Generation = 1
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, CurrentRevision: "r1", UpdateRevision: "r1"}
	l.step("the StatefulSet is seen")

	primary := db.Name + "-0"
	var pods []*corev1.Pod
	for i := range int(replicas) {
		p := pod(db, i, "")
		p.Status.PodIP = ""
		pods = append(pods, p)
		l.objects = append(l.objects, p)
	}
	sts.Status.Replicas, sts.Status.UpdatedReplicas = replicas, replicas
	l.step("the pods are created")
	for i, p := range pods {
		p.Status.PodIP = fmt.Sprintf("10.244.0.%d", 10+i)
		l.step(p.Name + " has an address")
	}
	for _, p := range pods {
		l.statuses[p.Status.PodIP] = api.Status{Name: p.Name, Role: api.RoleReplica, Reason: "the engine is starting"}
		l.step(p.Name + "'s manager answers")
	}
	for i, p := range pods {
		s := serving(p, primary)
		s.Position = &api.Position{Timeline: 1, LSN: fmt.Sprintf("0/%X", 0x3000000+i)}
		l.statuses[p.Status.PodIP] = s
		l.step(p.Name + " serves its role")
	}
	for i := range pods {
		sts.Status.ReadyReplicas = int32(i + 1)
		l.step(fmt.Sprintf("%d pods ready", i+1))
	}
	if !meta.IsStatusConditionTrue(l.db.Status.Conditions, examplev1.ConditionReady) {
		t.Fatalf("not Ready at the end: %+v", l.db.Status.Conditions)
	}
	ready := l.writes
	// Under a write load every poll reads new positions: none is written.
	for n := range 5 {
		for i, p := range pods {
			s := l.statuses[p.Status.PodIP]
			s.Position = &api.Position{Timeline: 1, LSN: fmt.Sprintf("0/%X", 0x4000000+0x1000*n+i)}
			l.statuses[p.Status.PodIP] = s
		}
		l.step(fmt.Sprintf("poll %d under a write load", n+1))
	}
	if l.writes != ready {
		t.Errorf("%d status writes for positions that moved, want none", l.writes-ready)
	}
	return ready
}

// TestNewDatabaseCostsTwoStatusWritesToReady: one status write when the
// primary has an address (the instance managers wait for it), one when the
// database is Ready; none for what only moves along.
func TestNewDatabaseCostsTwoStatusWritesToReady(t *testing.T) {
	one := myDatabase(func(db *examplev1.MyDatabase) { db.Spec.Replicas = ptr.To[int32](1) })
	if n := createToReady(t, one); n != 2 {
		t.Errorf("one replica: %d status writes from create to Ready, want 2", n)
	}
	// Three replicas: each replica's readiness is written too, as a
	// switchover to it reads it from the status.
	if n := createToReady(t, myDatabase()); n > 4 {
		t.Errorf("three replicas: %d status writes from create to Ready, want at most 4", n)
	}
}

func TestStatusWorthWriting(t *testing.T) {
	ready := func() *examplev1.MyDatabase {
		db, _, _ := convergedState(t, myDatabase())
		db.CreationTimestamp = metav1.NewTime(now.Add(-newDatabaseGrace))
		return db
	}
	for _, tc := range []struct {
		name   string
		db     func() *examplev1.MyDatabase
		change func(*examplev1.MyDatabaseStatus)
		paused bool
		write  bool
		// firstDue is when a first status is due (nil: newDatabaseGrace
		// after the database's creation).
		firstDue *time.Time
	}{
		{"equal", ready, func(*examplev1.MyDatabaseStatus) {}, false, false, nil},
		{"positions moved", ready, func(s *examplev1.MyDatabaseStatus) {
			s.Instances[1].Position = &examplev1.InstancePosition{Timeline: 1, LSN: "0/5000000"}
		}, false, false, nil},
		{"a message changed", ready, func(s *examplev1.MyDatabaseStatus) {
			s.Instances[0].Message = "slow"
			meta.FindStatusCondition(s.Conditions, examplev1.ConditionReady).Message = "other words"
		}, false, false, nil},
		{"a replica's address", ready, func(s *examplev1.MyDatabaseStatus) { s.Instances[1].Address = "10.244.1.1" }, false, false, nil},
		{"the primary's address", ready, func(s *examplev1.MyDatabaseStatus) { s.Instances[0].Address = "10.244.1.1" }, false, true, nil},
		{"a replica was lost", ready, func(s *examplev1.MyDatabaseStatus) { s.Instances[2].Ready = false }, false, true, nil},
		{"the primary was lost", ready, func(s *examplev1.MyDatabaseStatus) { s.Instances[0].Ready = false }, false, true, nil},
		{"the primary is ready again", func() *examplev1.MyDatabase {
			db := ready()
			db.Status.Instances[0].Ready = false
			return db
		}, func(s *examplev1.MyDatabaseStatus) { s.Instances[0].Ready = true }, false, true, nil},
		{"a new primary is ready before the database", func() *examplev1.MyDatabase {
			db := ready()
			db.Status.Instances[0].Ready = false
			meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionReady).Status = metav1.ConditionFalse
			return db
		}, func(s *examplev1.MyDatabaseStatus) { s.Instances[0].Ready = true }, false, false, nil},
		{"a condition's reason", ready, func(s *examplev1.MyDatabaseStatus) {
			meta.FindStatusCondition(s.Conditions, examplev1.ConditionDegraded).Reason = ReasonChildConflict
		}, false, true, nil},
		{"the generation", ready, func(s *examplev1.MyDatabaseStatus) { s.ObservedGeneration = 2 }, false, true, nil},
		{"the target primary", ready, func(s *examplev1.MyDatabaseStatus) { s.TargetPrimary = "prod-mysql-1" }, false, true, nil},
		{"an instance more", ready, func(s *examplev1.MyDatabaseStatus) {
			s.Instances = append(s.Instances, examplev1.InstanceStatus{Name: "prod-mysql-3", Role: examplev1.InstanceRoleReplica})
		}, false, true, nil},
		{"new, coming up", newDB, func(s *examplev1.MyDatabaseStatus) { rollingOut(s) }, false, false, nil},
		{"new, coming up for longer than the grace", func() *examplev1.MyDatabase {
			db := newDB()
			db.CreationTimestamp = metav1.NewTime(now.Add(-newDatabaseGrace))
			return db
		}, func(s *examplev1.MyDatabaseStatus) { rollingOut(s) }, false, true, nil},
		{"new, coming up for longer than the grace, its pod just made", func() *examplev1.MyDatabase {
			db := newDB()
			db.CreationTimestamp = metav1.NewTime(now.Add(-2 * newDatabaseGrace))
			return db
		}, func(s *examplev1.MyDatabaseStatus) { rollingOut(s) }, false, false, ptr.To(now.Add(time.Second))},
		{"new, the primary has an address", newDB, func(s *examplev1.MyDatabaseStatus) {
			rollingOut(s)
			s.CurrentPrimary = "prod-mysql-0"
			s.Instances = []examplev1.InstanceStatus{{Name: "prod-mysql-0", Role: examplev1.InstanceRolePrimary, Address: "10.244.0.10"}}
		}, false, true, nil},
		{"a database that was seen with a status, its primary without an address yet", func() *examplev1.MyDatabase {
			db := newDB()
			rollingOut(&db.Status)
			return db
		}, func(s *examplev1.MyDatabaseStatus) {
			s.CurrentPrimary = "prod-mysql-0"
			s.Instances = []examplev1.InstanceStatus{{Name: "prod-mysql-0", Role: examplev1.InstanceRolePrimary, Message: "the pod has no IP yet"}}
		}, false, false, nil},
		{"the primary lost its address", ready, func(s *examplev1.MyDatabaseStatus) { s.Instances[0].Address = "" }, false, true, nil},
		{"new, degraded", newDB, func(s *examplev1.MyDatabaseStatus) {
			rollingOut(s)
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: examplev1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: ReasonChildConflict})
		}, false, true, nil},
		{"created paused", newDB, func(s *examplev1.MyDatabaseStatus) {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: examplev1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: ReasonPaused})
		}, true, false, nil},
		{"paused later", ready, func(s *examplev1.MyDatabaseStatus) {
			meta.FindStatusCondition(s.Conditions, examplev1.ConditionProgressing).Reason = ReasonPaused
		}, true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := tc.db()
			status := *db.Status.DeepCopy()
			tc.change(&status)
			due := db.CreationTimestamp.Add(newDatabaseGrace)
			if tc.firstDue != nil {
				due = *tc.firstDue
			}
			if write, _ := statusWorthWriting(db, status, tc.paused, due, now); write != tc.write {
				t.Errorf("write %v, want %v", write, tc.write)
			}
		})
	}
}

// TestFirstStatusDue: a new database's first status waits on what the
// cluster is doing: its pod starting, its StatefulSet making the pod, or
// mydb making the StatefulSet.
func TestFirstStatusDue(t *testing.T) {
	db := newDB()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(20 * time.Second))}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(50 * time.Second))}}
	for _, tc := range []struct {
		name string
		sts  *appsv1.StatefulSet
		pod  *corev1.Pod
		want time.Time
	}{
		{"no StatefulSet yet", nil, nil, now.Add(newDatabaseGrace)},
		{"no pod yet", sts, nil, now.Add(20*time.Second + podCreationGrace)},
		{"a pod", sts, pod, now.Add(50*time.Second + newDatabaseGrace)},
	} {
		if got := firstStatusDue(db, tc.sts, tc.pod); !got.Equal(tc.want) {
			t.Errorf("%s: due %v, want %v", tc.name, got.Sub(now), tc.want.Sub(now))
		}
	}
}

func newDB() *examplev1.MyDatabase {
	return myDatabase(func(db *examplev1.MyDatabase) { db.CreationTimestamp = metav1.NewTime(now) })
}

func rollingOut(s *examplev1.MyDatabaseStatus) {
	s.ObservedGeneration = 1
	for _, c := range []metav1.Condition{
		{Type: examplev1.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonReplicasNotReady},
		{Type: examplev1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: ReasonRollingOut},
		{Type: examplev1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: ReasonAsExpected},
	} {
		meta.SetStatusCondition(&s.Conditions, c)
	}
}

// BenchmarkStatusWorthWriting: the decision every sync makes, for a Ready
// three-replica database whose positions moved (no write).
func BenchmarkStatusWorthWriting(b *testing.B) {
	db := myDatabase()
	rollingOut(&db.Status)
	db.Status.CurrentPrimary = "prod-mysql-0"
	for i := range 3 {
		role := examplev1.InstanceRoleReplica
		if i == 0 {
			role = examplev1.InstanceRolePrimary
		}
		db.Status.Instances = append(db.Status.Instances, examplev1.InstanceStatus{Name: fmt.Sprintf("prod-mysql-%d", i),
			Address: fmt.Sprintf("10.244.0.%d", 10+i), Role: role, Ready: true, Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/4000000"}})
	}
	status := *db.Status.DeepCopy()
	status.Instances[1].Position = &examplev1.InstancePosition{Timeline: 1, LSN: "0/5000000"}
	b.ReportAllocs()
	for b.Loop() {
		if write, _ := statusWorthWriting(db, status, false, now, now); write {
			b.Fatal("a write for moved positions")
		}
	}
}
