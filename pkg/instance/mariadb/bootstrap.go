package mariadb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Bootstrap implements instance.Engine: mariadb-install-db into a scratch
// directory (admin access for the manager's OS user by unix_socket only),
// the users, a new system identifier and the completion marker, then a
// rename into place.
func (e *Engine) Bootstrap(ctx context.Context) error {
	if has, err := e.HasData(); err != nil || has {
		return err
	}
	app, err := e.appUser()
	if err != nil {
		return err
	}
	replPassword, err := e.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	u, err := user.Current()
	if err != nil {
		return err
	}
	tmp := e.DataDir() + ".bootstrap"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	err = e.cfg.Tool(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+tmp,
		"--auth-root-authentication-method=socket", "--auth-root-socket-user="+u.Username,
		"--skip-test-db", "--skip-name-resolve").Run()
	if err != nil {
		return fmt.Errorf("mariadb-install-db: %w", err)
	}
	if err := e.createUsers(ctx, tmp, app, replPassword); err != nil {
		return err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, systemIDFile), []byte(hex.EncodeToString(id)+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, completeMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o600); err != nil {
		return err
	}
	return instance.ReplaceDir(tmp, e.DataDir())
}

func (e *Engine) appUser() (mysqlfamily.App, error) {
	var a mysqlfamily.App
	var err error
	if a.User, err = e.cfg.Secrets.Get(instance.SecretUsername); err != nil {
		return a, err
	}
	if a.Password, err = e.cfg.Secrets.Get(instance.SecretPassword); err != nil {
		return a, err
	}
	if a.Database, err = e.cfg.Secrets.Get(instance.SecretDatabase); err != nil {
		return a, err
	}
	switch a.User {
	case "root", "mysql", "mariadb.sys", instance.ReplicationUser:
		return a, fmt.Errorf("the application user may not be %q", a.User)
	}
	return a, nil
}

// createUsers runs a server without networking in dataDir and creates the
// application's database and user and the replication user.
func (e *Engine) createUsers(ctx context.Context, dataDir string, app mysqlfamily.App, replPassword string) error {
	cmd := e.cfg.Tool(context.Background(), "mariadbd", append(e.serverArgs(dataDir), "--skip-networking")...)
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
			return fmt.Errorf("bootstrap server did not stop: %v", waitErr)
		}
	}

	db, err := mysqlfamily.OpenAdmin(e.socket())
	if err != nil {
		_ = stop()
		return err
	}
	defer db.Close()
	if err := instance.PollUntil(wctx, 100*time.Millisecond, func() error { return db.PingContext(wctx) }); err != nil {
		_ = stop()
		return err
	}
	if err := mysqlfamily.Exec(ctx, db, e.dialect.UserStatements(app, replPassword)...); err != nil {
		_ = stop()
		return fmt.Errorf("bootstrap users: %w", err)
	}
	db.Close()
	return stop()
}
