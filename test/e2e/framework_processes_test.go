//go:build e2e

package e2e

// The control plane's processes as tests stop, restart and add to them: local-up's components from
// their PID files and command lines (localComponent), a second mydb-apiserver (startStandby), the
// controllers' lease, and their logs.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/storeguard"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

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

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// readFrom is what was written to path from offset on.
func readFrom(t *testing.T, path string, offset int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// storeRecord reads the guard's record.
func storeRecord(t *testing.T, kube kubernetes.Interface) storeguard.Marker {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps(storeRecordNamespace).Get(context.Background(), storeRecordName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the storage guard's record: %v", err)
	}
	seq, err := strconv.ParseInt(cm.Data["sequence"], 10, 64)
	if err != nil || cm.Data["uid"] == "" {
		t.Fatalf("the record %v does not parse: %v", cm.Data, err)
	}
	return storeguard.Marker{UID: cm.Data["uid"], Sequence: seq}
}

// localProcess is a component make local-up started, which the test stops
// and starts again with the same command line, its log and PID file where
// local-up keeps them (so local-up and local-down still know it).
type localProcess struct {
	name, localDir string
	pid            int
	args           []string
}

func localComponent(t *testing.T, localDir, name string) *localProcess {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(localDir, "pids", name+".pid"))
	if err != nil {
		t.Fatalf("%s is not running (make local-up): %v", name, err)
	}
	pid := mustAtoi(t, strings.TrimSpace(string(data)))
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("%s (pid %d) is not running: %v", name, pid, err)
	}
	return &localProcess{name: name, localDir: localDir, pid: pid, args: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")}
}

func (p *localProcess) alive() bool {
	return p.pid > 0 && syscall.Kill(p.pid, 0) == nil
}

// stop sends TERM, and KILL after 15s.
func (p *localProcess) stop(t *testing.T) {
	t.Helper()
	if !p.alive() {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	deadline := time.Now().Add(15 * time.Second)
	for p.alive() {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("stopped %s (pid %d)", p.name, p.pid)
	p.pid = 0
}

// start runs the component again in a session of its own, as local-up does.
func (p *localProcess) start(t *testing.T) {
	t.Helper()
	log, err := os.OpenFile(filepath.Join(p.localDir, "logs", p.name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	p.pid = cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(p.localDir, "pids", p.name+".pid"), []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("started %s (pid %d)", p.name, p.pid)
}

func (p *localProcess) ensureRunning(t *testing.T) {
	if !p.alive() {
		p.start(t)
	}
}

// flagValue is the value of --name=value in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %v", name, args)
	return ""
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
