//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const leaseName = "mydb-controller"

// TestLeaderFailover runs a second mydb-apiserver beside make local-up's,
// kills the leader with SIGKILL while MyDatabases are being created, and
// checks that the standby takes the lease over within its duration and that
// every MyDatabase ends with exactly one StatefulSet.
func TestLeaderFailover(t *testing.T) {
	// Not parallel: it kills the controllers' leader (local-up's mydb-apiserver).
	ctx := context.Background()
	kube := kubeClient(t)

	sb := startStandby(t)
	leaderPID, leaderIdentity, leaseDuration := sb.leaderPID, sb.leaderIdentity, sb.leaseDuration
	standbyIdentity, standbyConfig := sb.identity, sb.config

	ns := newNamespace(t)
	dbs := mydbClient(t, standbyConfig).ExampleV1().MyDatabases(ns)
	// /readyz waits for the client CAs, so the first request authenticates.
	if _, err := dbs.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("the standby is ready but refused the admin: %v", err)
	}
	const total = 30
	var wg sync.WaitGroup
	createErrs := make(chan error, total)
	// Some creates land before the leader dies, the rest during the failover.
	someCreated := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		pace := time.NewTicker(100 * time.Millisecond)
		defer pace.Stop()
		for i := 0; i < total; i++ {
			db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ha-%02d", i)},
				Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi")}}
			if _, err := dbs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
				createErrs <- err
			}
			if i == 9 {
				close(someCreated)
			}
			<-pace.C
		}
	}()
	<-someCreated
	killed := time.Now()
	if err := syscall.Kill(leaderPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var failover time.Duration
	eventually(t, 2*leaseDuration+10*time.Second, func() error {
		l, err := kube.CoordinationV1().Leases("mydb-system").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if holder := ptr.Deref(l.Spec.HolderIdentity, ""); holder != standbyIdentity {
			return fmt.Errorf("lease still held by %q (was %q)", holder, leaderIdentity)
		}
		failover = time.Since(killed)
		return nil
	})
	t.Logf("failover: the standby took the lease %s after the leader was killed (lease duration %s)", failover.Round(10*time.Millisecond), leaseDuration)
	// A killed leader cannot release its lease: the standby must see it
	// expire (the lease duration after it last saw a renewal) and then win
	// it on a retry, and client-go jitters retries of 2s by up to 120%.
	if limit := leaseDuration + 10*time.Second; failover > limit {
		t.Errorf("failover took %s, more than the lease duration %s and two jittered retries (%s)", failover, leaseDuration, limit)
	}

	wg.Wait()
	close(createErrs)
	for err := range createErrs {
		t.Errorf("create: %v", err)
	}
	eventually(t, reconcileTimeout, func() error {
		for i := 0; i < total; i++ {
			name := fmt.Sprintf("ha-%02d", i)
			list, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{
				LabelSelector: labels.Set{"app.kubernetes.io/instance": name}.String()})
			if err != nil {
				return err
			}
			if len(list.Items) != 1 {
				return fmt.Errorf("%s has %d StatefulSets", name, len(list.Items))
			}
		}
		return nil
	})
}

// standby is a second mydb-apiserver beside make local-up's (the leader
// when it starts), with the same command line on its own port and a
// --leader-elect-identity of its own.
type standby struct {
	identity string
	port     int
	config   *rest.Config // straight to the standby, as the admin
	logPath  string
	auditLog string // what its audit policy records

	// make local-up's mydb-apiserver, as it was when the standby started.
	leaderPID      int
	leaderIdentity string
	leaderLog      string
	leaseDuration  time.Duration
}

// startStandby starts a standby and waits until it is ready. When the test
// ends it kills it and, when make local-up's mydb-apiserver is gone, runs
// hack/local-up.sh to bring it back for the tests that follow.
func startStandby(t *testing.T) *standby {
	t.Helper()
	ctx := context.Background()
	localDir := e2eLocalDir
	leaderPID, leaderArgs := localMydbProcess(t, localDir)
	// A previous test's standby may have held the lease last: local-up's
	// takes it back once it expires.
	var lease *coordinationv1.Lease
	eventually(t, 45*time.Second, func() (err error) {
		lease, err = kubeClient(t).CoordinationV1().Leases("mydb-system").Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the local mydb-apiserver holds no lease: %v", err)
		}
		if holder := ptr.Deref(lease.Spec.HolderIdentity, ""); holder == "" || strings.HasPrefix(holder, "e2e-standby-") {
			return fmt.Errorf("the lease is held by %q, not local-up's mydb-apiserver", holder)
		}
		return nil
	})
	sb := &standby{
		leaderPID:      leaderPID,
		leaderIdentity: ptr.Deref(lease.Spec.HolderIdentity, ""),
		leaderLog:      filepath.Join(localDir, "logs", "mydb-apiserver.log"),
		leaseDuration:  time.Duration(ptr.Deref(lease.Spec.LeaseDurationSeconds, 15)) * time.Second,
		port:           freePort(t),
		logPath:        filepath.Join(localDir, "logs", "mydb-apiserver-standby.log"),
		auditLog:       filepath.Join(localDir, "logs", "mydb-apiserver-standby-audit.log"),
	}
	sb.identity = fmt.Sprintf("e2e-standby-%d", sb.port)
	args := []string{fmt.Sprintf("--secure-port=%d", sb.port), "--leader-elect-identity=" + sb.identity, "--audit-log-path=" + sb.auditLog}
	for _, a := range leaderArgs[1:] {
		if !strings.HasPrefix(a, "--secure-port=") && !strings.HasPrefix(a, "--audit-log-path=") {
			args = append(args, a)
		}
	}
	logFile, err := os.Create(sb.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(leaderArgs[0], args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if syscall.Kill(leaderPID, 0) == nil {
			return
		}
		// Bring make local-up's mydb-apiserver back for the tests that follow.
		out, err := exec.Command(filepath.Join(repoRoot, "hack", "local-up.sh")).CombinedOutput()
		if err != nil {
			t.Errorf("restoring the local control plane: %v\n%s", err, out)
		}
	})
	sb.config = directConfig(t, sb.port)
	eventually(t, time.Minute, func() error { return ready(sb.config) })
	return sb
}

// leaseHolder is who holds the controllers' Lease now.
func leaseHolder(ctx context.Context, t *testing.T) (string, error) {
	l, err := kubeClient(t).CoordinationV1().Leases("mydb-system").Get(ctx, leaseName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// localMydbProcess returns the PID and command line of make local-up's mydb-apiserver.
func localMydbProcess(t *testing.T, localDir string) (int, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(localDir, "pids", "mydb-apiserver.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("mydb-apiserver (pid %d) is not running: %v", pid, err)
	}
	return pid, strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
}

// directConfig reaches a mydb-apiserver on port straight, not through the
// aggregator, as the cluster admin (a client certificate mydb verifies
// against the cluster's client CA).
func directConfig(t *testing.T, port int) *rest.Config {
	t.Helper()
	cfg := restConfig(t)
	cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", port)
	return cfg
}

func ready(cfg *rest.Config) error {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	resp, err := client.Get(cfg.Host + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("/readyz: %d", resp.StatusCode)
	}
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
