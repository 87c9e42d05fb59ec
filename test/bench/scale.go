package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

var quietLog = log.New(io.Discard, "", 0)

// scaleMode is one way the controller may watch its instances, as
// mydb-apiserver's flags set it.
type scaleMode struct {
	key, title string
	flags      string
}

// The modes the scale scenario runs, in order. Both poll every 10s, the
// server's default (the rig's is 2s).
var scaleModes = []scaleMode{
	{"polling", "polling only (`--instance-health-streams=false`)", "--instance-poll-interval=10s --instance-health-streams=false"},
	{"streams", "health streams, resync every 1m (the defaults)", "--instance-poll-interval=10s --instance-resync-interval=1m"},
}

// scenarioScale measures one controller leading -scale-n databases of 3
// instances each, answered by simulatedManagers: its CPU and memory, its
// requests to kube-apiserver and to the managers, in each scaleMode, one
// after the other on the same databases (the server restarted with the
// mode's flags between them), in one run.
func (e *env) scenarioScale(ctx context.Context) error {
	ns, err := e.namespace(ctx, "scale")
	if err != nil {
		return err
	}
	// The rig's three kwok nodes hold 110 pods each: nodes of their own
	// for the databases' pods, gone with the scenario.
	nodes, err := e.addScaleNodes(ctx, 3*e.o.scaleN)
	if err != nil {
		return err
	}
	defer e.deleteScaleNodes(nodes)
	sim := &simulatedManagers{kube: e.kube, mydb: e.directDB, namespace: ns}
	simCtx, stopSim := context.WithCancel(ctx)
	defer stopSim()
	go sim.run(simCtx)
	defer func() {
		// The rig as it was: the server with its own flags only.
		if err := e.restartMydb(context.Background(), ""); err != nil {
			e.logf("scale: restarting mydb-apiserver with the rig's flags: %v", err)
		}
	}()
	// Start in the first mode, so that the databases come up under it.
	if err := e.restartMydb(ctx, scaleModes[0].flags); err != nil {
		return err
	}
	n := e.o.scaleN
	start := time.Now()
	if err := e.createScaleDatabases(ctx, ns, n); err != nil {
		return err
	}
	e.logf("scale: %d MyDatabases created in %s; waiting for all to be Ready", n, time.Since(start).Round(time.Second))
	if err := e.waitScaleReady(ctx, ns, n, sim, 40*time.Minute); err != nil {
		return err
	}
	e.res.add("scale/ready-after", time.Since(start).Seconds())
	e.logf("scale: %d databases (%d simulated managers) Ready after %s", n, sim.listening(), time.Since(start).Round(time.Second))
	for _, mode := range scaleModes {
		// Each mode from a restart, the creates' work (the pods', the
		// claims', the children's) done: the same start for both.
		if err := e.restartMydb(ctx, mode.flags); err != nil {
			return err
		}
		if err := e.measureScaleMode(ctx, ns, n, sim, mode); err != nil {
			return fmt.Errorf("%s: %w", mode.key, err)
		}
	}
	if f := sim.failures.Load(); f > 0 {
		e.res.note("scale/failures", fmt.Sprintf("%d, the last: %s", f, sim.lastError()))
	}
	return nil
}

// createScaleDatabases creates n MyDatabases of 3 instances from 16
// clients, straight at mydb-apiserver.
func (e *env) createScaleDatabases(ctx context.Context, ns string, n int) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			defer func() { <-sem }()
			db := &examplev1.MyDatabase{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EnginePostgres, Replicas: ptr.To[int32](3),
					StorageSize: resource.MustParse("1Gi")},
			}
			if _, err := e.directDB.ExampleV1().MyDatabases(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}(fmt.Sprintf("db-%04d", i))
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// readyCount is how many of ns's MyDatabases say Ready.
func (e *env) readyCount(ctx context.Context, ns string) (int, error) {
	list, err := e.directDB.ExampleV1().MyDatabases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	ready := 0
	for _, db := range list.Items {
		if meta.IsStatusConditionTrue(db.Status.Conditions, examplev1.ConditionReady) {
			ready++
		}
	}
	return ready, nil
}

func (e *env) waitScaleReady(ctx context.Context, ns string, n int, sim *simulatedManagers, timeout time.Duration) error {
	last := time.Now()
	ready := 0
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if ready, err = e.readyCount(ctx, ns); err != nil {
			return false, nil
		}
		if time.Since(last) > time.Minute {
			e.logf("scale: %d of %d Ready, %d managers simulated", ready, n, sim.listening())
			last = time.Now()
		}
		return ready == n, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d databases Ready after %s (%d managers simulated; last failure: %q): %w", ready, n, timeout, sim.listening(), sim.lastError(), err)
	}
	return nil
}

// restartMydb restarts the rig's mydb-apiserver with flags after its own,
// and follows its new PID.
func (e *env) restartMydb(ctx context.Context, flags string) error {
	if err := e.localUp(ctx, "RESTART_MYDB=1", "MYDB_APISERVER_FLAGS="+flags); err != nil {
		return err
	}
	e.logf("scale: mydb-apiserver restarted (pid %d) with %q", e.pids["mydb-apiserver"], flags)
	return nil
}

// kubeRequests is how many requests mydb-apiserver's clients sent to
// kube-apiserver (rest_client_requests_total of its host).
func kubeRequests(m map[string]float64, kubeHost string) float64 {
	total := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, "rest_client_requests_total{") && strings.Contains(k, `host="`+kubeHost+`"`) {
			total += v
		}
	}
	return total
}

