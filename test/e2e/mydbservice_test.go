//go:build e2e && faults

package e2e

import (
	"context"
	"encoding/json"
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

	"github.com/mydb-dev/mydb/test/tcpproxy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// mydbService stands, for the length of a test, for a Deployment of
// mydb-apiserver behind its Service. The APIService's ExternalName Service
// is localhost:MYDB_PORT, so the aggregator always dials that one port:
// make local-up's mydb-apiserver is stopped, and a TCP proxy of the test's
// own listens there instead and forwards each connection to one of the
// replicas in rotation, as kube-proxy does to a Service's ready pods. The
// replicas run local-up's command line on ports of their own, each with a
// leader-election identity of its own. When the test ends, local-up's
// mydb-apiserver is back, serving through the aggregator.
//
// A real Service's EndpointSlices change when its ready pods do, and that
// change makes the aggregator recheck the APIService at once; an
// ExternalName Service has no endpoints, so after a failed check the
// aggregator would retry only on its own backoff (up to 30 s).
// endpointsChanged stands for that event: each change of the rotation
// annotates the Service with the replicas in it.
type mydbService struct {
	t        *testing.T
	localDir string
	local    *localProcess
	args     []string // local-up's command line without its port and identity
	proxy    *tcpproxy.Proxy

	mu       sync.Mutex
	replicas []*mydbReplica // in rotation, oldest first
	started  int
}

// mydbReplica is one mydb-apiserver process behind the proxy.
type mydbReplica struct {
	name   string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
}

func (r *mydbReplica) addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// startMydbService replaces make local-up's mydb-apiserver with n replicas
// behind a proxy on its port, and waits until the aggregator serves
// example.com through them.
func startMydbService(t *testing.T, n int) *mydbService {
	t.Helper()
	localDir := e2eLocalDir
	s := &mydbService{t: t, localDir: localDir, local: localComponent(t, localDir, "mydb-apiserver")}
	port := mustAtoi(t, flagValue(t, s.local.args, "--secure-port"))
	for _, a := range s.local.args[1:] {
		if !strings.HasPrefix(a, "--secure-port=") && !strings.HasPrefix(a, "--leader-elect-identity=") {
			s.args = append(s.args, a)
		}
	}
	t.Cleanup(s.restoreLocal)
	for i := 0; i < n; i++ {
		s.replicas = append(s.replicas, s.startReplica())
	}
	s.local.stop(t)
	var err error
	eventually(t, 10*time.Second, func() error {
		s.proxy, err = tcpproxy.Listen(fmt.Sprintf("127.0.0.1:%d", port), s.addrs()...)
		return err
	})
	s.endpointsChanged()
	waitAggregated(t, 2*time.Minute)
	return s
}

func (s *mydbService) addrs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, r := range s.replicas {
		out = append(out, r.addr())
	}
	return out
}

// startReplica starts a replica on a free port and waits for its /readyz.
func (s *mydbService) startReplica() *mydbReplica {
	t := s.t
	t.Helper()
	s.mu.Lock()
	s.started++
	r := &mydbReplica{name: fmt.Sprintf("mydb-apiserver-replica-%d", s.started), port: freePort(t), exited: make(chan struct{})}
	s.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(s.localDir, "logs", r.name+".log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--secure-port=" + strconv.Itoa(r.port), "--leader-elect-identity=e2e-" + r.name}, s.args...)
	r.cmd = exec.Command(s.local.args[0], args...)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = r.cmd.Wait()
		log.Close()
		close(r.exited)
	}()
	direct := directConfig(t, r.port)
	eventually(t, 2*time.Minute, func() error {
		select {
		case <-r.exited:
			t.Fatalf("%s exited before it was ready (log %s)", r.name, filepath.Join(s.localDir, "logs", r.name+".log"))
		default:
		}
		return ready(direct)
	})
	return r
}

// terminate sends SIGTERM, and SIGKILL after grace, as the kubelet does to
// a pod's container. It tells whether the replica had to be killed.
func (r *mydbReplica) terminate(grace time.Duration) (killed bool) {
	select {
	case <-r.exited:
		return false
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
		return false
	case <-time.After(grace):
		_ = r.cmd.Process.Kill()
		<-r.exited
		return true
	}
}

// rollout is one replica replaced.
type rollout struct {
	old, new          string
	started           time.Time
	newReady          time.Time // the new replica's /readyz passed; it joined the rotation
	oldRemoved        time.Time // the old one left the rotation and got SIGTERM
	oldExited         time.Time
	oldKilled         bool // it outlived the grace period
	proxyDialFailures int  // connections the proxy could not forward meanwhile
}

