//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// TestFailoverAcrossALeaderChange: exactly one promotion per incident even
// when mydb's own leader changes in the middle of it. A standby
// mydb-apiserver runs beside make local-up's (the leader); a 3-instance
// postgres database with failoverDelay 5s takes a steady write load; its
// primary is killed with kill -9, and while the leader counts the failover
// delay the leader is frozen with SIGSTOP. The standby takes the lease and
// fails over; then the old leader is let go on (SIGCONT) with its stale
// cache and its own count of the delay, and both run for 20 s. Every status
// write is recorded through a watch on the MyDatabase (against the standby:
// the aggregator's backend is the frozen leader). It asserts: one change of
// status.currentPrimary in all, and after that write none that changes the
// primary, the target or the PrimaryChange condition; the old leader gave
// up the lease, says so, and counts no primary change of the database in
// its /metrics (the new one counts one); no acknowledged write lost; the
// old primary, revived, rejoins as a replica of the promoted one, which is
// still primary at the end; status writes stay under 2 a second.
//
// Failover writes status.currentPrimary and targetPrimary in one status
// write (package failover decides it), so there is no intermediate step to
// freeze the old leader at; only switchover has one.
func TestFailoverAcrossALeaderChange(t *testing.T) {
	// Not parallel: it freezes the controllers' leader and reads its metrics.
	const bothRun = 20 * time.Second
	ctx := context.Background()
	tc := replicationCases[0]
	if tc.engine.name != "postgres" {
		t.Fatalf("the first replication case is %s, want postgres", tc.engine.name)
	}

	sb := startStandby(t)
	if holder, err := leaseHolder(ctx, t); err != nil || holder != sb.leaderIdentity {
		t.Fatalf("lease held by %q (%v), want local-up's %q", holder, err, sb.leaderIdentity)
	}
	dbs, r, h, status := startShop(t, sb.config, tc, failoverDelay, "")
	ns := h.ns

	rec := watchStatus(t, dbs, "shop")
	w := startWriter(t, h)
	defer w.stop()
	time.Sleep(time.Second)

	// Whatever happens below, the old leader must not stay frozen: this
	// cleanup runs before the standby's (which restores local-up's).
	t.Cleanup(func() { _ = syscall.Kill(sb.leaderPID, syscall.SIGCONT) })
	oldLog := fileSize(t, sb.leaderLog)

	old := status.CurrentPrimary
	r.kill(old)
	killed := time.Now()
	// The leader polls the instances every 2 s: by now it has seen the
	// primary unready and counts the 5 s delay.
	time.Sleep(3 * time.Second)
	if evs := rec.events(); evs[len(evs)-1].current != old {
		t.Fatalf("the leader failed over to %s before it could be stopped", evs[len(evs)-1].current)
	}
	if err := syscall.Kill(sb.leaderPID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("SIGSTOP to the leader %s (pid %d) %s after kill -9 of the primary %s",
		sb.leaderIdentity, sb.leaderPID, stopped.Sub(killed).Round(time.Millisecond), old)

	var tookLease time.Time
	eventually(t, 2*sb.leaseDuration+10*time.Second, func() error {
		holder, err := leaseHolder(ctx, t)
		if err != nil {
			return err
		}
		if holder != sb.identity {
			return fmt.Errorf("lease held by %q", holder)
		}
		tookLease = time.Now()
		return nil
	})
	var decision statusEvent
	eventually(t, failoverDelay+20*time.Second, func() error {
		for _, e := range rec.events() {
			if e.current != old {
				decision = e
				return nil
			}
		}
		return fmt.Errorf("the primary is still %s", old)
	})
	newPrimary := decision.current
	t.Logf("leader change: the standby took the lease %s after SIGSTOP (lease duration %s); it failed over %s -> %s %s after taking it, %s after the kill",
		tookLease.Sub(stopped).Round(10*time.Millisecond), sb.leaseDuration, old, newPrimary,
		decision.seen.Sub(tookLease).Round(10*time.Millisecond), decision.seen.Sub(killed).Round(10*time.Millisecond))

	if err := syscall.Kill(sb.leaderPID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	firstAck := w.waitAckOn(newPrimary, killed, time.Minute)
	t.Logf("SIGCONT to the old leader; writes resumed on %s %s after the kill (%s after SIGCONT: the instances read their topology through the aggregator, whose backend was frozen)",
		newPrimary, firstAck.Sub(killed).Round(time.Millisecond), firstAck.Sub(resumed).Round(time.Millisecond))
	time.Sleep(time.Until(resumed.Add(bothRun)))

	// Exactly one change of the primary, and no decision after it.
	evs := rec.events()
	changes := 0
	for i := 1; i < len(evs); i++ {
		if evs[i].current != evs[i-1].current {
			changes++
			t.Logf("status write rv %s: currentPrimary %s -> %s (target %s, %s)", evs[i].rv, evs[i-1].current, evs[i].current, evs[i].target, evs[i].reason)
		}
	}
	if changes != 1 {
		t.Errorf("currentPrimary changed %d times over the incident, want exactly once", changes)
	}
	after := 0
	for i, e := range evs {
		if e.rv != decision.rv {
			continue
		}
		for _, e := range evs[i+1:] {
			after++
			if e.current != newPrimary || e.target != newPrimary || !e.targetTime.Equal(decision.targetTime) || e.condition != decision.condition {
				t.Errorf("status write rv %s after the failover decision (rv %s) changed the primary's: current %s target %s at %s, %q",
					e.rv, decision.rv, e.current, e.target, e.targetTime, e.condition)
			}
		}
	}
	// The controller writes status once a poll interval (2 s in local-up)
	// and when something changes; 20 writes a second were its own writes of
	// moving positions requeueing it.
	if since := time.Since(decision.seen); float64(after) > 2*since.Seconds() {
		t.Errorf("%d status writes in the %s after the decision, more than 2 a second", after, since.Round(time.Second))
	}
	if decision.reason != examplev1.TargetPrimaryReasonFailover {
		t.Errorf("targetPrimaryReason %q", decision.reason)
	}
	t.Logf("%d status writes seen through the watch, %d after the decision (rv %s): %s", len(evs), after, decision.rv, decision.condition)

	// The old leader gave up and decided nothing; the new one decided once.
	if holder, err := leaseHolder(ctx, t); err != nil || holder != sb.identity {
		t.Errorf("after both ran for %s the lease is held by %q (%v), want the standby %q", bothRun, holder, err, sb.identity)
	}
	oldMetrics := scrape(t, directConfig(t, localMydbPort(t)))
	if !strings.Contains(oldMetrics, `leader_election_master_status{name="mydb-controller"} 0`) {
		t.Errorf("the old leader does not say it stopped leading in /metrics")
	}
	if n := primaryChanges(oldMetrics, ns); n != 0 {
		t.Errorf("the old leader counts %d primary changes of %s/shop, want 0", n, ns)
	}
	if n := primaryChanges(scrape(t, sb.config), ns); n != 1 {
		t.Errorf("the new leader counts %d primary changes of %s/shop, want 1", n, ns)
	}
	if tail := readFrom(t, sb.leaderLog, oldLog); !strings.Contains(tail, "Not leading") {
		t.Errorf("the old leader's log does not say it stopped leading after SIGCONT")
	}

	// Nothing acknowledged was lost; the old primary rejoins as a replica.
	if lost := w.missingOn(h, newPrimary, killed); len(lost) > 0 {
		t.Errorf("%d acknowledged writes are not on the new primary %s: %v", len(lost), newPrimary, head(lost))
	}
	r.revive(old)
	status = h.waitStreaming(3)
	if status.CurrentPrimary != newPrimary {
		t.Errorf("at the end the primary is %s, want the promoted %s", status.CurrentPrimary, newPrimary)
	}
	for _, in := range status.Instances {
		if in.Name == old && in.Role != examplev1.InstanceRoleReplica {
			t.Errorf("the old primary %s came back as %s", old, in.Role)
		}
	}
	w.stop()
	if n := w.acksOnAfter(old, killed); n > 0 {
		t.Errorf("the old primary %s acknowledged %d writes after it was killed", old, n)
	}
	if missing := w.missingOnSince(h, newPrimary, firstAck); len(missing) > 0 {
		t.Errorf("%d writes acknowledged after the failover are missing on %s: %v", len(missing), newPrimary, head(missing))
	}
	if evs := rec.events(); evs[len(evs)-1].current != newPrimary {
		t.Errorf("the last status write names %s the primary, want %s", evs[len(evs)-1].current, newPrimary)
	}
	t.Logf("%d writes acknowledged in all, %d before the kill, none lost", w.count(), w.countBefore(killed))
}

// statusEvent is one stored version of a MyDatabase, as a watch delivered it.
type statusEvent struct {
	rv                      string
	seen                    time.Time
	current, target, reason string
	targetTime              time.Time
	condition               string // the PrimaryChange condition's reason and message
}

// statusRecorder records every version of one MyDatabase from when it
// starts until the test ends.
type statusRecorder struct {
	mu  sync.Mutex
	evs []statusEvent
}

func (r *statusRecorder) events() []statusEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]statusEvent(nil), r.evs...)
}

