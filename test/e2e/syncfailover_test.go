//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// longRun tells whether the e2e suite runs its long mode (MYDB_E2E_LONG=1):
// the repetitions that give the figures of docs/replication.md.
func longRun() bool { return os.Getenv("MYDB_E2E_LONG") == "1" }

// TestSyncFailoverLosesNoAcknowledgedWrite: for each engine, 3 real
// instances with spec.replication.mode Sync under 8 connections writing at
// once, every acknowledged insert recorded; kill -9 of the primary's
// processes promotes a replica that has every acknowledged write: 0 lost.
// The short mode (CI) fails over once; MYDB_E2E_LONG=1 fails over 10 times
// (the old primary brought back as a replica each time) and switches over
// 10 times, and logs the figures.
func TestSyncFailoverLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	const connections = 8
	failovers, switchovers := 1, 0
	if longRun() {
		failovers, switchovers = 10, 10
	}
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			ctx := context.Background()
			dbs, r, h, status := startShop(t, restConfig(t), tc, failoverDelay, examplev1.ReplicationModeSync)

			w := startWriters(t, h, connections)
			defer w.stop()
			time.Sleep(2 * time.Second)

			var decisions, resumed, gaps []time.Duration
			lost := 0
			for i := range switchovers {
				old := status.CurrentPrimary
				requested := time.Now()
				answer, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{}, metav1.CreateOptions{})
				if err != nil {
					t.Fatalf("switchover %d: %v", i+1, err)
				}
				h.waitPrimary(answer.Status.NewPrimary, time.Minute)
				firstAck := w.waitAckOn(answer.Status.NewPrimary, requested, 30*time.Second)
				gaps = append(gaps, w.maxGap(requested.Add(-time.Second), firstAck.Add(time.Second)))
				if missing := w.missingOn(h, answer.Status.NewPrimary, time.Now()); len(missing) > 0 {
					lost += len(missing)
					t.Errorf("switchover %d %s -> %s: %d acknowledged writes missing: %v", i+1, old, answer.Status.NewPrimary, len(missing), head(missing))
				}
				status = h.waitStreaming(3)
			}
			if switchovers > 0 {
				t.Logf("%s, Sync, %d connections: %d switchovers, write unavailability %s, %d acknowledged writes lost",
					tc.engine.name, connections, switchovers, spread(gaps), lost)
			}

			lost = 0
			for i := range failovers {
				old := status.CurrentPrimary
				before := w.count()
				after, killed, decided := failOver(t, r, dbs, old, fmt.Sprintf("failover %d", i+1))
				newPrimary := after.CurrentPrimary
				firstAck := w.waitAckOn(newPrimary, killed, time.Minute)
				decisions = append(decisions, decided.Sub(killed))
				resumed = append(resumed, firstAck.Sub(killed))
				// Every write acknowledged so far, by the old primary before
				// the kill or by the new one since, is on the new primary.
				missing := w.missingOn(h, newPrimary, time.Now())
				lost += len(missing)
				if len(missing) > 0 {
					t.Errorf("failover %d %s -> %s: %d acknowledged writes lost: %v", i+1, old, newPrimary, len(missing), head(missing))
				}
				c := meta.FindStatusCondition(after.Conditions, examplev1.ConditionPrimaryChange)
				t.Logf("%s, Sync: failover %d %s -> %s decided %s after kill -9, writes resumed after %s, %d of %d acknowledged writes lost; controller: %s",
					tc.engine.name, i+1, old, newPrimary, decided.Sub(killed).Round(time.Millisecond), firstAck.Sub(killed).Round(time.Millisecond),
					len(missing), before, conditionMessage(c))
				if i+1 < failovers {
					// The old primary comes back as a replica, so that the
					// next round has 3 instances again.
					r.revive(old)
					status = h.waitStreaming(3)
					if n := w.acksOnAfter(old, killed); n > 0 {
						t.Errorf("the old primary %s acknowledged %d writes after it was killed", old, n)
					}
				}
			}
			w.stop()
			t.Logf("%s, Sync, %d connections: %d failovers, decision after kill -9 %s, writes resumed %s, %d acknowledged writes lost of %d acknowledged (%d writes unacknowledged)",
				tc.engine.name, connections, failovers, spread(decisions), spread(resumed), lost, w.count(), w.failed.Load())
		})
	}
}

