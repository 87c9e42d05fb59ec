package instanceproc

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A shell stands in for mydb-instance: it starts a child, logs, and obeys
// the signals the suites send.
func TestStartSignalStop(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "p.log")
	p, err := Start(Options{Binary: "/bin/sh", Args: []string{"-c", `echo started; sleep 30 & trap 'echo term; kill $!; exit 3' TERM; wait`},
		Log: log, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var children []int
	for time.Now().Before(deadline) && len(children) == 0 {
		children = ChildPIDs(p.Pid())
		time.Sleep(10 * time.Millisecond)
	}
	if len(children) != 1 || !p.Running() {
		t.Fatalf("children %v, running %v", children, p.Running())
	}
	// Frozen, the process does not run its trap; thawed, it does.
	SignalEngine([]int{p.Pid()}, syscall.SIGSTOP)
	took, ok := p.Stop(300 * time.Millisecond)
	if ok || p.Running() {
		t.Fatalf("a frozen process stopped (%v) or still runs after its group was killed", ok)
	}
	if took < 300*time.Millisecond {
		t.Errorf("Stop gave up after %s, before its timeout", took)
	}
	if code := p.ExitCode(); code != -1 {
		t.Errorf("exit code %d, want -1 (killed)", code)
	}

	q, err := Start(Options{Binary: "/bin/sh", Args: []string{"-c", `trap 'echo term; exit 3' TERM; echo started; while :; do sleep 0.05; done`}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(deadline) {
		if data, _ := os.ReadFile(log); strings.Count(string(data), "started") == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := q.Stop(10 * time.Second); !ok || q.ExitCode() != 3 {
		t.Fatalf("SIGTERM: stopped %v, exit code %d, want 3", ok, q.ExitCode())
	}
	data, _ := os.ReadFile(log)
	if lines := strings.Fields(string(data)); !slices.Equal(lines, []string{"started", "started", "term"}) {
		t.Errorf("log %q", lines)
	}
}
