//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestRolesAndDatabasesFromTheSpec, for postgres and mariadb with real
// engines on the rig, through the aggregator: spec.databases and
// spec.roles appear on the primary and its replicas; a role whose
// password Secret does not exist waits, saying so, and appears once it
// does; a changed password takes effect; a role with ensure Absent goes;
// a database taken out of the list stays with its data; a privilege on a
// database the spec does not keep is refused with its field path.
func TestRolesAndDatabasesFromTheSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbs, _, h, status := startShop(t, restConfig(t), tc, failoverDelay, "")
			kube := kubeClient(t)
			secret := func(name, password string) {
				t.Helper()
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"password": password}}
				if _, err := kube.CoreV1().Secrets(h.ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					if _, err := kube.CoreV1().Secrets(h.ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			patch := func(spec map[string]any) error {
				b, _ := json.Marshal(map[string]any{"spec": spec})
				_, err := dbs.Patch(ctx, "shop", types.MergePatchType, b, metav1.PatchOptions{})
				return err
			}
			podIP := func(pod string) string {
				p, err := kube.CoreV1().Pods(h.ns).Get(ctx, pod, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return p.Status.PodIP
			}
			login := func(pod, user, password, database string) (*sql.DB, error) {
				db, err := tc.open(podIP(pod), user, password, database)
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { db.Close() })
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				return db, db.PingContext(pctx)
			}
			// waitObjects waits until status.roles and status.databases hold
			// want (name -> state), and answers the database.
			waitObjects := func(what string, want map[string]examplev1.ManagedObjectState, cond func(*examplev1.MyDatabase) error) *examplev1.MyDatabase {
				t.Helper()
				var db *examplev1.MyDatabase
				eventually(t, 2*time.Minute, func() error {
					var err error
					if db, err = dbs.Get(ctx, "shop", metav1.GetOptions{}); err != nil {
						return err
					}
					got := map[string]examplev1.ManagedObjectState{}
					for _, s := range append(append([]examplev1.ManagedObjectStatus{}, db.Status.Roles...), db.Status.Databases...) {
						got[s.Name] = s.State
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						return fmt.Errorf("%s: roles %+v, databases %+v", what, db.Status.Roles, db.Status.Databases)
					}
					if cond != nil {
						return cond(db)
					}
					return nil
				})
				return db
			}
			primary := status.CurrentPrimary
			replica := status.Instances[0].Name
			if replica == primary {
				replica = status.Instances[1].Name
			}

			// A privilege on a database the spec does not keep: 422 naming it.
			err := patch(map[string]any{"roles": []any{map[string]any{"name": "alice", "passwordSecret": map[string]any{"name": "alice-password"},
				"privileges": []any{map[string]any{"database": "nowhere", "access": "ReadOnly"}}}}})
			if err == nil || !strings.Contains(err.Error(), "spec.roles[0].privileges[0].database") {
				t.Errorf("a privilege on a database the spec does not keep: %v, want a 422 naming spec.roles[0].privileges[0].database", err)
			}

			secret("alice-password", "alice-1")
			start := time.Now()
			roles := []any{
				map[string]any{"name": "alice", "passwordSecret": map[string]any{"name": "alice-password"}},
				map[string]any{"name": "bob", "passwordSecret": map[string]any{"name": "bob-password"},
					"privileges": []any{map[string]any{"database": "orders", "access": "ReadOnly"}}},
			}
			databases := []any{map[string]any{"name": "orders", "owner": "alice"}}
			if err := patch(map[string]any{"roles": roles, "databases": databases}); err != nil {
				t.Fatal(err)
			}
			db := waitObjects("alice and orders made, bob waiting for his Secret", map[string]examplev1.ManagedObjectState{
				"alice": examplev1.ManagedObjectPresent, "orders": examplev1.ManagedObjectPresent, "bob": examplev1.ManagedObjectPending,
			}, func(db *examplev1.MyDatabase) error {
				c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionRolesAndDatabasesApplied)
				if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `Secret "bob-password" does not exist`) {
					return fmt.Errorf("RolesAndDatabasesApplied %s", conditionMessage(c))
				}
				return nil
			})
			t.Logf("%s: alice and orders made in %s; bob: %s", tc.engine.name, time.Since(start).Round(100*time.Millisecond), db.Status.Roles[1].Message)
			alice, err := login(primary, "alice", "alice-1", "orders")
			if err != nil {
				t.Fatalf("alice on the primary: %v", err)
			}
			mustExec(t, alice, "CREATE TABLE items (id INT PRIMARY KEY)")
			mustExec(t, alice, "INSERT INTO items VALUES (1), (2)")

			start = time.Now()
			secret("bob-password", "bob-1")
			waitObjects("bob made once his Secret exists", map[string]examplev1.ManagedObjectState{
				"alice": examplev1.ManagedObjectPresent, "orders": examplev1.ManagedObjectPresent, "bob": examplev1.ManagedObjectPresent,
			}, func(db *examplev1.MyDatabase) error {
				if c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionRolesAndDatabasesApplied); c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("RolesAndDatabasesApplied %s", conditionMessage(c))
				}
				return nil
			})
			t.Logf("%s: bob made %s after his Secret", tc.engine.name, time.Since(start).Round(100*time.Millisecond))
			eventually(t, time.Minute, func() error {
				bob, err := login(replica, "bob", "bob-1", "orders")
				if err != nil {
					return err
				}
				var n int
				if err := bob.QueryRow("SELECT count(*) FROM items").Scan(&n); err != nil || n != 2 {
					return fmt.Errorf("bob reads %d rows on %s: %v", n, replica, err)
				}
				return nil
			})
			bob, _ := login(primary, "bob", "bob-1", "orders")
			if _, err := bob.Exec("INSERT INTO items VALUES (3)"); err == nil {
				t.Errorf("bob (ReadOnly) wrote on the primary")
			}

			// A new password in alice's Secret.
			start = time.Now()
			secret("alice-password", "alice-2")
			eventually(t, 2*time.Minute, func() error {
				if _, err := login(primary, "alice", "alice-2", "orders"); err != nil {
					return fmt.Errorf("alice's new password: %v", err)
				}
				return nil
			})
			t.Logf("%s: alice's new password took effect %s after her Secret changed", tc.engine.name, time.Since(start).Round(100*time.Millisecond))
			if _, err := login(primary, "alice", "alice-1", "orders"); err == nil {
				t.Errorf("alice's old password still logs in")
			}

			// bob goes; orders leaves the list and stays.
			roles[1] = map[string]any{"name": "bob", "ensure": "Absent"}
			if err := patch(map[string]any{"roles": roles, "databases": nil}); err != nil {
				t.Fatal(err)
			}
			waitObjects("bob dropped, orders no longer kept", map[string]examplev1.ManagedObjectState{
				"alice": examplev1.ManagedObjectPresent, "bob": examplev1.ManagedObjectAbsent,
			}, nil)
			if _, err := login(primary, "bob", "bob-1", "orders"); err == nil {
				t.Errorf("bob logs in after ensure: Absent")
			}
			var n int
			if alice2, err := login(primary, "alice", "alice-2", "orders"); err != nil {
				t.Errorf("orders taken out of the list: %v", err)
			} else if err := alice2.QueryRow("SELECT count(*) FROM items").Scan(&n); err != nil || n != 2 {
				t.Errorf("orders taken out of the list holds %d rows: %v", n, err)
			}
		})
	}
}
