// Package instanceproc runs mydb-instance as a process for the test suites
// that play a kubelet: the e2e rig runs each pod's instance manager and
// dump server with the pod's own arguments, the engine suite its instances
// and dump servers with arguments of its own. Both start, stop, kill and
// freeze them the same way, here.
package instanceproc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options say how to run one process.
type Options struct {
	// Binary is mydb-instance's path; Args its arguments.
	Binary string
	Args   []string
	// Env is its environment (nil: the test's own); Dir its working
	// directory ("": the test's).
	Env []string
	Dir string
	// UID and GID it runs as, as an engine's user would (both 0: as the
	// test).
	UID, GID int
	// Chroot, when set, is the root filesystem it runs in (an engine
	// image's, for an engine this machine does not package).
	Chroot string
	// Log is the file its output is appended to.
	Log string
}

// Process is one running mydb-instance, the leader of a process group of
// its own (the engine it starts leads another).
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts the process. Should the test binary die without its
// cleanups, the process gets SIGTERM, so a manager still stops its engine.
func Start(o Options) (*Process, error) {
	logf, err := os.OpenFile(o.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.Binary, o.Args...)
	cmd.Env, cmd.Dir = o.Env, o.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Chroot: o.Chroot}
	if o.UID != 0 || o.GID != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(o.UID), Gid: uint32(o.GID)}
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's pid (and its group's).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running tells whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitCode is the exit code of a process that has exited (-1 when a
// signal ended it).
func (p *Process) ExitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process alone.
func (p *Process) Signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// SignalGroup sends sig to the process's group: the manager and whatever it
// runs that did not leave the group.
func (p *Process) SignalGroup(sig syscall.Signal) { _ = syscall.Kill(-p.Pid(), sig) }

// Stop sends SIGTERM and waits for the exit; when there is none within
// timeout, it kills the group and says so (false). It returns how long the
// process took.
func (p *Process) Stop(timeout time.Duration) (time.Duration, bool) {
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return time.Since(start), true
	case <-time.After(timeout):
		p.SignalGroup(syscall.SIGKILL)
		<-p.done
		return time.Since(start), false
	}
}

// SignalEngine sends sig to each of pids and to its process group, in
// that order: an engine's processes, found (ChildPIDs) before anything is
// signalled, since PostgreSQL's backends and walsenders lead process groups
// of their own, and a backend of a killed primary left alive could still
// acknowledge a commit.
func SignalEngine(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(-pid, sig)
		_ = syscall.Kill(pid, sig)
	}
}

// ChildPIDs are the processes whose parent is pid, from /proc.
func ChildPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ")".
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}
