//go:build e2e && node

// Faults on the real node: the processes are the pods' containers, and the
// faults are dealt through containerd (ctr), the way a crash, a stuck
// process or a stalled machine reaches them; the kubelet, its probes and
// the controller react as they would anywhere.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodeReplicationCases are the replication cases at the versions the node
// has images for (nodeEngines); MySQL, which the rig cannot run, speaks
// MariaDB's protocol to the tests.
func nodeReplicationCases() []replicationCase {
	var out []replicationCase
	for _, e := range nodeEngines {
		for _, tc := range replicationCases {
			switch {
			case e.engine == tc.engine.name:
			case e.engine == "mysql" && tc.engine.name == "mariadb":
				tc.engine = rigEngine{name: "mysql", osUser: "mysql", port: 3306}
			default:
				continue
			}
			tc.version = e.version
			out = append(out, tc)
		}
	}
	return out
}

// nodeShop creates "shop" on the real node (see createShop) and returns
// once both replicas stream and the acks table exists.
func nodeShop(t *testing.T, tc replicationCase, delay time.Duration, mode examplev1.ReplicationMode) (typedv1.MyDatabaseInterface, *replicationHarness, examplev1.MyDatabaseStatus) {
	t.Helper()
	dbs, h := createShop(t, restConfig(t), tc, delay, mode)
	status := h.waitStreaming(3)
	mustExec(t, h.connect(status.CurrentPrimary), "CREATE TABLE acks (id INT PRIMARY KEY)")
	return dbs, h, status
}

// ctr runs containerd's own client against the node's containerd, in the
// kubelet's namespace.
func ctr(t *testing.T, args ...string) string {
	t.Helper()
	socket := filepath.Join(e2eLocalDir, "node", "containerd", "containerd.sock")
	out, err := exec.Command("ctr", append([]string{"--address", socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// databaseContainer is the status of pod's database container.
func databaseContainer(t *testing.T, ns, pod string) corev1.ContainerStatus {
	t.Helper()
	p, err := kubeClient(t).CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == databasepod.DatabaseContainerName {
			return cs
		}
	}
	t.Fatalf("pod %s has no database container: %+v", pod, p.Status.ContainerStatuses)
	return corev1.ContainerStatus{}
}

// databaseTask is the containerd task of pod's database container: its id,
// the host's pid of its PID 1 (the instance manager), and the container's
// restart count. It waits (up to a minute) for the kubelet's report of the
// container to name a task containerd runs: right after a restart the pod's
// status may still name the killed container, all the longer while another
// subtest holds the kubelet stopped (stallMachine).
func databaseTask(t *testing.T, ns, pod string) (id string, pid int, restarts int32) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		cs := databaseContainer(t, ns, pod)
		id, restarts, pid = strings.TrimPrefix(cs.ContainerID, "containerd://"), cs.RestartCount, 0
		for _, line := range strings.Split(ctr(t, "task", "ls"), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == "RUNNING" {
				pid, _ = strconv.Atoi(f[1])
			}
		}
		if id == "" || pid == 0 {
			return fmt.Errorf("containerd runs no task for the database container of pod %s (%q)", pod, id)
		}
		return nil
	})
	return id, pid, restarts
}

// waitRestarted waits for the kubelet to report that it restarted pod's
// database container (a restart count above restarts) and that the new one
// runs.
func waitRestarted(t *testing.T, ns, pod string, restarts int32, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		cs := databaseContainer(t, ns, pod)
		if cs.RestartCount <= restarts || cs.State.Running == nil {
			return fmt.Errorf("the kubelet reports no restart of %s's database container (restart count %d, was %d; state %+v)", pod, cs.RestartCount, restarts, cs.State)
		}
		return nil
	})
}

// restartCount is the database container's restart count of pod.
func restartCount(t *testing.T, ns, pod string) int32 {
	t.Helper()
	return databaseContainer(t, ns, pod).RestartCount
}

