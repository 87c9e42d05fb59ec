//go:build e2e

package e2e

// Writers: clients that write through the role Services while a test moves the primary, and what
// their acknowledged writes prove (gaps, losses), and faults with the time of the decision that
// followed.

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// waitAck waits for a write sent after since that a pod, any pod,
// acknowledged.
func (w *writer) waitAck(since time.Time, timeout time.Duration) ack {
	w.t.Helper()
	return w.waitAckThat(func(a ack) bool { return a.sent.After(since) }, "no write acknowledged", timeout)
}

// acksAfter lists the writes acknowledged after t.
func (w *writer) acksAfter(t time.Time) []ack {
	var out []ack
	for _, a := range w.snapshot() {
		if a.at.After(t) {
			out = append(out, a)
		}
	}
	return out
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

// spread is "p50 X, max Y" of ds (rounded), or "x" for one.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 1 {
		return s[0].Round(time.Millisecond).String()
	}
	return fmt.Sprintf("p50 %s, min %s, max %s (n=%d)", s[len(s)/2].Round(time.Millisecond), s[0].Round(time.Millisecond),
		s[len(s)-1].Round(time.Millisecond), len(s))
}
