//go:build e2e

// Package e2e drives mydb through a real kube-apiserver's aggregation layer,
// with real kubectl and client-go, on the control plane that make local-up
// starts.
//
// A test that works in namespaces and databases of its own calls
// t.Parallel (make e2e runs E2E_PARALLEL of them at a time); one that
// disturbs what every test shares (restarts or reconfigures mydb-apiserver
// or its etcd, stops the controllers' leader, changes cluster-wide
// objects, or counts cluster-wide events others would add to) does not,
// and says why. Go runs all of those first, one at a time, and the
// parallel ones after them, so none overlaps a disturbance. What parallel
// tests share is safe for it: each rig process holds its pod IP until it
// has exited (podIPs), and S3 servers never get the same port.
//
// What several tests use lives in framework files by concern: this one
// (the clusters' clients, kubectl, waiting), framework_clients_test.go
// (straight at mydb, as a user, raw requests), framework_processes_test.go
// (local-up's processes, a standby mydb-apiserver, the lease),
// framework_databases_test.go (databases, their data, backups to S3),
// framework_writers_test.go (writers under switchover and failover) and
// rig_test.go (the stand-in kubelet that runs each pod's mydb-instance).
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	"github.com/mydb-dev/mydb/test/repo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

var (
	repoRoot   = repo.MustRoot()
	kubeconfig = envOr("E2E_KUBECONFIG", filepath.Join(repoRoot, "_output", "local", "kubeconfig"))
	kubectlBin = envOr("E2E_KUBECTL", filepath.Join(repoRoot, "_output", "bin", "kubectl"))
	// e2eLocalDir is the state directory of the control plane under test
	// (LOCAL_DIR of hack/local-up.sh): pids, logs, certificates, the node.
	e2eLocalDir = envOr("E2E_LOCAL_DIR", filepath.Join(repoRoot, "_output", "local"))
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// restConfig reaches the cluster as its admin, through kube-apiserver.
func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("loading %s (run make local-up): %v", kubeconfig, err)
	}
	return cfg
}

func mydbClient(t *testing.T, cfg *rest.Config) clientset.Interface {
	t.Helper()
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kubeClient(t *testing.T) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// result is what one kubectl run printed.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("err=%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
}

// kubectlCacheDir is a discovery cache of this run's own, so kubectl never
// answers from a cache an earlier mydb filled.
var kubectlCacheDir = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "mydb-e2e-kubectl-cache")
	if err != nil {
		panic(err)
	}
	return dir
})

// kubectl runs kubectl against the local cluster with stdin as its input.
func kubectl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", kubectlCacheDir()}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("kubectl %s", strings.Join(args, " "))
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// mustKubectl runs kubectl and fails the test when it fails.
func mustKubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := kubectl(t, stdin, args...)
	if r.err != nil {
		t.Fatalf("kubectl %s failed:\n%s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// newNamespace creates a namespace of the test's own and deletes it after.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = strings.Trim(name, "-") + fmt.Sprintf("-%d", time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"e2e.mydb.dev/test": "true"}}}
	client := kubeClient(t)
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpNamespace(t, name)
		}
		_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// dumpNamespace keeps what a failed test's namespace held before it goes:
// its databases, pods and events as YAML and every container's log (the
// one before the last restart too) under <state dir>/logs/failed/<ns>; a
// line per pod (phase, restarts, readiness) goes to the test's log.
func dumpNamespace(t *testing.T, ns string) {
	dir := filepath.Join(e2eLocalDir, "logs", "failed", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping namespace %s: %v", ns, err)
		return
	}
	for _, kind := range []string{"mydatabases,mydatabasebackups", "pods,services,endpoints,persistentvolumeclaims", "events"} {
		out, err := exec.Command(kubectlBin, "--kubeconfig", kubeconfig, "get", kind, "-n", ns, "-o", "yaml").CombinedOutput()
		if err != nil {
			out = append(out, []byte("\n"+err.Error())...)
		}
		_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(kind, ",", "-")+".yaml"), out, 0o644)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := kubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("keeping namespace %s: %v", ns, err)
		return
	}
	for _, p := range pods.Items {
		var states []string
		for _, cs := range p.Status.ContainerStatuses {
			states = append(states, fmt.Sprintf("%s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount))
			for _, previous := range []bool{false, true} {
				logs, err := kubeClient(t).CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: previous}).DoRaw(ctx)
				if err != nil {
					continue
				}
				file := p.Name + "." + cs.Name + ".log"
				if previous {
					file = p.Name + "." + cs.Name + ".previous.log"
				}
				_ = os.WriteFile(filepath.Join(dir, file), logs, 0o644)
			}
		}
		t.Logf("at the failure: pod %s %s (ip %s) %s", p.Name, p.Status.Phase, p.Status.PodIP, strings.Join(states, ", "))
	}
	t.Logf("what namespace %s held: %s", ns, dir)
}

// quantity parses a literal quantity.
func quantity(s string) resource.Quantity { return resource.MustParse(s) }

// eventually polls check until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
