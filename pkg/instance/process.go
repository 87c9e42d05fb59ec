package instance

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// child is the engine's server process under supervision.
type child struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{} // closed when the process exited
	err     error         // cmd.Wait's result, set before done closes
	// stoppedFor says why the manager stopped a server it had started,
	// for its exit's reason (loop goroutine only).
	stoppedFor string
}

func startChild(cmd *exec.Cmd) (*child, error) {
	// The engine leads its own process group: a terminal's ^C reaches only
	// the manager, which stops the engine its own way, and the engine's
	// orphans are told from the manager's tools by their group (reaper.go).
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, started: time.Now(), done: make(chan struct{})}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) signal(sig syscall.Signal) {
	_ = c.cmd.Process.Signal(sig)
}

// stop sends sig and waits up to timeout for the process to exit, then
// kills it. It reports whether the process exited on its own with status 0.
func (c *child) stop(sig syscall.Signal, timeout time.Duration) (clean bool) {
	c.signal(sig)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return c.err == nil
	case <-t.C:
		_ = c.cmd.Process.Kill()
		<-c.done
		return false
	}
}

// exitReason describes how the process ended, for the status.
func (c *child) exitReason() string {
	if c.stoppedFor != "" {
		return "stopped: " + c.stoppedFor
	}
	if c.err == nil {
		return "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return c.err.Error()
}

// backoff is the wait before the n-th consecutive restart: 1s doubling up
// to 30s, so a crash loop does not spin but a single crash is fixed fast.
func backoff(n int) time.Duration {
	if n <= 1 {
		return time.Second
	}
	d := time.Second << min(n-1, 5)
	return min(d, 30*time.Second)
}