func (r *statusRecorder) add(db *examplev1.MyDatabase) {
	e := statusEvent{rv: db.ResourceVersion, seen: time.Now(), current: db.Status.CurrentPrimary,
		target: db.Status.TargetPrimary, reason: db.Status.TargetPrimaryReason}
	if at := db.Status.TargetPrimaryTime; at != nil {
		e.targetTime = at.Time
	}
	if c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionPrimaryChange); c != nil {
		e.condition = c.Reason + ": " + c.Message
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
}

// watchStatus starts recording name's versions: the one stored now, then
// every one after it (re-watching from the last seen if a watch ends).
func watchStatus(t *testing.T, dbs typedv1.MyDatabaseInterface, name string) *statusRecorder {
	t.Helper()
	db, err := dbs.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &statusRecorder{}
	rec.add(db)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		rv := db.ResourceVersion
		for ctx.Err() == nil {
			wi, err := dbs.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				if ev.Type == watch.Error {
					if ctx.Err() != nil {
						break // the test ended
					}
					t.Errorf("watch of %s: %v", name, ev.Object)
					break
				}
				if d, ok := ev.Object.(*examplev1.MyDatabase); ok && (ev.Type == watch.Modified || ev.Type == watch.Added) {
					rec.add(d)
					rv = d.ResourceVersion
				}
			}
			wi.Stop()
		}
	}()
	return rec
}

// primaryChanges sums mydb_controller_primary_changes_total of ns's databases.
func primaryChanges(metrics, ns string) int {
	n := 0
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, "mydb_controller_primary_changes_total{") || !strings.Contains(line, `namespace="`+ns+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
			n += int(v)
		}
	}
	return n
}
