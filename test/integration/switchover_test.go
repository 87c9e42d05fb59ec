package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSwitchoverAction(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	client := newClient(t).ExampleV1()
	dbs := client.MyDatabases(ns)
	db, err := dbs.Create(ctx, newMyDatabase("shop"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the controller would report: shop-0 primary, shop-1 and shop-3
	// ready replicas (shop-3 further), shop-2 a replica that does not stream.
	db.Status.CurrentPrimary = "shop-0"
	db.Status.TargetPrimary = "shop-0"
	db.Status.Instances = []examplev1.InstanceStatus{
		{Name: "shop-0", Address: "10.0.0.1", Role: examplev1.InstanceRolePrimary, Ready: true},
		{Name: "shop-1", Address: "10.0.0.2", Role: examplev1.InstanceRoleReplica, Ready: true,
			Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/3000000"}},
		{Name: "shop-2", Address: "10.0.0.3", Role: examplev1.InstanceRoleReplica, Message: "not streaming",
			Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/9000000"}},
		{Name: "shop-3", Address: "10.0.0.4", Role: examplev1.InstanceRoleReplica, Ready: true,
			Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/3000100"}},
	}
	if db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	switchover := func(target string, opts metav1.CreateOptions) (*examplev1.MyDatabaseSwitchover, error) {
		return dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: target}}, opts)
	}
	stored := func() *examplev1.MyDatabase {
		t.Helper()
		db, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}

	for _, tc := range []struct{ name, target string }{
		{"a replica that is not ready", "shop-2"},
		{"the primary itself", "shop-0"},
		{"no such instance", "shop-7"},
	} {
		t.Run("422 for "+tc.name, func(t *testing.T) {
			if _, err := switchover(tc.target, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
				t.Errorf("%v, want 422", err)
			}
		})
	}
	t.Run("dry run decides and writes nothing", func(t *testing.T) {
		got, err := switchover("shop-1", metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.OldPrimary != "shop-0" || got.Status.NewPrimary != "shop-1" {
			t.Errorf("answer %+v", got.Status)
		}
		if s := stored().Status; s.TargetPrimary != "shop-0" {
			t.Errorf("dry run stored targetPrimary %q", s.TargetPrimary)
		}
	})
	t.Run("missing database", func(t *testing.T) {
		if _, err := dbs.Switchover(ctx, "nope", &examplev1.MyDatabaseSwitchover{}, metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%v, want 404", err)
		}
	})
	t.Run("201 records the target", func(t *testing.T) {
		// A bare {} picks the ready replica that is furthest.
		res := do(t, http.MethodPost, dbPath(ns, "shop", "switchover"), "application/json", []byte(`{}`))
		if res.code != http.StatusCreated {
			t.Fatalf("%d %s", res.code, res.body)
		}
		var got examplev1.MyDatabaseSwitchover
		if err := json.Unmarshal(res.body, &got); err != nil {
			t.Fatal(err)
		}
		if got.Kind != "MyDatabaseSwitchover" || got.Status.OldPrimary != "shop-0" || got.Status.NewPrimary != "shop-3" || got.Status.StartTime == nil {
			t.Errorf("answer %s", res.body)
		}
		s := stored().Status
		if s.TargetPrimary != "shop-3" || s.CurrentPrimary != "shop-0" || s.TargetPrimaryReason != examplev1.TargetPrimaryReasonSwitchover || s.TargetPrimaryTime == nil {
			t.Errorf("status %+v", s)
		}
	})
	t.Run("409 while one is under way", func(t *testing.T) {
		if _, err := switchover("shop-1", metav1.CreateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("%v, want 409", err)
		}
		if _, err := switchover("", metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsConflict(err) {
			t.Errorf("dry run: %v, want 409", err)
		}
	})
	t.Run("the spec is untouched", func(t *testing.T) {
		if got := stored(); got.Generation != db.Generation {
			t.Errorf("generation %d, was %d", got.Generation, db.Generation)
		}
	})
	t.Run("status validation refuses a target that is not an instance", func(t *testing.T) {
		db := stored()
		db.Status.TargetPrimary = "elsewhere"
		if _, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("%v, want 422", err)
		}
	})
	t.Run("failoverDelay is bounded", func(t *testing.T) {
		for _, d := range []string{"1s", "11m"} {
			body := `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"fd"},"spec":{"engine":"postgres","storageSize":"1Gi","failoverDelay":"` + d + `"}}`
			res := do(t, http.MethodPost, "/apis/example.com/v1/namespaces/"+ns+"/mydatabases", "application/json", []byte(body))
			if res.code != http.StatusUnprocessableEntity {
				t.Errorf("failoverDelay %s: %d %s", d, res.code, res.body)
			}
		}
		created, err := dbs.Create(ctx, newMyDatabase("fd"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.FailoverDelay == nil || created.Spec.FailoverDelay.Duration != examplev1.DefaultFailoverDelay {
			t.Errorf("default failoverDelay %v", created.Spec.FailoverDelay)
		}
	})
	t.Run("replication mode defaults to Async, Sync needs a replica, and it may change", func(t *testing.T) {
		for _, spec := range []string{`"replicas":1,"replication":{"mode":"Sync"}`, `"replicas":3,"replication":{"mode":"sync"}`} {
			body := `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"rm"},"spec":{"engine":"postgres","storageSize":"1Gi",` + spec + `}}`
			res := do(t, http.MethodPost, "/apis/example.com/v1/namespaces/"+ns+"/mydatabases", "application/json", []byte(body))
			if res.code != http.StatusUnprocessableEntity {
				t.Errorf("%s: %d %s", spec, res.code, res.body)
			}
		}
		created, err := dbs.Create(ctx, newMyDatabase("rm"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.Replication == nil || created.Spec.Replication.Mode != examplev1.ReplicationModeAsync {
			t.Errorf("default replication %+v", created.Spec.Replication)
		}
		created.Spec.Replication.Mode = examplev1.ReplicationModeSync
		updated, err := dbs.Update(ctx, created, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("to Sync: %v", err)
		}
		updated.Spec.Replicas = ptr.To[int32](1)
		if _, err := dbs.Update(ctx, updated, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("a Sync database scaled to one: %v, want 422", err)
		}
	})
}

// TestForcedFailoverAction: allowWriteLoss is accepted only while the
// controller holds a failover back, only with a named replica, and records
// a ForcedFailover target.
func TestForcedFailoverAction(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	db, err := dbs.Create(ctx, newMyDatabase("shop"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The primary is lost; shop-1 follows it (not ready, since it streams
	// from nothing); shop-2 was lost with it.
	db.Status.CurrentPrimary, db.Status.TargetPrimary = "shop-0", "shop-0"
	db.Status.Instances = []examplev1.InstanceStatus{
		{Name: "shop-0", Role: examplev1.InstanceRolePrimary},
		{Name: "shop-1", Role: examplev1.InstanceRoleReplica, Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/4000000"}},
		{Name: "shop-2", Role: examplev1.InstanceRoleReplica, Position: &examplev1.InstancePosition{Timeline: 1, LSN: "0/4800000"}},
	}
	if db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	force := func(target string) error {
		_, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: target, AllowWriteLoss: true}}, metav1.CreateOptions{})
		return err
	}
	if err := force("shop-1"); !apierrors.IsConflict(err) {
		t.Errorf("with no failover held back: %v, want 409", err)
	}
	// The controller holds the failover back.
	db.Status.Conditions = []metav1.Condition{{Type: examplev1.ConditionPrimaryChange, Status: metav1.ConditionTrue,
		Reason: examplev1.ReasonFailoverWouldLoseWrites, Message: "held back", LastTransitionTime: metav1.Now()}}
	if db, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{"": "spec.targetInstance: Required value", "shop-0": "is the primary", "shop-9": "not an instance"} {
		if err := force(target); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("target %q: %v, want 422 saying %q", target, err, want)
		}
	}
	// A planned switchover to a replica that is not ready is still 422.
	if _, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: "shop-1"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a planned switchover to a replica that is not ready: %v, want 422", err)
	}
	if err := force("shop-1"); err != nil {
		t.Fatal(err)
	}
	got, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.Status; s.TargetPrimary != "shop-1" || s.CurrentPrimary != "shop-0" || s.TargetPrimaryReason != examplev1.TargetPrimaryReasonForcedFailover {
		t.Errorf("status %+v", s)
	}
	if err := force("shop-1"); !apierrors.IsConflict(err) {
		t.Errorf("while the forced failover is under way: %v, want 409", err)
	}
}
