package instance

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	pid, state, ppid, pgid, ok := parseStat("4242 (postgres: walsender (x)) Z 1 4200 4200 0 -1")
	if !ok || pid != 4242 || state != "Z" || ppid != 1 || pgid != 4200 {
		t.Errorf("got %d %s %d %d %v", pid, state, ppid, pgid, ok)
	}
}

// TestReapOrphans makes the test process a subreaper, so an orphaned
// grandchild is re-parented to it as it would be to a container's PID 1.
func TestReapOrphans(t *testing.T) {
	const prSetChildSubreaper = 36
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
		t.Skipf("prctl(PR_SET_CHILD_SUBREAPER): %v", errno)
	}
	defer syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 0, 0)

	// An "engine" in its own process group that leaves a child behind.
	engine := exec.Command("sh", "-c", "sleep 0.2 & echo $!")
	engine.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := engine.Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	// A tool of the manager's own, exited but not yet waited for: not ours to reap.
	tool := exec.Command("true")
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}

	// Wait until the orphan is our zombie (nobody else would collect it)
	// and the tool has exited too.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(orphan) + "/stat")
		if err != nil {
			t.Fatalf("orphan %d vanished before the reaper ran: %v", orphan, err)
		}
		tb, _ := os.ReadFile("/proc/" + strconv.Itoa(tool.Process.Pid) + "/stat")
		_, toolState, _, _, _ := parseStat(string(tb))
		if _, state, ppid, _, _ := parseStat(string(b)); state == "Z" && ppid == os.Getpid() && toolState == "Z" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d never became our zombie: %s", orphan, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := reapOrphans(0); n != 1 {
		t.Errorf("reaped %d processes, want the one orphan", n)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(orphan)); err == nil {
		t.Fatalf("orphan %d was not reaped", orphan)
	}
	if err := tool.Wait(); err != nil {
		t.Errorf("the tool's own Wait failed (the reaper took it?): %v", err)
	}
}