// measureScaleMode waits until the new leader has every database Ready and
// its first round of work is over, then measures for -scale-window.
func (e *env) measureScaleMode(ctx context.Context, ns string, n int, sim *simulatedManagers, mode scaleMode) error {
	if err := e.waitScaleReady(ctx, ns, n, sim, 10*time.Minute); err != nil {
		return err
	}
	e.waitControllerIdle(ctx)
	// The first polls and the streams' opening are a start, not the
	// steady state: one resync interval and a poll.
	warmup := 70 * time.Second
	e.logf("scale %s: warming up for %s", mode.key, warmup)
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
		return ctx.Err()
	}
	kubeHost := strings.TrimPrefix(e.kubeCfg.Host, "https://")
	before, err := metrics(ctx, e.directREST)
	if err != nil {
		return err
	}
	cpuBefore, simBefore, t0 := e.cpu(), sim.counts(), time.Now()
	window := e.o.scaleWindow
	e.logf("scale %s: measuring for %s", mode.key, window)
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return ctx.Err()
	}
	cpuAfter, simAfter, elapsed := e.cpu(), sim.counts(), time.Since(t0).Seconds()
	after, err := metrics(ctx, e.directREST)
	if err != nil {
		return err
	}
	ready, err := e.readyCount(ctx, ns)
	if err != nil {
		return err
	}
	key := "scale/" + mode.key
	perSec := func(a, b float64) float64 { return (a - b) / elapsed }
	e.res.add(key+"/ready", float64(ready))
	for _, p := range []string{"mydb-apiserver", "kube-apiserver", "mydb-etcd"} {
		if a, ok := cpuAfter[p]; ok {
			// ticks of 10 ms, as a share of one core
			e.res.add(key+"/cpu/"+p, float64(a-cpuBefore[p])*10/1000/elapsed)
		}
	}
	e.res.add(key+"/kube-rps", perSec(kubeRequests(after, kubeHost), kubeRequests(before, kubeHost)))
	e.res.add(key+"/reconciles-per-s", perSec(sumPrefix(after, "mydb_controller_reconcile_duration_seconds_count"), sumPrefix(before, "mydb_controller_reconcile_duration_seconds_count")))
	e.res.add(key+"/status-rps", perSec(float64(simAfter.Status), float64(simBefore.Status)))
	e.res.add(key+"/lines-per-s", perSec(float64(simAfter.Lines), float64(simBefore.Lines)))
	e.res.add(key+"/other-rps", perSec(float64(simAfter.Other), float64(simBefore.Other)))
	e.res.add(key+"/streams", float64(simAfter.Streams))
	mem, err := e.memSample(ctx)
	if err != nil {
		return err
	}
	e.res.add(key+"/rss", mem["mydb-apiserver/rss"])
	e.res.add(key+"/heap", mem["mydb-apiserver/heap"])
	e.logf("scale %s: mydb-apiserver %.0f%% of a core, %s RSS; %.1f requests/s to kube-apiserver; %.1f reconciles/s; managers: %.1f status reads/s, %.0f stream lines/s (%d streams), %.2f other/s; %d of %d Ready",
		mode.key, 100*mustMed(e, key+"/cpu/mydb-apiserver"), fmtBytes(mem["mydb-apiserver/rss"]), mustMed(e, key+"/kube-rps"), mustMed(e, key+"/reconciles-per-s"),
		mustMed(e, key+"/status-rps"), mustMed(e, key+"/lines-per-s"), simAfter.Streams, mustMed(e, key+"/other-rps"), ready, n)
	return nil
}

func sumPrefix(m map[string]float64, prefix string) float64 {
	total := 0.0
	for k, v := range m {
		if k == prefix || strings.HasPrefix(k, prefix+"{") {
			total += v
		}
	}
	return total
}

func mustMed(e *env, key string) float64 {
	v, _ := e.res.med(key)
	return v
}

// addScaleNodes adds three kwok nodes, one per zone, with room for pods
// beyond the rig's; kwok takes over any node with its annotation.
func (e *env) addScaleNodes(ctx context.Context, pods int) ([]string, error) {
	var made []string
	for i, zone := range []string{"zone-a", "zone-b", "zone-c"} {
		name := fmt.Sprintf("kwok-scale-%s-%d", e.runID, i)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100000"), corev1.ResourceMemory: resource.MustParse("100Ti"),
			corev1.ResourcePods: *resource.NewQuantity(int64(pods/3+100), resource.DecimalSI), corev1.ResourceEphemeralStorage: resource.MustParse("100Ti"),
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
				Labels: map[string]string{"type": "kwok", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
					"node-role.kubernetes.io/agent": "", "topology.kubernetes.io/region": "local", "topology.kubernetes.io/zone": zone}},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Phase: corev1.NodeRunning,
				NodeInfo: corev1.NodeSystemInfo{Architecture: "amd64", OperatingSystem: "linux"}},
		}
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			e.deleteScaleNodes(made)
			return nil, err
		}
		made = append(made, name)
	}
	return made, nil
}

func (e *env) deleteScaleNodes(nodes []string) {
	for _, name := range nodes {
		if err := e.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			e.logf("scale: deleting node %s: %v", name, err)
		}
	}
}
