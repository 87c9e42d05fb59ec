package mydatabase

import (
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Every pod of a database can read Ready to Kubernetes (kwok's always do)
// while no engine serves: the database is Ready only when its primary's
// manager reports a writable primary.
func TestReadyNeedsAServingPrimary(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Replicas = ptr.To[int32](2) })
	eng, _ := engine.Lookup(string(db.Spec.Engine))
	allReady := &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2}}
	primary := func(ready bool, message string) examplev1.InstanceStatus {
		return examplev1.InstanceStatus{Name: "prod-mysql-0", Role: examplev1.InstanceRolePrimary, Ready: ready, Message: message}
	}
	replica := examplev1.InstanceStatus{Name: "prod-mysql-1", Role: examplev1.InstanceRoleReplica, Ready: true}
	for _, tc := range []struct {
		name        string
		sts         *appsv1.StatefulSet
		f           findings
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantMessage string
		wantRollout string
	}{
		{name: "pods ready, primary serves", sts: allReady,
			f:         findings{primary: "prod-mysql-0", instances: []examplev1.InstanceStatus{primary(true, ""), replica}},
			wantReady: metav1.ConditionTrue, wantReason: ReasonAllReplicasReady, wantMessage: "primary prod-mysql-0 serves", wantRollout: ReasonRolloutComplete},
		{name: "pods ready, no manager answers", sts: allReady,
			f:         findings{primary: "prod-mysql-0", instances: []examplev1.InstanceStatus{primary(false, "the instance manager did not answer: connection refused"), replica}},
			wantReady: metav1.ConditionFalse, wantReason: ReasonPrimaryNotServing, wantMessage: "connection refused", wantRollout: ReasonRolloutComplete},
		{name: "pods ready, the primary's pod gone", sts: allReady,
			f:         findings{primary: "prod-mysql-0"},
			wantReady: metav1.ConditionFalse, wantReason: ReasonPrimaryNotServing, wantMessage: "prod-mysql-0 does not serve: " + MessagePodGone, wantRollout: ReasonRolloutComplete},
		{name: "pods ready, no primary chosen", sts: allReady,
			wantReady: metav1.ConditionFalse, wantReason: ReasonPrimaryNotServing, wantMessage: "no instance is the primary", wantRollout: ReasonRolloutComplete},
		{name: "a replica's pod not ready", sts: &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{Replicas: 2, ReadyReplicas: 1, UpdatedReplicas: 2}},
			f:         findings{primary: "prod-mysql-0", instances: []examplev1.InstanceStatus{primary(true, ""), replica}},
			wantReady: metav1.ConditionFalse, wantReason: ReasonReplicasNotReady, wantMessage: "1 of 2", wantRollout: ReasonRollingOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status := computeStatus(db, eng, tc.sts, tc.f, false, metav1.NewTime(now))
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReady)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("Ready = %+v, want %s/%s with %q", c, tc.wantReady, tc.wantReason, tc.wantMessage)
			}
			if p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing); p == nil || p.Reason != tc.wantRollout {
				t.Errorf("Progressing = %+v, want %s", p, tc.wantRollout)
			}
		})
	}
}

func TestPrimaryNotServingIsDegradedAfterAGrace(t *testing.T) {
	readyPod := func(since time.Time) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-0"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since)}}}}
	}
	unready := examplev1.MyDatabaseStatus{CurrentPrimary: "prod-mysql-0", Instances: []examplev1.InstanceStatus{
		{Name: "prod-mysql-0", Role: examplev1.InstanceRolePrimary, Message: "the instance manager did not answer: connection refused"}}}
	serving := *unready.DeepCopy()
	serving.Instances[0].Ready, serving.Instances[0].Message = true, ""
	switching := *unready.DeepCopy()
	switching.TargetPrimary = "prod-mysql-1"
	justFailedOver := *unready.DeepCopy()
	justFailedOver.TargetPrimaryTime = ptr.To(metav1.NewMicroTime(now.Add(-time.Second)))
	notReadyPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-0"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}}}
	for _, tc := range []struct {
		name   string
		status examplev1.MyDatabaseStatus
		pod    *corev1.Pod
		want   bool
	}{
		{name: "pod Ready past the grace, manager silent", status: unready, pod: readyPod(now.Add(-primaryServeGrace)), want: true},
		{name: "pod Ready within the grace (bootstrapping)", status: unready, pod: readyPod(now.Add(-primaryServeGrace + time.Second))},
		{name: "primary serves", status: serving, pod: readyPod(now.Add(-time.Hour))},
		{name: "pod not Ready: nothing disagrees", status: unready, pod: notReadyPod},
		{name: "switchover under way", status: switching, pod: readyPod(now.Add(-time.Hour))},
		{name: "primary chosen within the grace", status: justFailedOver, pod: readyPod(now.Add(-time.Hour))},
		{name: "no pod", status: unready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, got := primaryNotServing(tc.status, tc.pod, now)
			if got != tc.want {
				t.Fatalf("primaryNotServing = %v (%+v), want %v", got, b, tc.want)
			}
			if got && (b.reason != ReasonPrimaryNotServing || !strings.Contains(b.message, "connection refused") || !strings.Contains(b.message, `pod "prod-mysql-0" is Ready`)) {
				t.Errorf("blockage %+v does not say why", b)
			}
		})
	}
}

// --engine-image replaces the pinned image of the versions it names, and
// only those.
func TestEngineImageOverrides(t *testing.T) {
	overrides := engine.ImageOverrides{"postgres": {"16": "mydb.local/postgres:16"}}
	eng, _ := engine.Lookup("postgres")
	for version, want := range map[string]string{"16": "mydb.local/postgres:16", "17": eng.Images["17"]} {
		db := myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Engine, d.Spec.Version = examplev1.EnginePostgres, version })
		sts := NewStatefulSet(db, eng, overrides, "mydb:test", false)
		if got := sts.Spec.Template.Spec.Containers[0].Image; got != want {
			t.Errorf("postgres %s runs %q, want %q", version, got, want)
		}
		if got := sts.Spec.Template.Spec.InitContainers[0].Image; got != "mydb:test" {
			t.Errorf("the init container runs %q, want the instance image", got)
		}
	}
}