// nodeStall orders the engines' subtests around a stalled kubelet. Every
// step of a subtest that runs beside a machine stall may depend on the
// kubelet (its restart of a killed container, its readiness probes that
// put a new primary behind its Service, its reports in the pod's status),
// so each such subtest holds the node shared (useNode) from its start to
// its end, and gives its share up only to stall the machine itself
// (stallMachine holds the node exclusively). A stall then happens while no
// other subtest is between two steps, and the others' figures never include
// a stopped kubelet.
var nodeStall sync.RWMutex

// useNode holds the node shared until t ends (see nodeStall).
func useNode(t *testing.T) {
	nodeStall.RLock()
	t.Cleanup(nodeStall.RUnlock)
}

// stallMachine stops the kubelet (SIGSTOP) and freezes the container of
// containerd task id: the node stalls as a whole machine does, with no probe and no
// kill coming from it; resume thaws the container first, the kubelet right
// after. With the kubelet running, the container's liveness probe would
// have the kubelet kill a frozen container before a failover (it does:
// TestNodeFrozenManager), which is what a container stall alone meets, not
// what a machine stall does. The caller holds the node shared (useNode):
// it gives its share up for the stall and takes it again on resume.
func stallMachine(t *testing.T, id string) (resume func()) {
	t.Helper()
	kubelet := nodePID(t, "kubelet")
	nodeStall.RUnlock()
	nodeStall.Lock()
	exclusive := true
	release := func() {
		if exclusive {
			exclusive = false
			nodeStall.Unlock()
			nodeStall.RLock()
		}
	}
	if err := syscall.Kill(kubelet, syscall.SIGSTOP); err != nil {
		release()
		t.Fatalf("SIGSTOP of the kubelet (pid %d): %v", kubelet, err)
	}
	resumed := false
	resume = func() {
		if resumed {
			return
		}
		resumed = true
		defer release()
		defer func() { _ = syscall.Kill(kubelet, syscall.SIGCONT) }()
		ctr(t, "task", "resume", id)
	}
	t.Cleanup(resume)
	ctr(t, "task", "pause", id)
	return resume
}

// nodePID is the pid of a process of the node that local-up started.
func nodePID(t *testing.T, name string) int {
	t.Helper()
	file := filepath.Join(e2eLocalDir, "pids", name+".pid")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return pid
}

// TestNodeSyncFaults: for each engine, 3 instances with Sync replication on
// the real node under 4 writing connections that follow the primary's
// label: a switchover loses no acknowledged write; SIGKILL of the primary's
// container (through containerd) loses none, whether the kubelet's restart
// or a failover brings writes back; a frozen primary (its container's
// processes all stopped by the cgroup freezer, as a stalled machine
// stops them, kubelet included: stallMachine) is failed over, and once
// thawed takes no write that the new primary lacks, from a client that
// kept its address either.
func TestNodeSyncFaults(t *testing.T) {
	for _, tc := range nodeReplicationCases() {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			useNode(t)
			ctx := context.Background()
			dbs, h, status := nodeShop(t, tc, failoverDelay, examplev1.ReplicationModeSync)
			w := startWriters(t, h, 4)
			defer w.stop()
			time.Sleep(2 * time.Second)

			// Switchover to any replica.
			old := status.CurrentPrimary
			requested := time.Now()
			answer, err := dbs.Switchover(ctx, "shop", &examplev1.MyDatabaseSwitchover{}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			newPrimary := answer.Status.NewPrimary
			final := h.waitPrimary(newPrimary, time.Minute)
			firstAck := w.waitAckOn(newPrimary, requested, 30*time.Second)
			if missing := w.missingOn(h, newPrimary, time.Now()); len(missing) > 0 {
				t.Errorf("switchover %s -> %s: %d acknowledged writes are not on the new primary: %v", old, newPrimary, len(missing), head(missing))
			}
			t.Logf("%s, Sync, real node: switchover %s -> %s, writes resumed on the new primary %s after the request, longest write gap %s; controller: %s",
				tc.engine.name, old, newPrimary, firstAck.Sub(requested).Round(time.Millisecond),
				w.maxGap(requested.Add(-time.Second), firstAck.Add(time.Second)).Round(time.Millisecond),
				conditionMessage(meta.FindStatusCondition(final.Conditions, examplev1.ConditionPrimaryChange)))
			status = h.waitStreaming(3)

			// SIGKILL of the primary's container: PID 1 is the manager, so
			// the engine and everything else in the container go with it.
			old = status.CurrentPrimary
			id, _, restarts := databaseTask(t, h.ns, old)
			before := w.count()
			var killed time.Time
			var resumed ack
			ctr(t, "task", "kill", "--signal", "SIGKILL", id)
			killed = time.Now()
			resumed = w.waitAck(killed, failoverDelay+failoverBound+time.Minute)
			waitRestarted(t, h.ns, old, restarts, time.Minute)
			status = h.waitStreaming(3)
			missing := w.missingOn(h, status.CurrentPrimary, time.Now())
			if len(missing) > 0 {
				t.Errorf("SIGKILL of %s's container: %d acknowledged writes are not on the primary %s: %v", old, len(missing), status.CurrentPrimary, head(missing))
			}
			how := "the kubelet restarted it in place, still the primary"
			if status.CurrentPrimary != old {
				how = fmt.Sprintf("failed over to %s (%s), the old primary back as a replica", status.CurrentPrimary,
					conditionMessage(meta.FindStatusCondition(status.Conditions, examplev1.ConditionPrimaryChange)))
			}
			if took := resumed.at.Sub(killed); took > failoverDelay+failoverBound {
				t.Errorf("writes resumed %s after SIGKILL of the primary's container, want within failoverDelay %s + %s", took, failoverDelay, failoverBound)
			}
			t.Logf("%s, Sync, real node: SIGKILL of the primary %s's container: writes resumed on %s after %s; %s; %d of %d acknowledged writes lost",
				tc.engine.name, old, resumed.pod, resumed.at.Sub(killed).Round(time.Millisecond), how, len(missing), before)

			nodeFrozenPrimary(t, h, dbs, w, status, true)
		})
	}
}

