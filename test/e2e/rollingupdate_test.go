//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// TestRollingUpdatePrimaryLast, for postgres and mariadb with real engines
// on the rig: three instances under Sync replication (every acknowledged
// commit is on a replica), the primary on the middle pod (so that
// neither the StatefulSet's order, highest ordinal first, nor the lowest
// first would reach it last by chance), a writer recording every
// acknowledged write, and a change of spec.resources, which needs new pods.
// Every pod is replaced (the rig starts a new process for each), the two
// replicas first, one at a time, each streaming again before the next; the
// old primary's pod is deleted last, once it is a replica: exactly one
// switchover, no failover; status.updatedReplicas and kubectl get mdb's
// UP-TO-DATE reach 3; no acknowledged write is lost; the longest pause in
// writes is the switchover's.
func TestRollingUpdatePrimaryLast(t *testing.T) {
	t.Parallel()
	for _, tc := range replicationCases {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbs, r, h, _ := startShop(t, restConfig(t), tc, failoverDelay, examplev1.ReplicationModeSync)
			kube := kubeClient(t)
			if _, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: "shop-1"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitPrimary("shop-1", 2*time.Minute)
			h.waitStreaming(3)
			sts, err := kube.AppsV1().StatefulSets(h.ns).Get(ctx, names.StatefulSet("shop"), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s := sts.Spec.UpdateStrategy.Type; s != appsv1.OnDeleteStatefulSetStrategyType {
				t.Errorf("the StatefulSet's updateStrategy is %s, want OnDelete: the controller replaces the pods", s)
			}
			switchovers := eventCount(t, h.ns, failover.ReasonSwitchoverCompleted)
			deletions := watchDeletions(t, h.ns, "shop")
			w := startWriter(t, h)
			defer w.stop()
			time.Sleep(time.Second)

			changed := time.Now()
			patch := []byte(`{"spec":{"resources":{"requests":{"cpu":"20m"}}}}`)
			if _, err := dbs.Patch(ctx, "shop", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			status := waitRolledOut(t, dbs, "shop", 3)
			done := time.Now()
			status = h.waitStreaming(3)
			t.Logf("%s: rolled out in %s, primary %s", tc.engine.name, done.Sub(changed).Round(100*time.Millisecond), status.CurrentPrimary)

			var order []podDeletion
			var deleted []string
			for _, d := range deletions.stop() {
				if d.revision == status.UpdateRevision {
					// kwok deletes a deleted pod's object by name: now and
					// then it takes the new pod made under that name. The
					// StatefulSet makes it again, with the new template.
					t.Logf("%s: a pod %s that already ran the new template went too (kwok)", tc.engine.name, d.pod)
					continue
				}
				order = append(order, d)
				deleted = append(deleted, fmt.Sprintf("%s (%s)", d.pod, d.role))
			}
			t.Logf("%s: pods deleted in order: %s", tc.engine.name, strings.Join(deleted, ", "))
			if len(order) != 3 || order[2].pod != "shop-1" || order[2].role != names.RoleReplica ||
				order[0].role != names.RoleReplica || order[1].role != names.RoleReplica {
				t.Errorf("pods deleted: %v; want the two replicas, then shop-1, the old primary, once a replica", deleted)
			}
			if status.CurrentPrimary == "shop-1" {
				t.Errorf("the primary is still shop-1")
			}
			r.mu.Lock()
			for _, pod := range []string{"shop-0", "shop-1", "shop-2"} {
				if r.starts[pod] < 2 {
					t.Errorf("the rig started %d processes for %s, want 2: the first and the updated pod's", r.starts[pod], pod)
				}
			}
			r.mu.Unlock()
			waitEvents(t, h.ns, failover.ReasonSwitchoverCompleted, switchovers, 1)
			if n := eventCount(t, h.ns, failover.ReasonFailoverCompleted); n != 0 {
				t.Errorf("%d failovers during the rollout, want none", n)
			}
			out := mustKubectl(t, "", "get", "mdb", "shop", "-n", h.ns)
			if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
				!slices.Equal(strings.Fields(lines[0])[3:7], []string{"REPLICAS", "READY", "UP-TO-DATE", "PRIMARY"}) ||
				!slices.Equal(strings.Fields(lines[1])[3:7], []string{"3", "3/3", "3", status.CurrentPrimary}) {
				t.Errorf("kubectl get mdb after the rollout:\n%s", out)
			}

			firstAck := w.waitAckOn(status.CurrentPrimary, changed, 30*time.Second)
			w.stop()
			gap := w.maxGap(changed, done)
			t.Logf("%s: %d writes acknowledged during the rollout, longest pause %s (first on the new primary %s after the change)",
				tc.engine.name, len(w.acksAfter(changed)), gap.Round(time.Millisecond), firstAck.Sub(changed).Round(100*time.Millisecond))
			if missing := w.missingOn(h, status.CurrentPrimary, time.Now()); len(missing) > 0 {
				t.Errorf("%d acknowledged writes are not on the primary %s after the rollout: %v", len(missing), status.CurrentPrimary, head(missing))
			}

			// kubectl mydb restart: the same, with nothing in the spec changed.
			revision, primary := status.UpdateRevision, status.CurrentPrimary
			if r := kubectlMydb(t, "restart", "shop", "-n", h.ns); r.err != nil || !strings.Contains(r.stdout, "restarting, primary last") {
				t.Fatal(r)
			}
			restarted := time.Now()
			eventually(t, 5*time.Minute, func() error {
				db, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
				if err != nil {
					return err
				}
				s := db.Status
				p := meta.FindStatusCondition(s.Conditions, examplev1.ConditionProgressing)
				if s.UpdateRevision == revision || s.UpdatedReplicas != 3 || p == nil || p.Status != metav1.ConditionFalse {
					return fmt.Errorf("revision %s (was %s), updated %d of 3, Progressing %s", s.UpdateRevision, revision, s.UpdatedReplicas, conditionMessage(p))
				}
				return nil
			})
			status = h.waitStreaming(3)
			t.Logf("%s: kubectl mydb restart done in %s, primary %s -> %s", tc.engine.name, time.Since(restarted).Round(100*time.Millisecond), primary, status.CurrentPrimary)
			if status.CurrentPrimary == primary {
				t.Errorf("the primary is still %s after a restart, primary last", primary)
			}
			waitEvents(t, h.ns, failover.ReasonSwitchoverCompleted, switchovers, 2)
			if n := eventCount(t, h.ns, failover.ReasonFailoverCompleted); n != 0 {
				t.Errorf("%d failovers, want none", n)
			}
		})
	}
}