// TestSyncFailoverWaitsForALostReplicaThatWasAhead (postgres, Sync, 3
// instances, writers running): one replica is frozen (SIGSTOP) while the
// other keeps acknowledging commits, then the primary and the replica that
// was ahead are killed and the frozen one thawed. The controller must not
// promote it: the PrimaryChange condition says FailoverWouldLoseWrites and
// the primary stays. An operator forces the failover with allowWriteLoss;
// the thawed replica is promoted, and the writes only the killed replica
// had are lost, as the guard said they would be.
func TestSyncFailoverWaitsForALostReplicaThatWasAhead(t *testing.T) {
	t.Parallel()
	tc := replicationCases[0]
	if tc.engine.name != "postgres" {
		t.Fatalf("replicationCases[0] is %s, want postgres", tc.engine.name)
	}
	ctx := context.Background()
	dbs, r, h, status := startShop(t, restConfig(t), tc, failoverDelay, examplev1.ReplicationModeSync)
	mustExec(t, h.connect(status.CurrentPrimary), "CREATE TABLE filler (id INT, pad TEXT)")
	w := startWriters(t, h, 4)
	defer w.stop()
	// Writes flow before the replicas are set apart.
	w.waitAck(time.Now(), time.Minute)

	primary := status.CurrentPrimary
	var behind, ahead string
	for _, in := range status.Instances {
		switch {
		case in.Name == primary:
		case behind == "":
			behind = in.Name
		default:
			ahead = in.Name
		}
	}
	// The frozen replica stops at its position; the other acknowledges the
	// commits from here on, and the controller reads its position at least
	// twice (poll interval 2 s). The primary's walsender goes on filling the
	// frozen one's socket buffers (a few MiB on loopback), which it reads
	// when thawed: some 60 MiB of WAL make sure it stays behind.
	r.freeze(behind)
	frozen := time.Now()
	mustExec(t, h.connect(primary), "INSERT INTO filler SELECT g, repeat(md5(g::text), 32) FROM generate_series(1, 50000) g")
	time.Sleep(5 * time.Second)
	r.kill(primary)
	r.kill(ahead)
	killed := time.Now()
	r.thaw(behind)

	var held examplev1.MyDatabaseStatus
	eventually(t, failoverDelay+30*time.Second, func() error {
		got, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		held = got.Status
		if held.CurrentPrimary != primary {
			return fmt.Errorf("the controller promoted %s: %s", held.CurrentPrimary,
				conditionMessage(meta.FindStatusCondition(held.Conditions, examplev1.ConditionPrimaryChange)))
		}
		if c := meta.FindStatusCondition(held.Conditions, examplev1.ConditionPrimaryChange); c == nil || c.Reason != examplev1.ReasonFailoverWouldLoseWrites {
			return fmt.Errorf("PrimaryChange %s", conditionMessage(c))
		}
		return nil
	})
	c := meta.FindStatusCondition(held.Conditions, examplev1.ConditionPrimaryChange)
	t.Logf("held back %s after the kill: %s", time.Since(killed).Round(100*time.Millisecond), c.Message)
	for _, want := range []string{behind + ", is at", ahead + " (its manager does not answer) last reported", "--allow-write-loss"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the condition lacks %q: %s", want, c.Message)
		}
	}
	// It keeps waiting.
	time.Sleep(2 * failoverDelay)
	if got, err := dbs.Get(ctx, "shop", metav1.GetOptions{}); err != nil || got.Status.CurrentPrimary != primary {
		t.Fatalf("after waiting longer: %v, primary %q", err, got.Status.CurrentPrimary)
	}

	forced := time.Now()
	answer, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{
		TargetInstance: behind, AllowWriteLoss: true}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if answer.Status.OldPrimary != primary || answer.Status.NewPrimary != behind {
		t.Errorf("answer %+v", answer.Status)
	}
	after := h.waitPrimary(behind, time.Minute)
	promoted := time.Now() // the poll's, an upper bound
	if c := meta.FindStatusCondition(after.Conditions, examplev1.ConditionPrimaryChange); c == nil || c.Reason != "FailoverForced" {
		t.Errorf("after the forced failover: %s", conditionMessage(c))
	}
	if after.TargetPrimaryReason != examplev1.TargetPrimaryReasonForcedFailover {
		t.Errorf("targetPrimaryReason %q", after.TargetPrimaryReason)
	}
	// With no replica left, the new primary's commits wait from its first
	// one on: a commit is not acknowledged (once it is writable at all).
	eventually(t, 30*time.Second, func() error {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := h.connect(behind).ExecContext(wctx, "INSERT INTO acks VALUES (-2)")
		switch {
		case err == nil:
			t.Errorf("the new primary acknowledged a commit with no replica connected")
			return nil
		case strings.Contains(err.Error(), tc.readOnlyError):
			return fmt.Errorf("not writable yet: %v", err)
		case wctx.Err() == nil:
			return fmt.Errorf("the commit failed without waiting: %v", err)
		}
		return nil
	})
	// The old primary comes back as a replica (it re-clones from the new
	// primary), and writes resume.
	r.revive(primary)
	firstAck := w.waitAckOn(behind, forced, 2*time.Minute)
	w.stop()
	lost := w.missingOn(h, behind, killed)
	// Writes acknowledged well before the freeze the promoted replica had
	// (under ANY 1 a commit of the last milliseconds may have been on the
	// other replica only).
	settled := frozen.Add(-time.Second)
	lostBefore := 0
	acked := map[int]time.Time{}
	for _, a := range w.snapshot() {
		acked[a.id] = a.at
	}
	for _, id := range lost {
		if acked[id].Before(settled) {
			lostBefore++
		}
	}
	t.Logf("forced failover %s -> %s: promoted within %s of the request, writes resumed %s after it (once the old primary re-cloned: commits wait for a replica); %d of %d acknowledged writes lost, all acknowledged while %s was frozen or just before",
		primary, behind, promoted.Sub(forced).Round(time.Millisecond), firstAck.Sub(forced).Round(time.Millisecond),
		len(lost), w.countBefore(killed), behind)
	if len(lost) == 0 {
		t.Errorf("no acknowledged write was lost: the replica that was ahead had nothing the promoted one lacked, and the hold was not needed")
	}
	if lostBefore > 0 {
		t.Errorf("%d writes acknowledged more than 1 s before %s was frozen are lost", lostBefore, behind)
	}
}
