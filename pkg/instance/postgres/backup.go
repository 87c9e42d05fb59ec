package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/datatar"
)

// BackupFormat is a pg_basebackup of the whole data directory as one tar
// stream, with the WAL it needs inside (-X fetch) and its backup_manifest.
const BackupFormat = "pg_basebackup-tar"

var _ instance.Backuper = (*Driver)(nil)

// BackupFormat implements instance.Backuper.
func (d *Driver) BackupFormat() string { return BackupFormat }

var (
	walStartRE = regexp.MustCompile(`write-ahead log start point: [0-9A-F]+/[0-9A-F]+ on timeline (\d+)`)
	walEndRE   = regexp.MustCompile(`write-ahead log end point: ([0-9A-F]+/[0-9A-F]+)`)
)

// Backup implements instance.Backuper: pg_basebackup over the socket as the
// superuser, to w as one tar. A base backup is consistent by construction
// (the WAL from its start to its end comes along), and works on a standby
// as on the primary.
func (d *Driver) Backup(ctx context.Context, w io.Writer) (api.Position, error) {
	var log bytes.Buffer
	cmd := d.cfg.Tool(ctx, "pg_basebackup", "--pgdata=-", "--format=tar", "--wal-method=fetch",
		"--checkpoint=fast", "--verbose", "--no-password",
		"--host="+d.cfg.RunDir, fmt.Sprintf("--port=%d", d.cfg.Port), "--username="+superuser)
	cmd.Stdout = w
	cmd.Stderr = io.MultiWriter(d.cfg.Stderr, &instance.LimitedBuffer{B: &log, Max: 64 << 10})
	if err := cmd.Run(); err != nil {
		return api.Position{}, fmt.Errorf("pg_basebackup: %w: %s", err, lastLine(log.String()))
	}
	var pos api.Position
	if m := walEndRE.FindStringSubmatch(log.String()); m != nil {
		pos.LSN = m[1]
	}
	if m := walStartRE.FindStringSubmatch(log.String()); m != nil {
		tl, _ := strconv.ParseUint(m[1], 10, 32)
		pos.Timeline = uint32(tl)
	}
	return pos, nil
}

// restoreDir is where a restore unpacks before the rename.
func (d *Driver) restoreDir() string { return d.DataDir() + ".restore" }

// DiscardRestore implements instance.Backuper.
func (d *Driver) DiscardRestore() error { return os.RemoveAll(d.restoreDir()) }

// Restore implements instance.Backuper: the tar unpacked into a scratch
// directory, checked against its manifest, recovered to consistency by a
// server on the socket only, given this instance's passwords and
// authentication rules, then marked complete and renamed into place.
func (d *Driver) Restore(ctx context.Context, r io.Reader, verify func() error) error {
	return d.restore(ctx, r, verify, nil)
}

// RestoreTo implements instance.WALArchiver: Restore, and before the
// server that adopts the credentials takes a connection it replays the
// archive to target (recovery.signal, restore_command through the
// manager, recovery_target_*) and promotes itself onto a new timeline. A
// target the archive does not reach stops that server ("recovery ended
// before configured recovery target was reached"): the restore fails and
// leaves no data rather than ending elsewhere.
func (d *Driver) RestoreTo(ctx context.Context, r io.Reader, verify func() error, target api.RecoveryTarget) error {
	if d.cfg.RestoreCommand == "" {
		return errors.New("no restore command: the manager has no local socket")
	}
	return d.restore(ctx, r, verify, &target)
}

// recoverySettings are the settings that replay the archive to target;
// with target nil, the ones that clear them.
func (d *Driver) recoverySettings(target *api.RecoveryTarget) map[string]string {
	s := map[string]string{"restore_command": "", "recovery_target_time": "", "recovery_target_lsn": "",
		"recovery_target_inclusive": "", "recovery_target_action": "", "recovery_target_timeline": ""}
	if target == nil {
		return s
	}
	s["restore_command"] = d.cfg.RestoreCommand
	s["recovery_target_timeline"] = "latest"
	if target.Latest {
		return s
	}
	s["recovery_target_action"] = "promote"
	s["recovery_target_inclusive"] = "on"
	switch {
	case target.Time != nil:
		s["recovery_target_time"] = target.Time.UTC().Format("2006-01-02 15:04:05.999999-07")
	case target.LSN != "":
		s["recovery_target_lsn"] = target.LSN
	}
	return s
}

