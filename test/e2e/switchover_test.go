//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
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

// waitPrimary waits until the status names primary as current with no
// switchover under way.
func (h *replicationHarness) waitPrimary(primary string, timeout time.Duration) examplev1.MyDatabaseStatus {
	h.t.Helper()
	dbs := mydbClient(h.t, restConfig(h.t)).ExampleV1().MyDatabases(h.ns)
	var status examplev1.MyDatabaseStatus
	eventually(h.t, timeout, func() error {
		db, err := dbs.Get(context.Background(), h.db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status = db.Status
		if status.CurrentPrimary != primary || status.TargetPrimary != primary {
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionPrimaryChange)
			return fmt.Errorf("primary %s, target %s: %+v", status.CurrentPrimary, status.TargetPrimary, c)
		}
		return nil
	})
	return status
}

// ack is one acknowledged write: its id, the pod that took it, when it
// was sent and when its answer came.
type ack struct {
	id       int
	pod      string
	sent, at time.Time
}

// writer inserts ids 1, 2, 3 ... into acks on whatever pod is labelled
// primary (what the -rw Service selects), from one or more connections
// that each write one row at a time, re-reading the label after every
// failure, and records every write the engine acknowledged.
type writer struct {
	t    *testing.T
	h    *replicationHarness
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	ids  atomic.Int64
	// failed counts the writes that got no acknowledgement.
	failed atomic.Int64

	mu   sync.Mutex
	acks []ack
	// lastFailure is the newest write that got no acknowledgement, and
	// why: what a wait for an acknowledgement reports when none came.
	lastFailure string

	// pinned, when set, is the one pod the writer writes to, at the address
	// it had when the writer started, whatever its role becomes: a client
	// that kept its connection string.
	pinned string
}

func startWriter(t *testing.T, h *replicationHarness) *writer { return startWriters(t, h, 1) }

// startWriters starts n connections writing at once: n writes in flight.
func startWriters(t *testing.T, h *replicationHarness, n int) *writer {
	w := &writer{t: t, h: h, done: make(chan struct{})}
	for range n {
		w.wg.Add(1)
		go w.run()
	}
	return w
}

// startPinnedWriter starts one connection writing to pod's address only.
func startPinnedWriter(t *testing.T, h *replicationHarness, pod string) *writer {
	w := &writer{t: t, h: h, done: make(chan struct{}), pinned: pod}
	// Its ids stay clear of the other writers' in the same table.
	w.ids.Store(1_000_000_000)
	w.wg.Add(1)
	go w.run()
	return w
}

func (w *writer) stop() {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
}

