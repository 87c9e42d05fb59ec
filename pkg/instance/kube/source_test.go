package kube

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	"github.com/mydb-dev/mydb/pkg/instance"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

func database(primary string, instances ...examplev1.InstanceStatus) *examplev1.MyDatabase {
	return &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "team-a"},
		Status:     examplev1.MyDatabaseStatus{CurrentPrimary: primary, Instances: instances},
	}
}

func TestTopologyOf(t *testing.T) {
	withAddress := database("db-1",
		examplev1.InstanceStatus{Name: "db-0", Address: "10.0.0.4", Role: examplev1.InstanceRoleReplica},
		examplev1.InstanceStatus{Name: "db-1", Address: "10.0.0.5", Role: examplev1.InstanceRolePrimary})
	got, ok := TopologyOf(withAddress, 5432, 8000, 0)
	want := instance.Topology{Primary: "db-1", PrimaryHost: "10.0.0.5", PrimaryPort: 5432, PrimaryStatusURL: "https://10.0.0.5:8000"}
	if !ok || got != want {
		t.Errorf("TopologyOf = %+v, %v; want %+v", got, ok, want)
	}
	withAddress.Spec.Replication = &examplev1.ReplicationSpec{Mode: examplev1.ReplicationModeSync}
	want.Synchronous = true
	if got, ok := TopologyOf(withAddress, 5432, 8000, 0); !ok || got != want {
		t.Errorf("Sync: TopologyOf = %+v, %v; want %+v", got, ok, want)
	}
	withAddress.Spec.Replication.Mode = examplev1.ReplicationModeAsync
	if got, _ := TopologyOf(withAddress, 5432, 8000, 0); got.Synchronous {
		t.Errorf("Async: TopologyOf = %+v, want not synchronous", got)
	}
	// MySQL's admin interface: where replicas connect only while clients
	// get a server certificate of the user's own.
	if got, _ := TopologyOf(withAddress, 3306, 8000, 33062); got.ReplicationPort() != 3306 {
		t.Errorf("without a certificate of the user's own: replicas connect to port %d, want the engine's 3306", got.ReplicationPort())
	}
	withAddress.Spec.TLS = &examplev1.TLSSpec{ServerCertificateSecret: "prod-tls"}
	if got, _ := TopologyOf(withAddress, 3306, 8000, 33062); got.ReplicationPort() != 33062 || got.PrimaryPort != 3306 {
		t.Errorf("with a certificate of the user's own: replicas connect to port %d (engine %d), want the admin interface's 33062", got.ReplicationPort(), got.PrimaryPort)
	}
	if got, _ := TopologyOf(withAddress, 5432, 8000, 0); got.ReplicationPort() != 5432 {
		t.Errorf("an engine without an admin interface: replicas connect to port %d, want 5432", got.ReplicationPort())
	}
	for name, db := range map[string]*examplev1.MyDatabase{
		"no primary yet":          database("", examplev1.InstanceStatus{Name: "db-0", Address: "10.0.0.4"}),
		"the primary has no IP":   database("db-0", examplev1.InstanceStatus{Name: "db-0"}),
		"the primary is unlisted": database("db-2", examplev1.InstanceStatus{Name: "db-0", Address: "10.0.0.4"}),
	} {
		if got, ok := TopologyOf(db, 5432, 8000, 0); ok {
			t.Errorf("%s: topology %+v, want none", name, got)
		}
	}
}

// TestWatchFollowsTheStatus: the source sends the topology once the
// controller names a primary with an address, and again when it moves.
func TestWatchFollowsTheStatus(t *testing.T) {
	client := mydbfake.NewClientset(database(""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := Source{Client: client, Namespace: "team-a", Database: "db", Port: 3306, StatusPort: 8000, Log: slog.Default()}.Watch(ctx)
	update := func(db *examplev1.MyDatabase) {
		t.Helper()
		if _, err := client.ExampleV1().MyDatabases("team-a").UpdateStatus(ctx, db, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	next := func() instance.Topology {
		t.Helper()
		select {
		case got := <-ch:
			return got
		case <-ctx.Done():
			t.Fatal("no topology arrived")
			return instance.Topology{}
		}
	}
	update(database("db-0", examplev1.InstanceStatus{Name: "db-0", Address: "10.0.0.4"}))
	if got := next(); got.Primary != "db-0" || got.PrimaryHost != "10.0.0.4" || got.PrimaryPort != 3306 {
		t.Errorf("first topology %+v", got)
	}
	update(database("db-1", examplev1.InstanceStatus{Name: "db-0", Address: "10.0.0.4"}, examplev1.InstanceStatus{Name: "db-1", Address: "10.0.0.5"}))
	if got := next(); got.Primary != "db-1" || got.PrimaryStatusURL != "https://10.0.0.5:8000" {
		t.Errorf("after the primary moved: %+v", got)
	}
}

// TestWatchFencesWhenTheDatabaseCannotBeRead: with reads failing for half
// of failoverDelay, the source asks the primary to fence; a read that works
// again lifts it.
func TestWatchFencesWhenTheDatabaseCannotBeRead(t *testing.T) {
	db := database("db-0", examplev1.InstanceStatus{Name: "db-0", Address: "10.0.0.4"})
	db.Spec.FailoverDelay = &metav1.Duration{Duration: 10 * time.Second}
	client := mydbfake.NewClientset(db)
	var failing atomic.Bool
	client.PrependReactor("get", "mydatabases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := Source{Client: client, Namespace: "team-a", Database: "db", Port: 5432, StatusPort: 8000, Log: slog.Default(), Clock: clk}.Watch(ctx)
	if got := <-ch; got.Primary != "db-0" || got.Fence != "" {
		t.Fatalf("first topology %+v", got)
	}
	// next steps the fake clock a second at a time until a topology comes.
	next := func(maxSteps int) (instance.Topology, int) {
		t.Helper()
		for i := 1; i <= maxSteps; i++ {
			for !clk.HasWaiters() {
				time.Sleep(time.Millisecond)
			}
			clk.Step(time.Second)
			select {
			case got := <-ch:
				return got, i
			case <-time.After(50 * time.Millisecond):
			}
		}
		t.Fatalf("no topology within %d steps", maxSteps)
		return instance.Topology{}, 0
	}
	failing.Store(true)
	got, steps := next(20)
	if got.Fence == "" || got.Primary != "db-0" || steps < 5 || steps > 7 {
		t.Errorf("after %d failed reads of a second: %+v", steps, got)
	}
	failing.Store(false)
	if got, _ := next(5); got.Fence != "" || got.Primary != "db-0" {
		t.Errorf("after a read worked again: %+v", got)
	}
}