func (d *Driver) restore(ctx context.Context, r io.Reader, verify func() error, target *api.RecoveryTarget) (err error) {
	if has, err := d.HasData(); err != nil || has {
		return errors.Join(err, errors.New("the instance already has data"))
	}
	app, err := d.appUser()
	if err != nil {
		return err
	}
	tmp := d.restoreDir()
	if err := instance.UnpackVerified(tmp, 0o700, r, datatar.Extract, verify); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if _, err := os.Stat(filepath.Join(tmp, "backup_manifest")); err == nil {
		if err := d.cfg.Tool(ctx, "pg_verifybackup", "--quiet", tmp).Run(); err != nil {
			return fmt.Errorf("pg_verifybackup: %w", err)
		}
	}
	// A backup of a standby is of a standby: the restored data starts as
	// a primary of its own, following nobody.
	for _, name := range []string{"standby.signal", "recovery.signal", "postmaster.pid"} {
		if err := os.Remove(filepath.Join(tmp, name)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := d.setAutoConf(tmp, map[string]string{"primary_conninfo": "", "primary_slot_name": ""}); err != nil {
		return err
	}
	if err := writeAuthConfig(tmp, d.cfg.TLSEnabled(), d.cfg.RequireClientTLS); err != nil {
		return err
	}
	if target != nil {
		if err := os.WriteFile(filepath.Join(tmp, "recovery.signal"), nil, 0o600); err != nil {
			return err
		}
		if err := d.setAutoConf(tmp, d.recoverySettings(target)); err != nil {
			return err
		}
	}
	if err := d.adoptCredentials(ctx, tmp, app, target != nil); err != nil {
		return err
	}
	if target != nil {
		// Replayed and promoted: the next start is a plain one.
		if err := d.setAutoConf(tmp, d.recoverySettings(nil)); err != nil {
			return err
		}
	}
	return d.commitDataDir(tmp)
}

// adoptCredentials runs a server on the socket only in dataDir, which
// recovers the backup to its end point before it takes connections, and
// sets the passwords of this instance's Secret: the source's stop working.
func (d *Driver) adoptCredentials(ctx context.Context, dataDir string, app appCredentials, replay bool) error {
	superPassword, err := d.cfg.Secrets.Get(instance.SecretSuperuserPassword)
	if err != nil {
		return err
	}
	replPassword, err := d.cfg.Secrets.Get(instance.SecretReplicationPassword)
	if err != nil {
		return err
	}
	server := d.cfg.Tool(context.Background(), "postgres", d.serverArgs(dataDir, "")...)
	fatal := &fatalLines{}
	server.Stderr = io.MultiWriter(d.cfg.Stderr, fatal)
	c, err := startAndWait(server)
	if err != nil {
		return err
	}
	defer c.stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-c.ctx.Done()
		cancel()
	}()
	stopped := func(err error) error {
		if c.ctx.Err() != nil {
			if line := fatal.last(); line != "" {
				return fmt.Errorf("the server stopped: %s", line)
			}
			return fmt.Errorf("the server stopped: %v", c.err)
		}
		return err
	}
	conn, err := d.waitConn(wctx)
	if err != nil {
		return fmt.Errorf("recover the backup: %w", stopped(err))
	}
	defer conn.Close(context.Background())
	if replay {
		// Replaying the archive takes as long as it takes; the server
		// stops on its own when the target is out of reach.
		err := instance.PollUntil(wctx, 200*time.Millisecond, func() error {
			var inRecovery bool
			if err := conn.QueryRow(wctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
				return err
			}
			if inRecovery {
				return errors.New("still replaying the archive")
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("replay the archive: %w", stopped(err))
		}
	}
	var dbOwner string
	err = conn.QueryRow(ctx, "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", app.database).Scan(&dbOwner)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("the backup has no database %q: a restored database keeps the source's database and user names", app.database)
	}
	if err != nil {
		return err
	}
	if dbOwner != app.user {
		return fmt.Errorf("the backup's database %q belongs to %q, not %q: a restored database keeps the source's database and user names", app.database, dbOwner, app.user)
	}
	for user, password := range map[string]string{app.user: app.password, superuser: superPassword, api.ReplicationUser: replPassword} {
		verifier, err := scramVerifier(password)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", pgx.Identifier{user}.Sanitize(), quoteLiteral(verifier))); err != nil {
			return fmt.Errorf("restore the password of %s: %w", user, err)
		}
	}
	// Slots would keep WAL for replicas of the source, which are not ours.
	if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"); err != nil {
		return err
	}
	conn.Close(ctx)
	return c.stop()
}

// fatalLines keeps the last FATAL or PANIC line a server wrote, a server
// process's first.
type fatalLines struct {
	mu      sync.Mutex
	partial []byte
	// line is the last FATAL or PANIC line; server the last of a server
	// process (the startup process saying why recovery ended), which
	// log_line_prefix writes without a session's user@database: a
	// client's refused connection (the manager waiting for the server)
	// may log its own FATAL after it, and is not why the server stopped.
	line, server string
}

func (f *fatalLines) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partial = append(f.partial, p...)
	for {
		i := bytes.IndexByte(f.partial, '\n')
		if i < 0 {
			break
		}
		line := string(f.partial[:i])
		f.partial = f.partial[i+1:]
		for _, level := range []string{"FATAL:", "PANIC:"} {
			if before, _, ok := strings.Cut(line, level); ok {
				f.line = strings.TrimSpace(line)
				if !strings.Contains(before, "@") {
					f.server = f.line
				}
				break
			}
		}
	}
	if len(f.partial) > 64<<10 {
		f.partial = f.partial[:0]
	}
	return len(p), nil
}

func (f *fatalLines) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.server != "" {
		return f.server
	}
	return f.line
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