// TestNodeAsyncFrozenPrimary: for each engine, 3 instances with Async
// replication on the real node; the primary's machine stalls (its
// container frozen with the kubelet: stallMachine) while a client that kept
// its address writes to it, is failed over, and resumes: the test bounds the time the thawed old primary still
// acknowledges writes and counts those the new primary lacks.
func TestNodeAsyncFrozenPrimary(t *testing.T) {
	for _, tc := range nodeReplicationCases() {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			useNode(t)
			dbs, h, status := nodeShop(t, tc, failoverDelay, "")
			w := startWriter(t, h)
			defer w.stop()
			time.Sleep(2 * time.Second)
			nodeFrozenPrimary(t, h, dbs, w, status, false)
		})
	}
}

// thawedAcknowledgeBound is how long a thawed old primary may still
// acknowledge writes, in Async, from a client that kept its address: its
// manager's next topology read (at most max(1s, failoverDelay/10) away,
// and at once by its watch) tells it another was promoted, and it stops its
// engine.
const thawedAcknowledgeBound = 2 * time.Second

// nodeFrozenPrimary freezes the primary's container while w writes through
// the primary's label and a pinned writer keeps writing to the primary's
// address, waits for the failover, thaws it and lets the pinned writer go
// on for 5 s. With Sync replication every write either writer got
// acknowledged is on the new primary; with Async the thawed primary
// acknowledges for at most thawedAcknowledgeBound, and what it took then
// is counted as lost.
func nodeFrozenPrimary(t *testing.T, h *replicationHarness, dbs typedv1.MyDatabaseInterface, w *writer, status examplev1.MyDatabaseStatus, sync bool) {
	t.Helper()
	mode := "Async"
	if sync {
		mode = "Sync"
	}
	old := status.CurrentPrimary
	pinned := startPinnedWriter(t, h, old)
	defer pinned.stop()
	pinned.waitAckOn(old, time.Now(), 30*time.Second)

	id, _, restarts := databaseTask(t, h.ns, old)
	var resume func()
	after, frozen, decided := failOverAfter(t, func() { resume = stallMachine(t, id) }, dbs, old, "the failover of a stalled primary")
	newPrimary := after.CurrentPrimary
	firstAck := w.waitAckOn(newPrimary, frozen, time.Minute)

	resume()
	thawedAt := time.Now()
	time.Sleep(5 * time.Second)
	pinned.stop()

	late := pinned.acksAfter(thawedAt)
	window := time.Duration(0)
	if len(late) > 0 {
		window = late[len(late)-1].at.Sub(thawedAt)
	}
	lostLate := pinned.missingOnSince(h, newPrimary, thawedAt)
	lost := w.missingOn(h, newPrimary, time.Now())
	how := "the container ran on"
	if n := restartCount(t, h.ns, old); n > restarts {
		how = fmt.Sprintf("the kubelet restarted the container %d time(s) once it ran again", n-restarts)
	}
	t.Logf("%s, %s, real node: froze the primary %s's container; failover to %s decided %s after, writes through the label resumed after %s; "+
		"thawed: it acknowledged %d writes from a client that kept its address, the last %s after the thaw, %d of them not on the new primary; "+
		"%d of %d writes acknowledged through the label lost; %s",
		h.tc.engine.name, mode, old, newPrimary, decided.Sub(frozen).Round(time.Millisecond), firstAck.Sub(frozen).Round(time.Millisecond),
		len(late), window.Round(time.Millisecond), len(lostLate), len(lost), w.count(), how)
	if sync && (len(lostLate) > 0 || len(lost) > 0) {
		t.Errorf("Sync: the thawed old primary acknowledged %d writes the new primary lacks (%v), and %d writes through the label were lost (%v)",
			len(lostLate), head(lostLate), len(lost), head(lost))
	}
	if window > thawedAcknowledgeBound {
		t.Errorf("the thawed old primary acknowledged writes for %s after the thaw, want at most %s", window, thawedAcknowledgeBound)
	}

	// The old primary comes back as a replica of the new one.
	status = h.waitStreaming(3)
	if status.CurrentPrimary != newPrimary {
		t.Errorf("after the thaw the primary is %s, want %s", status.CurrentPrimary, newPrimary)
	}
	for _, in := range status.Instances {
		if in.Name == old && in.Role != examplev1.InstanceRoleReplica {
			t.Errorf("the thawed old primary %s is %s", old, in.Role)
		}
	}
}

