package mydatabase

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apis/example/validation"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The status the controller computes passes the server's own /status
// validation in every state: whichever pods exist (a namespace being
// deleted takes them all while the stored status still names a primary
// and a switchover target), scaled down or up, paused or not. A status the
// server refuses is retried for ever (270 refused writes in one mydb log
// before computeStatus listed the named instances whose pods are gone).
func TestComputedStatusPassesValidation(t *testing.T) {
	eng, _ := engine.Lookup("mysql")
	rng := rand.New(rand.NewPCG(20261203, 1))
	reasons := []string{examplev1.TargetPrimaryReasonSwitchover, examplev1.TargetPrimaryReasonFailover, examplev1.TargetPrimaryReasonForcedFailover}
	for i := range 3000 {
		stored := 1 + rng.IntN(5)
		db := myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Replicas = ptr.To(int32(1 + rng.IntN(5))) })
		name := func(n int) string { return fmt.Sprintf("%s-%d", db.Name, n) }
		// A valid stored status: stored instances, a primary among them,
		// perhaps a target.
		if rng.IntN(4) > 0 {
			db.Status.CurrentPrimary = name(rng.IntN(stored))
		}
		for n := range stored {
			in := examplev1.InstanceStatus{Name: name(n), Role: examplev1.InstanceRoleReplica, Ready: rng.IntN(2) == 0}
			if in.Name == db.Status.CurrentPrimary {
				in.Role = examplev1.InstanceRolePrimary
			}
			db.Status.Instances = append(db.Status.Instances, in)
		}
		if db.Status.CurrentPrimary != "" && rng.IntN(3) == 0 {
			at := metav1.NewMicroTime(now)
			db.Status.TargetPrimary, db.Status.TargetPrimaryReason, db.Status.TargetPrimaryTime =
				name(rng.IntN(stored)), reasons[rng.IntN(len(reasons))], &at
		}
		// The pods there are now: any subset of the ordinals up to the
		// larger of the stored and the wanted count.
		var pods []*corev1.Pod
		for n := range max(stored, int(*db.Spec.Replicas)) {
			if rng.IntN(3) > 0 {
				pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name(n), Namespace: db.Namespace}})
			}
		}
		f := findings{primary: choosePrimary(db, pods)}
		for _, p := range pods {
			role := examplev1.InstanceRoleReplica
			if p.Name == f.primary {
				role = examplev1.InstanceRolePrimary
			}
			f.instances = append(f.instances, examplev1.InstanceStatus{Name: p.Name, Role: role, Ready: rng.IntN(2) == 0})
		}
		sts := &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{Replicas: int32(len(pods)), ReadyReplicas: int32(rng.IntN(len(pods) + 1))}}
		paused := rng.IntN(5) == 0

		status := computeStatus(db, eng, sts, f, paused, metav1.NewTime(now))
		if errs := validateStatus(t, db, status); len(errs) > 0 {
			t.Fatalf("state %d: stored primary %q target %q, %d stored instances, pods %v, paused %v: the computed status is refused: %v\nstatus: %+v",
				i, db.Status.CurrentPrimary, db.Status.TargetPrimary, stored, podNames(pods), paused, errs, status)
		}
	}
}

// A database whose pods are all gone keeps its primary, listed with why it
// does not serve.
func TestPrimaryWithoutPodStaysListed(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) {
		d.Status.CurrentPrimary = "prod-mysql-1"
		d.Status.Instances = []examplev1.InstanceStatus{
			{Name: "prod-mysql-0", Role: examplev1.InstanceRoleReplica, Ready: true},
			{Name: "prod-mysql-1", Role: examplev1.InstanceRolePrimary, Ready: true},
		}
	})
	eng, _ := engine.Lookup("mysql")
	status := computeStatus(db, eng, nil, findings{primary: "prod-mysql-1"}, false, metav1.NewTime(now))
	want := []examplev1.InstanceStatus{{Name: "prod-mysql-1", Role: examplev1.InstanceRolePrimary, Message: MessagePodGone}}
	if status.CurrentPrimary != "prod-mysql-1" || fmt.Sprint(status.Instances) != fmt.Sprint(want) {
		t.Errorf("primary %q, instances %+v; want prod-mysql-1, %+v", status.CurrentPrimary, status.Instances, want)
	}
	if errs := validateStatus(t, db, status); len(errs) > 0 {
		t.Errorf("refused: %v", errs)
	}
}

// validateStatus is what the server's /status strategy says of status as
// an update of db.
func validateStatus(t *testing.T, db *examplev1.MyDatabase, status examplev1.MyDatabaseStatus) []string {
	t.Helper()
	updated := db.DeepCopy()
	updated.Status = status
	var oldInternal, newInternal example.MyDatabase
	if err := examplev1.Convert_v1_MyDatabase_To_example_MyDatabase(db, &oldInternal, nil); err != nil {
		t.Fatal(err)
	}
	if err := examplev1.Convert_v1_MyDatabase_To_example_MyDatabase(updated, &newInternal, nil); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, err := range validation.ValidateMyDatabaseStatusUpdate(&newInternal, &oldInternal) {
		out = append(out, err.Error())
	}
	return out
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
