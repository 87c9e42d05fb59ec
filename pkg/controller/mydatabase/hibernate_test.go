package mydatabase

import (
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestHibernation(t *testing.T) {
	hibernating := func(d *examplev1.MyDatabase) { d.Spec.Hibernate = true }
	wasHibernated := func(d *examplev1.MyDatabase) {
		d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: examplev1.ConditionHibernated, Status: metav1.ConditionTrue, Reason: ReasonHibernated})
	}
	for _, tc := range []struct {
		name       string
		db         *examplev1.MyDatabase
		podsLeft   int
		serving    bool
		wantReason string // "" for no condition
		wantHold   bool
	}{
		{"awake", myDatabase(), 3, true, "", false},
		{"awake, the primary down: failover's business", myDatabase(), 3, false, "", false},
		{"asked to hibernate, pods left", myDatabase(hibernating), 2, false, ReasonHibernating, true},
		{"hibernated", myDatabase(hibernating), 0, false, ReasonHibernated, true},
		{"woken, the primary not serving yet", myDatabase(wasHibernated), 3, false, ReasonWaking, true},
		{"woken, the primary serving", myDatabase(wasHibernated), 3, true, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cond, hold := hibernation(tc.db, tc.podsLeft, tc.serving)
			reason := ""
			if cond != nil {
				reason = cond.Reason
				if want := map[string]metav1.ConditionStatus{ReasonHibernated: metav1.ConditionTrue}[reason]; want == "" && cond.Status != metav1.ConditionFalse || want != "" && cond.Status != want {
					t.Errorf("condition %+v", cond)
				}
			}
			if reason != tc.wantReason || hold != tc.wantHold {
				t.Errorf("reason %q hold %v, want %q %v", reason, hold, tc.wantReason, tc.wantHold)
			}
		})
	}
}

func TestHibernateStopsThePodsAndKeepsTheRest(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.Spec.Hibernate = true
	db.Generation++
	// The pods are gone: only the claims, Secrets and the rest remain.
	var kept []runtime.Object
	for _, obj := range children {
		if _, isPod := obj.(*corev1.Pod); !isPod {
			kept = append(kept, obj)
		}
	}
	f := newFixture(t, []*examplev1.MyDatabase{db}, kept...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
	if r := ptr.Deref(sts.Spec.Replicas, -1); r != 0 {
		t.Errorf("StatefulSet replicas %d, want 0", r)
	}
	for _, w := range writes(f.kubeClient.Actions()) {
		if w == "delete persistentvolumeclaims" || w == "delete secrets" {
			t.Errorf("hibernating wrote %q", w)
		}
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	h := meta.FindStatusCondition(status.Conditions, examplev1.ConditionHibernated)
	ready := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReady)
	if h == nil || h.Status != metav1.ConditionTrue || ready == nil || ready.Reason != ReasonHibernated || status.CurrentPrimary != db.Status.CurrentPrimary {
		t.Errorf("Hibernated %+v, Ready %+v, primary %q (was %q)", h, ready, status.CurrentPrimary, db.Status.CurrentPrimary)
	}
	expectEvent(t, f.recorder, "Normal Hibernated")
}
