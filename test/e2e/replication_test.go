//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReplication: a 3-replica database of real engine processes has one
// primary and two streaming replicas; writes sent where the -rw Service
// points reach the primary and appear on every replica; scaling to 5
// clones two replicas that hold the data; scaling to 2 keeps the primary;
// a replica whose claim was kept catches up when it comes back.
func TestReplication(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			ns := newNamespace(t)
			ctx := context.Background()
			dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
			created := time.Now()
			db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: examplev1.MyDatabaseSpec{
				Engine: examplev1.Engine(tc.engine.name), Version: tc.version, Replicas: int32Ptr(3), StorageSize: quantity("1Gi")}}
			if _, err := dbs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			startRig(t, ns, "shop", tc.engine)
			h := &replicationHarness{t: t, tc: tc, ns: ns, db: "shop"}
			status := h.waitStreaming(3)
			t.Logf("%s: created to 3 instances streaming in %s", tc.engine.name, time.Since(created).Round(100*time.Millisecond))
			if status.CurrentPrimary != "shop-0" {
				t.Errorf("a new database's primary is %q, want its first pod", status.CurrentPrimary)
			}

			primary := h.servicePods(names.ReadWriteService("shop"))
			if len(primary) != 1 || primary[0] != status.CurrentPrimary {
				t.Fatalf("the -rw Service selects %v, want only the current primary %s", primary, status.CurrentPrimary)
			}
			if alias := h.servicePods(names.ClientService("shop")); len(alias) != 1 || alias[0] != primary[0] {
				t.Errorf("the <name> Service selects %v, want the primary like -rw", alias)
			}
			replicas := h.servicePods(names.ReadOnlyService("shop"))
			if len(replicas) != 2 || contains(replicas, primary[0]) {
				t.Fatalf("the -ro Service selects %v, want the two replicas", replicas)
			}
			if all := h.servicePods(names.AnyInstanceService("shop")); len(all) != 3 {
				t.Errorf("the -r Service selects %v, want every instance", all)
			}

			w := h.connect(primary[0])
			mustExec(t, w, "CREATE TABLE orders (id INT PRIMARY KEY, item VARCHAR(64))")
			h.insert(w, 0, 100)
			for _, r := range replicas {
				h.waitRows(r, 100)
				if _, err := h.connect(r).Exec("INSERT INTO orders VALUES (1000, 'on a replica')"); err == nil || !strings.Contains(err.Error(), tc.readOnlyError) {
					t.Errorf("a write on replica %s: %v, want it refused as read-only", r, err)
				}
			}

			// Scale up: two new replicas clone the primary.
			h.scale(5)
			status = h.waitStreaming(5)
			for _, r := range []string{"shop-3", "shop-4"} {
				h.waitRows(r, 100)
			}
			if status.CurrentPrimary != "shop-0" {
				t.Errorf("scaling up moved the primary to %s", status.CurrentPrimary)
			}

			// Scale down: the highest pods go, never the primary.
			h.scale(2)
			status = h.waitStreaming(2)
			if status.CurrentPrimary != "shop-0" || len(status.Instances) != 2 {
				t.Fatalf("after scaling to 2: primary %s, instances %+v", status.CurrentPrimary, status.Instances)
			}
			h.insert(w, 100, 150)
			h.waitRows("shop-1", 150)

			// Back to 3: shop-2 comes back on its kept claim, with data of
			// before the scale-down; it must catch up, not serve it.
			h.scale(3)
			h.waitStreaming(3)
			h.waitRows("shop-2", 150)
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
