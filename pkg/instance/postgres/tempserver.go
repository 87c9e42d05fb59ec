package postgres

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// tempServer is a server the manager runs for a moment during bootstrap,
// outside its supervision loop.
type tempServer struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// ctx ends when the server exits, so waits on it give up at once.
	ctx    context.Context
	cancel context.CancelFunc
}

func startAndWait(cmd *exec.Cmd) (*tempServer, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	t := &tempServer{cmd: cmd, done: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	go func() {
		t.err = cmd.Wait()
		t.cancel()
		close(t.done)
	}()
	return t, nil
}

// stop shuts the server down fast and cleanly; it may be called twice.
func (t *tempServer) stop() error {
	select {
	case <-t.done:
		return t.err
	default:
	}
	_ = t.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-t.done:
		return t.err
	case <-time.After(2 * time.Minute):
		_ = t.cmd.Process.Kill()
		<-t.done
		return errors.New("temporary server did not stop; killed")
	}
}