// eventCount counts the Events of reason in ns (an Event seen n times
// counts n).
func eventCount(t *testing.T, ns, reason string) int {
	t.Helper()
	events, err := kubeClient(t).CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		n += max(int(e.Count), 1)
	}
	return n
}

// waitEvents waits until ns has want more Events of reason than it had
// (before): an Event is recorded a moment after the status write it tells
// of.
func waitEvents(t *testing.T, ns, reason string, before, want int) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if n := eventCount(t, ns, reason) - before; n != want {
			return fmt.Errorf("%d %s events, want %d", n, reason, want)
		}
		return nil
	})
}

// podDeletion is a pod seen going, with its role and revision then.
type podDeletion struct {
	pod, role, revision string
	at                  time.Time
}

type deletionWatch struct {
	mu     sync.Mutex
	seen   map[types.UID]bool
	order  []podDeletion
	cancel context.CancelFunc
	done   chan struct{}
}

// watchDeletions records, in order, each pod of database db in ns that
// gets a deletionTimestamp or is deleted.
func watchDeletions(t *testing.T, ns, db string) *deletionWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kubeClient(t).CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + db})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	d := &deletionWatch{seen: map[types.UID]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		defer w.Stop()
		for e := range w.ResultChan() {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok || (e.Type != watch.Deleted && pod.DeletionTimestamp == nil) {
				continue
			}
			d.mu.Lock()
			if !d.seen[pod.UID] {
				d.seen[pod.UID] = true
				d.order = append(d.order, podDeletion{pod: pod.Name, role: pod.Labels[names.LabelRole],
					revision: pod.Labels[appsv1.StatefulSetRevisionLabel], at: time.Now()})
			}
			d.mu.Unlock()
		}
	}()
	t.Cleanup(func() { d.stop() })
	return d
}

// stop ends the watch and returns the deletions seen.
func (d *deletionWatch) stop() []podDeletion {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]podDeletion(nil), d.order...)
}

// waitRolledOut waits until the rollout of db's latest spec is over: every
// one of its replicas instances on the update revision and ready, Progressing
// False and Ready True; it answers that status.
func waitRolledOut(t *testing.T, dbs typedv1.MyDatabaseInterface, name string, replicas int32) examplev1.MyDatabaseStatus {
	t.Helper()
	var status examplev1.MyDatabaseStatus
	eventually(t, 5*time.Minute, func() error {
		db, err := dbs.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status = db.Status
		p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing)
		ready := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReady)
		if status.ObservedGeneration != db.Generation || status.UpdatedReplicas != replicas || p == nil || p.Status != metav1.ConditionFalse ||
			ready == nil || ready.Status != metav1.ConditionTrue {
			return fmt.Errorf("updated %d of %d, Progressing %s, Ready %s", status.UpdatedReplicas, replicas, conditionMessage(p), conditionMessage(ready))
		}
		for _, in := range status.Instances {
			if in.Revision != status.UpdateRevision || !in.Ready {
				return fmt.Errorf("instance %s: revision %s (update %s), ready %v", in.Name, in.Revision, status.UpdateRevision, in.Ready)
			}
		}
		return nil
	})
	return status
}