// roll replaces the oldest replica as a Deployment with maxSurge 1 and
// maxUnavailable 0 does: a new replica starts and joins the rotation once
// its /readyz passes; then the old one leaves the rotation (its endpoint
// removed: open connections stay) and is terminated with grace.
func (s *mydbService) roll(grace time.Duration) rollout {
	s.t.Helper()
	dialFailures := s.proxy.Stats().DialFailures
	ro := rollout{started: time.Now()}
	fresh := s.startReplica()
	s.proxy.Add(fresh.addr())
	ro.newReady = time.Now()
	s.mu.Lock()
	old := s.replicas[0]
	s.replicas = append(s.replicas[1:], fresh)
	s.mu.Unlock()
	ro.old, ro.new = old.name, fresh.name
	s.proxy.Remove(old.addr())
	s.endpointsChanged()
	ro.oldRemoved = time.Now()
	ro.oldKilled = old.terminate(grace)
	ro.oldExited = time.Now()
	ro.proxyDialFailures = s.proxy.Stats().DialFailures - dialFailures
	return ro
}

// outage stops every replica (out of the rotation first, then SIGTERM),
// waits for gap once the last has exited, and starts one new replica. It
// answers how long no replica was in the rotation, and how long none ran
// at all: an old replica serves what it already holds (the aggregator's
// open connections, the tunnels through it) until it exits, for up to its
// grace period, so only the second is a time a new request cannot be
// served.
func (s *mydbService) outage(gap time.Duration) (outOfRotation, noneRunning time.Duration) {
	s.t.Helper()
	s.mu.Lock()
	old := s.replicas
	s.replicas = nil
	s.mu.Unlock()
	for _, r := range old {
		s.proxy.Remove(r.addr())
	}
	s.endpointsChanged()
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range old {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.terminate(10 * time.Second)
		}()
	}
	wg.Wait()
	exited := time.Now()
	time.Sleep(gap)
	fresh := s.startReplica()
	s.mu.Lock()
	s.replicas = append(s.replicas, fresh)
	s.mu.Unlock()
	s.proxy.Add(fresh.addr())
	s.endpointsChanged()
	return time.Since(start), time.Since(exited)
}

// endpointsChanged annotates the APIService's Service with the replicas in
// the rotation, as the EndpointSlice controller's update of a real
// Service's endpoints would tell the aggregator (see mydbService).
func (s *mydbService) endpointsChanged() {
	s.t.Helper()
	addrs := strings.Join(s.addrs(), ",")
	if s.proxy == nil {
		addrs = "local-up"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"e2e.mydb.dev/endpoints": addrs}}})
	if _, err := kubeClient(s.t).CoreV1().Services("mydb-system").Patch(context.Background(), "mydb-apiserver",
		types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		s.t.Errorf("annotating the Service mydb-system/mydb-apiserver with its endpoints: %v", err)
	}
}

// restoreLocal stops the proxy and the replicas and brings make local-up's
// mydb-apiserver back on its port, for the tests that follow.
func (s *mydbService) restoreLocal() {
	t := s.t
	if s.proxy != nil {
		s.proxy.Close()
	}
	s.mu.Lock()
	replicas := s.replicas
	s.mu.Unlock()
	for _, r := range replicas {
		r.terminate(10 * time.Second)
	}
	s.local.ensureRunning(t)
	s.proxy = nil
	s.endpointsChanged()
	waitAggregated(t, 2*time.Minute)
}

// waitAggregated waits until the APIService is Available and a list of
// MyDatabases through the aggregator succeeds.
func waitAggregated(t *testing.T, timeout time.Duration) {
	t.Helper()
	mydb := mydbClient(t, restConfig(t))
	eventually(t, timeout, func() error {
		if err := apiServiceAvailable(t); err != nil {
			return err
		}
		_, err := mydb.ExampleV1().MyDatabases("default").List(context.Background(), metav1.ListOptions{Limit: 1})
		return err
	})
}

// apiServiceAvailable tells whether the aggregator holds v1.example.com
// Available.
func apiServiceAvailable(t *testing.T) error {
	t.Helper()
	var svc struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	raw, err := kubeClient(t).Discovery().RESTClient().Get().AbsPath("/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com").
		Timeout(5 * time.Second).DoRaw(context.Background())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &svc); err != nil {
		return err
	}
	for _, c := range svc.Status.Conditions {
		if c.Type == "Available" {
			if c.Status != metav1.ConditionTrue {
				return fmt.Errorf("APIService v1.example.com Available=%s: %s", c.Status, c.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("APIService v1.example.com has no Available condition")
}
