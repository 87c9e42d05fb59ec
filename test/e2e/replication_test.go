//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// replicationCase is one engine the replication scenarios run on.
type replicationCase struct {
	engine  rigEngine
	version string
	// open connects to one instance as the application user.
	open func(host, user, password, database string) (*sql.DB, error)
	// readOnlyError is how the engine refuses a write on a replica.
	readOnlyError string
}

var replicationCases = []replicationCase{
	{
		engine: rigPostgres, version: "15",
		open: func(host, user, password, database string) (*sql.DB, error) {
			return sql.Open("pgx", fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&connect_timeout=5",
				user, password, net.JoinHostPort(host, "5432"), database))
		},
		readOnlyError: "read-only transaction",
	},
	{
		engine: rigMariaDB, version: "10.11",
		open: func(host, user, password, database string) (*sql.DB, error) {
			return sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=5s", user, password, net.JoinHostPort(host, "3306"), database))
		},
		readOnlyError: "read-only",
	},
}

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

func int32Ptr(n int32) *int32 { return &n }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

type replicationHarness struct {
	t      *testing.T
	tc     replicationCase
	ns, db string
}

// waitStreaming waits until the database has n instances, all ready in
// their roles, and Replicating is True.
func (h *replicationHarness) waitStreaming(n int) examplev1.MyDatabaseStatus {
	h.t.Helper()
	dbs := mydbClient(h.t, restConfig(h.t)).ExampleV1().MyDatabases(h.ns)
	var status examplev1.MyDatabaseStatus
	eventually(h.t, 4*time.Minute, func() error {
		db, err := dbs.Get(context.Background(), h.db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status = db.Status
		if len(status.Instances) != n {
			return fmt.Errorf("%d instances, want %d: %+v", len(status.Instances), n, status.Instances)
		}
		for _, in := range status.Instances {
			if !in.Ready {
				return fmt.Errorf("instance %s (%s) is not ready: %s", in.Name, in.Role, in.Message)
			}
		}
		if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReplicating); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Replicating = %+v", c)
		}
		return nil
	})
	return status
}

// servicePods lists the pods a Service's selector picks, by name.
func (h *replicationHarness) servicePods(service string) []string {
	h.t.Helper()
	kube := kubeClient(h.t)
	svc, err := kube.CoreV1().Services(h.ns).Get(context.Background(), service, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	pods, err := kube.CoreV1().Pods(h.ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out
}

// connect opens the application user's pool on a pod, at its IP.
func (h *replicationHarness) connect(pod string) *sql.DB {
	h.t.Helper()
	kube := kubeClient(h.t)
	p, err := kube.CoreV1().Pods(h.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	secret, err := kube.CoreV1().Secrets(h.ns).Get(context.Background(), h.db+"-credentials", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	db, err := h.tc.open(p.Status.PodIP, string(secret.Data["username"]), string(secret.Data["password"]), string(secret.Data["database"]))
	if err != nil {
		h.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	h.t.Cleanup(func() { db.Close() })
	return db
}

func (h *replicationHarness) insert(db *sql.DB, from, to int) {
	h.t.Helper()
	for i := from; i < to; i++ {
		mustExec(h.t, db, "INSERT INTO orders VALUES ("+fmt.Sprint(i)+", 'item "+fmt.Sprint(i)+"')")
	}
}

// waitRows waits until pod's instance holds want rows of orders.
func (h *replicationHarness) waitRows(pod string, want int) {
	h.t.Helper()
	db := h.connect(pod)
	eventually(h.t, 2*time.Minute, func() error {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM orders").Scan(&n); err != nil {
			return fmt.Errorf("%s: %v", pod, err)
		}
		if n != want {
			return fmt.Errorf("%s holds %d rows, want %d", pod, n, want)
		}
		return nil
	})
}

func (h *replicationHarness) scale(n int) {
	h.t.Helper()
	mustKubectl(h.t, "", "scale", "mdb/"+h.db, "-n", h.ns, fmt.Sprintf("--replicas=%d", n))
}