func (w *writer) run() {
	defer w.wg.Done()
	kube := kubeClient(w.t)
	selector := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/instance": w.h.db, names.LabelRole: names.RolePrimary}).String()
	secret, err := kube.CoreV1().Secrets(w.h.ns).Get(context.Background(), w.h.db+"-credentials", metav1.GetOptions{})
	if err != nil {
		w.t.Error(err)
		return
	}
	pools := map[string]*sql.DB{}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	var pod, ip string
	for {
		select {
		case <-w.done:
			return
		default:
		}
		if ip == "" && w.pinned != "" {
			p, err := kube.CoreV1().Pods(w.h.ns).Get(context.Background(), w.pinned, metav1.GetOptions{})
			if err != nil || p.Status.PodIP == "" {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			pod, ip = p.Name, p.Status.PodIP
		}
		if ip == "" {
			pods, err := kube.CoreV1().Pods(w.h.ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.PodIP == "" {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			pod, ip = pods.Items[0].Name, pods.Items[0].Status.PodIP
		}
		pool, ok := pools[ip]
		if !ok {
			pool, err = w.h.tc.open(ip, string(secret.Data["username"]), string(secret.Data["password"]), string(secret.Data["database"]))
			if err != nil {
				w.t.Error(err)
				return
			}
			pool.SetMaxOpenConns(1)
			pool.SetConnMaxLifetime(time.Minute)
			pools[ip] = pool
		}
		sent := time.Now()
		id := int(w.ids.Add(1))
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := pool.ExecContext(ctx, fmt.Sprintf("INSERT INTO acks VALUES (%d)", id))
		cancel()
		if err != nil {
			w.failed.Add(1)
			w.mu.Lock()
			w.lastFailure = fmt.Sprintf("write %d to %s (%s) at %s: %v", id, pod, ip, sent.Format("15:04:05.000"), err)
			w.mu.Unlock()
			// Not acknowledged, so no loss whatever became of it (it may
			// have committed without the answer arriving): each id is
			// tried once, and the next goes wherever the primary is now
			// (a pinned writer keeps its address).
			if w.pinned == "" {
				ip = ""
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		w.mu.Lock()
		w.acks = append(w.acks, ack{id: id, pod: pod, sent: sent, at: time.Now()})
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *writer) snapshot() []ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.acks)
}

func (w *writer) count() int { return len(w.snapshot()) }

func (w *writer) countBefore(t time.Time) int {
	n := 0
	for _, a := range w.snapshot() {
		if a.at.Before(t) {
			n++
		}
	}
	return n
}

// waitAckOn waits for a write acknowledged by pod after since, and returns when.
func (w *writer) waitAckOn(pod string, since time.Time, timeout time.Duration) time.Time {
	w.t.Helper()
	return w.waitAckThat(func(a ack) bool { return a.pod == pod && a.at.After(since) },
		fmt.Sprintf("no write acknowledged by %s", pod), timeout).at
}

// waitAckThat waits for an acknowledged write that match accepts, and
// fails saying what when none came within timeout.
func (w *writer) waitAckThat(match func(ack) bool, what string, timeout time.Duration) ack {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, a := range w.snapshot() {
			if match(a) {
				return a
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.mu.Lock()
	last := w.lastFailure
	w.mu.Unlock()
	w.t.Fatalf("%s within %s; %d writes unacknowledged, the last: %s", what, timeout, w.failed.Load(), last)
	return ack{}
}

// maxGap is the longest time between two acknowledged writes that are
// both in [from, to].
func (w *writer) maxGap(from, to time.Time) time.Duration {
	var last time.Time
	var gap time.Duration
	for _, a := range w.snapshot() {
		if a.at.Before(from) || a.at.After(to) {
			continue
		}
		if !last.IsZero() {
			gap = max(gap, a.at.Sub(last))
		}
		last = a.at
	}
	return gap
}

// acksOnAfter counts the writes sent to pod after t that it acknowledged.
func (w *writer) acksOnAfter(pod string, t time.Time) int {
	n := 0
	for _, a := range w.snapshot() {
		if a.pod == pod && a.sent.After(t) {
			n++
		}
	}
	return n
}

// missingOn lists the writes acknowledged before until that pod lacks.
func (w *writer) missingOn(h *replicationHarness, pod string, until time.Time) []int {
	return w.missing(h, pod, func(a ack) bool { return a.at.Before(until) })
}

// missingOnSince lists the writes acknowledged from since on that pod lacks.
func (w *writer) missingOnSince(h *replicationHarness, pod string, since time.Time) []int {
	return w.missing(h, pod, func(a ack) bool { return !a.at.Before(since) })
}

func (w *writer) missing(h *replicationHarness, pod string, which func(ack) bool) []int {
	h.t.Helper()
	// The read is retried (and each failure logged): a pod whose engine
	// was just restarted may drop a first connection, and what is asked
	// here is which writes it holds, not whether it kept a connection.
	var present map[int]bool
	db := h.connect(pod)
	eventually(h.t, 30*time.Second, func() error {
		ids, err := queryIDs(db, "SELECT id FROM acks")
		if err != nil {
			h.t.Logf("reading the acks on %s: %v", pod, err)
			return err
		}
		present = ids
		return nil
	})
	var out []int
	for _, a := range w.snapshot() {
		if which(a) && !present[a.id] {
			out = append(out, a.id)
		}
	}
	return out
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
// and failoverBound what a failover may take on top of it: the
// controller's poll interval (2s in local-up) to see the primary unready,
// one more poll to decide, a status timeout (2s) for the dead manager, and
// the promotion.
const (
	failoverDelay = 5 * time.Second
	failoverBound = 8 * time.Second
)

// failOver kills -9 the processes of primary old (on the rig) and waits
// until the database names another; see failOverAfter.
func failOver(t *testing.T, r *rig, dbs typedv1.MyDatabaseInterface, old, what string) (after examplev1.MyDatabaseStatus, killed, decided time.Time) {
	t.Helper()
	return failOverAfter(t, func() { r.kill(old) }, dbs, old, what)
}

// failOverAfter deals fault to primary old and waits until the database
// names another. It returns that status, when the fault was dealt and when
// the failover was decided (the status's targetPrimaryTime, or the poll
// that saw it if that is earlier), and fails what (say "failover 3") when
// it was decided later than failoverDelay + failoverBound after the fault
// or for another reason than a failover.
func failOverAfter(t *testing.T, fault func(), dbs typedv1.MyDatabaseInterface, old, what string) (after examplev1.MyDatabaseStatus, dealt, decided time.Time) {
	t.Helper()
	fault()
	dealt = time.Now()
	eventually(t, failoverDelay+failoverBound+30*time.Second, func() error {
		got, err := dbs.Get(context.Background(), "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		after = got.Status
		if after.CurrentPrimary == old {
			return fmt.Errorf("the primary is still %s", old)
		}
		return nil
	})
	decided = time.Now()
	if at := after.TargetPrimaryTime; at != nil && at.Time.Before(decided) {
		decided = at.Time
	}
	if took := decided.Sub(dealt); took > failoverDelay+failoverBound {
		t.Errorf("%s decided %s after the fault, want within failoverDelay %s + %s", what, took, failoverDelay, failoverBound)
	}
	if after.TargetPrimaryReason != examplev1.TargetPrimaryReasonFailover {
		t.Errorf("%s: targetPrimaryReason %q", what, after.TargetPrimaryReason)
	}
	return after, dealt, decided
}

// startShop creates "shop", three instances of tc's engine with the
// failoverDelay delay and replication mode (Async when empty),
// through cfg, in a namespace of its own; runs its instances; and returns
// once both replicas stream and the acks table the writers fill exists.
func startShop(t *testing.T, cfg *rest.Config, tc replicationCase, delay time.Duration, mode examplev1.ReplicationMode) (typedv1.MyDatabaseInterface, *rig, *replicationHarness, examplev1.MyDatabaseStatus) {
	t.Helper()
	dbs, h := createShop(t, cfg, tc, delay, mode)
	r := startRig(t, h.ns, "shop", tc.engine)
	status := h.waitStreaming(3)
	mustExec(t, h.connect(status.CurrentPrimary), "CREATE TABLE acks (id INT PRIMARY KEY)")
	return dbs, r, h, status
}

// createShop creates "shop" as startShop describes (delay 0: the default
// failoverDelay), and returns at once.
func createShop(t *testing.T, cfg *rest.Config, tc replicationCase, delay time.Duration, mode examplev1.ReplicationMode) (typedv1.MyDatabaseInterface, *replicationHarness) {
	t.Helper()
	ns := newNamespace(t)
	dbs := mydbClient(t, cfg).ExampleV1().MyDatabases(ns)
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.Engine(tc.engine.name), Version: tc.version, Replicas: int32Ptr(3), StorageSize: quantity("1Gi")}}
	if delay > 0 {
		db.Spec.FailoverDelay = &metav1.Duration{Duration: delay}
	}
	if mode != "" {
		db.Spec.Replication = &examplev1.ReplicationSpec{Mode: mode}
	}
	if _, err := dbs.Create(context.Background(), db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dbs, &replicationHarness{t: t, tc: tc, ns: ns, db: "shop"}
}
