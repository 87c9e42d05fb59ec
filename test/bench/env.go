package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// env is everything the scenarios talk to.
type env struct {
	o       *options
	res     *results
	runID   string
	payload payload

	kubeCfg, directCfg *rest.Config
	kube               kubernetes.Interface
	dyn                dynamic.Interface
	aggDB, directDB    clientset.Interface
	kubeREST           rest.Interface // raw requests to kube-apiserver
	directREST         rest.Interface // raw requests to mydb-apiserver

	mydbEtcd, clusterEtcd *clientv3.Client

	targets map[string]target
	pids    map[string]int
	// namespaces made by this run, deleted at the end
	namespaces []string

	started, finished time.Time
	savedMachine      string // when rendering a saved run
}

// The processes whose CPU and memory the report accounts for, as named by
// the PID files of hack/local-up.sh.
var processes = []string{"kube-apiserver", "mydb-apiserver", "etcd", "mydb-etcd", "kube-controller-manager", "bench"}

func newEnv(ctx context.Context, o *options) (*env, error) {
	base, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, err
	}
	// No client-side throttling, and no gzip: on loopback compression is
	// only CPU, and the byte counts are then the encodings' own.
	base.QPS, base.Burst = -1, 0
	base.DisableCompression = true
	base.Timeout = 0
	base.UserAgent = "mydb-bench"

	e := &env{o: o, res: newResults(), runID: strconv.FormatInt(time.Now().Unix(), 36), pids: map[string]int{}}
	e.payload = newPayload(e.runID)
	e.kubeCfg = base
	e.directCfg = rest.CopyConfig(base)
	e.directCfg.Host = o.mydbURL

	if e.kube, err = kubernetes.NewForConfig(e.kubeCfg); err != nil {
		return nil, err
	}
	if e.dyn, err = dynamic.NewForConfig(e.kubeCfg); err != nil {
		return nil, err
	}
	if e.aggDB, err = clientset.NewForConfig(protobuf(e.kubeCfg)); err != nil {
		return nil, err
	}
	if e.directDB, err = clientset.NewForConfig(protobuf(e.directCfg)); err != nil {
		return nil, err
	}
	e.kubeREST = e.kube.CoreV1().RESTClient()
	directKube, err := kubernetes.NewForConfig(e.directCfg)
	if err != nil {
		return nil, err
	}
	e.directREST = directKube.CoreV1().RESTClient()

	if e.mydbEtcd, err = clientv3.New(clientv3.Config{Endpoints: []string{o.mydbEtcdURL}, DialTimeout: 5 * time.Second}); err != nil {
		return nil, err
	}
	if e.clusterEtcd, err = clientv3.New(clientv3.Config{Endpoints: []string{o.clusterEtcdURL}, DialTimeout: 5 * time.Second}); err != nil {
		return nil, err
	}
	for _, p := range processes {
		if p == "bench" {
			e.pids[p] = os.Getpid()
			continue
		}
		raw, err := os.ReadFile(filepath.Join(o.localDir, "pids", p+".pid"))
		if err != nil {
			continue // not local: CPU accounting for it is left out
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
			e.pids[p] = pid
		}
	}

	e.targets = map[string]target{
		tAggregated: &mdbTarget{label: tAggregated, c: e.aggDB, p: e.payload},
		tDirect:     &mdbTarget{label: tDirect, c: e.directDB, p: e.payload},
		tCRD:        &crdTarget{c: e.dyn, p: e.payload},
		// the value size is set by measureStoredSizes
		tEtcd: &etcdTarget{c: e.mydbEtcd, prefix: "/bench-raw/" + e.runID + "/", value: strings.Repeat("v", objectSize)},
	}
	if err := e.installCRD(ctx); err != nil {
		return nil, fmt.Errorf("installing the CRD: %w", err)
	}
	return e, nil
}

// protobuf is c speaking protobuf, as client-go's typed clients may.
func protobuf(c *rest.Config) *rest.Config {
	c = rest.CopyConfig(c)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// checkStable fails when a server was restarted since the run began (by
// hack/local-up.sh, say): its figures would then mix two processes.
func (e *env) checkStable() error {
	for name, pid := range e.pids {
		if name == "bench" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(e.o.localDir, "pids", name+".pid"))
		if err != nil {
			continue
		}
		if now, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil && now != pid {
			return fmt.Errorf("%s was restarted during the run (pid %d, now %d): its figures are void, run again", name, pid, now)
		}
	}
	return nil
}

