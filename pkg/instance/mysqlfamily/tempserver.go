package mysqlfamily

import (
	"context"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// WithTempServer starts cmd, a server on a scratch data directory without
// networking, waits until open's admin connection answers, runs f on it
// and stops the server cleanly (SIGTERM): the bootstrap's user creation
// and MySQL's CLONE run this way, outside the manager's supervision.
func WithTempServer(ctx context.Context, cmd *exec.Cmd, open func() (Conn, error), f func(context.Context, Conn) error) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	// wctx ends when the server exits, so the wait gives up at once.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		cancel()
		close(done)
	}()
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
			return waitErr
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("temporary server did not stop: %v", waitErr)
		}
	}
	c, err := open()
	if err != nil {
		_ = stop()
		return err
	}
	defer c.Close()
	if err := instance.PollUntil(wctx, 100*time.Millisecond, func() error { return c.Ping(wctx) }); err != nil {
		_ = stop()
		return err
	}
	if err := f(ctx, c); err != nil {
		_ = stop()
		return err
	}
	c.Close()
	return stop()
}
