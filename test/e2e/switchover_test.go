//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"sort"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSwitchoverAndFailover: for each engine, 3 real instances under a
// steady write load from a client that records every acknowledged write.
// Three switchovers lose no acknowledged write and each keeps writes down
// briefly; kill -9 of the primary's processes promotes the most advanced
// replica within failoverDelay plus a stated bound, losing at most the few
// writes asynchronous replication had not shipped; the old primary, brought
// back, rejoins as a replica and never takes a write again.
func TestSwitchoverAndFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			ctx := context.Background()
			dbs, r, h, status := startShop(t, restConfig(t), tc, failoverDelay, "")

			w := startWriter(t, h)
			defer w.stop()
			time.Sleep(time.Second)

			// Switchovers: to a named replica, to any, and back.
			var unavailable []time.Duration
			for i, to := range []string{"shop-1", "", "shop-0"} {
				old := status.CurrentPrimary
				if to == old {
					to = ""
				}
				requested := time.Now()
				answer, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: to}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("switchover %d: %v", i+1, err)
				}
				if answer.Status.OldPrimary != old || (to != "" && answer.Status.NewPrimary != to) {
					t.Fatalf("switchover %d answered %+v", i+1, answer.Status)
				}
				// A second request while it is under way is refused with 409
				// (a dry run: the first may already have completed, in which
				// case it is accepted and writes nothing).
				_, err = dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				switch {
				case apierrors.IsConflict(err):
				case err == nil:
					t.Logf("switchover %d completed before a second request could conflict with it", i+1)
				default:
					t.Errorf("a switchover during a switchover: %v, want 409", err)
				}
				newPrimary := answer.Status.NewPrimary
				final := h.waitPrimary(newPrimary, time.Minute)
				c := meta.FindStatusCondition(final.Conditions, examplev1.ConditionPrimaryChange)
				if c == nil || c.Reason != "SwitchoverCompleted" {
					t.Fatalf("switchover %d: condition %+v", i+1, c)
				}
				firstAck := w.waitAckOn(newPrimary, requested, 30*time.Second)
				gap := w.maxGap(requested.Add(-time.Second), firstAck.Add(time.Second))
				unavailable = append(unavailable, gap)
				t.Logf("%s: switchover %d %s -> %s: writes resumed on the new primary %s after the request, longest write gap %s; controller: %s",
					tc.engine.name, i+1, old, newPrimary, firstAck.Sub(requested).Round(time.Millisecond), gap.Round(time.Millisecond), c.Message)
				if missing := w.missingOn(h, newPrimary, firstAck); len(missing) > 0 {
					t.Errorf("switchover %d: %d acknowledged writes are not on the new primary %s: %v", i+1, len(missing), newPrimary, head(missing))
				}
				status = h.waitStreaming(3)
				if status.CurrentPrimary != newPrimary {
					t.Fatalf("after switchover %d the primary is %s", i+1, status.CurrentPrimary)
				}
			}
			sort.Slice(unavailable, func(i, j int) bool { return unavailable[i] < unavailable[j] })
			t.Logf("%s: switchover write unavailability p50 %s, max %s (%d switchovers, %d writes acknowledged so far)",
				tc.engine.name, unavailable[len(unavailable)/2].Round(time.Millisecond), unavailable[len(unavailable)-1].Round(time.Millisecond),
				len(unavailable), w.count())

			// Failover: kill -9 the primary's processes.
			old := status.CurrentPrimary
			after, killed, decided := failOver(t, r, dbs, old, "failover")
			newPrimary := after.CurrentPrimary
			firstAck := w.waitAckOn(newPrimary, killed, time.Minute)
			lost := w.missingOn(h, newPrimary, killed)
			c := meta.FindStatusCondition(after.Conditions, examplev1.ConditionPrimaryChange)
			t.Logf("%s: failover %s -> %s: decided %s after kill -9 (failoverDelay %s), writes resumed after %s, %d acknowledged writes lost of %d; controller: %+v",
				tc.engine.name, old, newPrimary, decided.Sub(killed).Round(time.Millisecond), failoverDelay,
				firstAck.Sub(killed).Round(time.Millisecond), len(lost), w.countBefore(killed), c)

			// The old primary comes back: a replica of the new one.
			r.revive(old)
			status = h.waitStreaming(3)
			if status.CurrentPrimary != newPrimary {
				t.Errorf("after the old primary came back the primary is %s, want %s", status.CurrentPrimary, newPrimary)
			}
			for _, in := range status.Instances {
				if in.Name == old && in.Role != examplev1.InstanceRoleReplica {
					t.Errorf("the old primary %s came back as %s", old, in.Role)
				}
			}
			if _, err := h.connect(old).Exec("INSERT INTO acks VALUES (-1)"); err == nil {
				t.Errorf("the old primary %s took a write after it came back", old)
			}
			w.stop()
			if n := w.acksOnAfter(old, killed); n > 0 {
				t.Errorf("the old primary %s acknowledged %d writes after it was killed", old, n)
			}
			// Everything acknowledged since the failover is on the new primary.
			if missing := w.missingOnSince(h, newPrimary, firstAck); len(missing) > 0 {
				t.Errorf("%d writes acknowledged after the failover are missing on %s: %v", len(missing), newPrimary, head(missing))
			}
			t.Logf("%s: %d writes acknowledged in all", tc.engine.name, w.count())
		})
	}
}

// ack is one acknowledged write: its id, the pod that took it, when it
// was sent and when its answer came.
type ack struct {
	id       int
	pod      string
	sent, at time.Time
}

// queryIDs is the set of the integers query returns.
func queryIDs(db *sql.DB, query string) (map[int]bool, error) {
	rows, err := db.Query(query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	return ids, rows.Err()
}

func head(ids []int) []int {
	if len(ids) > 10 {
		return ids[:10]
	}
	return ids
}

// failoverDelay is the spec.failoverDelay of the failover tests' database,
// and failoverBound what a failover may take on top of it: the controller
// learns of a killed manager at once (its health stream breaks) and counts
// the delay from then; a manager that stops answering without closing its
// connection (a frozen process) is lost once its stream misses a line for
// api.HealthDeadline (1.5 s); then the promotion, and margin for a loaded
// machine. (Before the health streams: a poll interval, a status timeout
// and a poll, 8 s.)
const (
	failoverDelay = 5 * time.Second
	failoverBound = 5 * time.Second
)