// installCRD creates the seed's schema as a CRD in crd.example.com and
// waits until it is Established and served.
func (e *env) installCRD(ctx context.Context) error {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]interface{}{"name": "mydatabases.crd.example.com"},
		"spec": map[string]interface{}{
			"group": "crd.example.com",
			"scope": "Namespaced",
			"names": map[string]interface{}{"kind": "MyDatabase", "listKind": "MyDatabaseList", "plural": "mydatabases", "singular": "mydatabase"},
			"versions": []interface{}{map[string]interface{}{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]interface{}{"openAPIV3Schema": map[string]interface{}{
					"type": "object",
					"properties": map[string]interface{}{
						"spec": map[string]interface{}{
							"type":     "object",
							"required": []interface{}{"engine", "storageSize"},
							"properties": map[string]interface{}{
								"engine":      map[string]interface{}{"type": "string", "enum": []interface{}{"mysql", "postgres"}},
								"replicas":    map[string]interface{}{"type": "integer", "minimum": int64(1)},
								"storageSize": map[string]interface{}{"type": "string"},
							},
						},
					},
				}},
			}},
		},
	}}
	if _, err := e.dyn.Resource(gvr).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := e.dyn.Resource(gvr).Get(ctx, "mydatabases.crd.example.com", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]interface{})
			if m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		if !established {
			return false, nil
		}
		_, err = e.dyn.Resource(crdGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// deleteCRD removes the CRD again: kubectl resolves a bare "mydatabases"
// across groups, and e2e tests on the same control plane should see only
// example.com's.
func (e *env) deleteCRD(ctx context.Context) {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if err := e.dyn.Resource(gvr).Delete(ctx, "mydatabases.crd.example.com", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.logf("deleting the CRD: %v", err)
	}
}

// namespace creates a namespace of this run and remembers to delete it.
func (e *env) namespace(ctx context.Context, purpose string) (string, error) {
	ns := fmt.Sprintf("bench-%s-%s", purpose, e.runID)
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	e.namespaces = append(e.namespaces, ns)
	return ns, nil
}

// deleteNamespaces deletes the run's namespaces and waits (up to timeout)
// until they are gone, so that the garbage they leave does not load the
// next scenario.
func (e *env) deleteNamespaces(ctx context.Context, timeout time.Duration) {
	for _, ns := range e.namespaces {
		_ = e.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	left := e.namespaces
	e.namespaces = nil
	_ = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		for _, ns := range left {
			if _, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// metrics scrapes a server's /metrics and returns the unlabelled series
// and the labelled ones by their full text before the value.
func metrics(ctx context.Context, c rest.Interface) (map[string]float64, error) {
	raw, err := c.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		i := bytes.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(line[i+1:]), 64)
		if err != nil {
			continue
		}
		out[string(line[:i])] = v
	}
	return out, nil
}

// waitControllerIdle waits until mydb's controller has no MyDatabase queued
// (two reads in a row), so its status writes do not spill into the next
// measurement.
func (e *env) waitControllerIdle(ctx context.Context) {
	zeros := 0
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		m, err := metrics(ctx, e.directREST)
		if err != nil {
			return false, nil
		}
		if m[`workqueue_depth{name="mydatabase"}`] == 0 {
			zeros++
		} else {
			zeros = 0
		}
		return zeros >= 2, nil
	})
}

// cpuTicks reads a process's user+system CPU time in clock ticks (1/100 s).
func cpuTicks(pid int) (int64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st, true
}

type cpuSnapshot map[string]int64

func (e *env) cpu() cpuSnapshot {
	s := cpuSnapshot{}
	for name, pid := range e.pids {
		if t, ok := cpuTicks(pid); ok {
			s[name] = t
		}
	}
	return s
}

// recordCPU adds, per process, the CPU milliseconds spent per operation
// between two snapshots.
func (e *env) recordCPU(prefix string, before, after cpuSnapshot, ops int) {
	if ops == 0 {
		return
	}
	for name, b := range before {
		a, ok := after[name]
		if !ok {
			continue
		}
		e.res.add(prefix+"/"+name, float64(a-b)*10/float64(ops))
	}
}

// memSample is the median of a few readings of each server's resident set
// and Go heap in use, each taken right after a GC the harness asks for.
func (e *env) memSample(ctx context.Context) (map[string]float64, error) {
	const samples = 5
	vals := map[string][]float64{}
	servers := map[string]rest.Interface{"kube-apiserver": e.kubeREST, "mydb-apiserver": e.directREST}
	for i := 0; i < samples; i++ {
		// net/http/pprof runs a GC before a heap profile when asked (gc=1):
		// the heap in use read right after is close to the live heap.
		for _, c := range servers {
			if _, err := c.Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(ctx); err != nil {
				return nil, fmt.Errorf("forcing a GC: %w", err)
			}
		}
		for name, c := range servers {
			m, err := metrics(ctx, c)
			if err != nil {
				return nil, err
			}
			vals[name+"/rss"] = append(vals[name+"/rss"], m["process_resident_memory_bytes"])
			vals[name+"/heap"] = append(vals[name+"/heap"], m["go_memstats_heap_inuse_bytes"])
		}
		time.Sleep(time.Second)
	}
	out := map[string]float64{}
	for k, v := range vals {
		out[k] = median(v)
	}
	return out, nil
}