// TestNodeFrozenManager: for each engine, 3 instances with the default
// failoverDelay on the real node; the primary's manager (PID 1 of its
// container) is stopped with SIGSTOP while its engine runs on. The
// liveness probe has the kubelet restart the container, engine and all,
// before the controller may fail over: the primary restarts in place and no
// write acknowledged through the primary's label is lost.
func TestNodeFrozenManager(t *testing.T) {
	for _, tc := range nodeReplicationCases() {
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			_, h, status := nodeShop(t, tc, 0, "")
			w := startWriter(t, h)
			defer w.stop()
			time.Sleep(2 * time.Second)

			old := status.CurrentPrimary
			_, pid, restarts := databaseTask(t, h.ns, old)
			before := w.count()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatalf("SIGSTOP of pid %d: %v", pid, err)
			}
			stopped := time.Now()
			eventually(t, examplev1.DefaultFailoverDelay+time.Minute, func() error {
				if n := restartCount(t, h.ns, old); n <= restarts {
					return fmt.Errorf("%s's container was not restarted yet", old)
				}
				return nil
			})
			restarted := time.Now()
			resumed := w.waitAck(restarted, time.Minute)
			status = h.waitStreaming(3)
			if status.CurrentPrimary != old {
				t.Errorf("the controller failed over to %s (%s) before the kubelet restarted the stuck manager's container",
					status.CurrentPrimary, conditionMessage(meta.FindStatusCondition(status.Conditions, examplev1.ConditionPrimaryChange)))
			}
			missing := w.missingOn(h, status.CurrentPrimary, time.Now())
			if len(missing) > 0 {
				t.Errorf("%d acknowledged writes are not on the primary %s: %v", len(missing), status.CurrentPrimary, head(missing))
			}
			t.Logf("%s, real node: SIGSTOP of the primary %s's manager: the kubelet restarted its container %s later, writes resumed on %s %s after the SIGSTOP; %d of %d acknowledged writes lost",
				tc.engine.name, old, restarted.Sub(stopped).Round(100*time.Millisecond), resumed.pod, resumed.at.Sub(stopped).Round(100*time.Millisecond), len(missing), before)
		})
	}
}
