package mysql

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/datatar"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// BackupFormat is a copy the CLONE plugin made of the data directory
// (CLONE LOCAL), as one tar stream.
const BackupFormat = "mysql-clone-tar"

var _ instance.Backuper = (*Driver)(nil)

// BackupFormat implements instance.Backuper.
func (d *Driver) BackupFormat() string { return BackupFormat }

// backupDir is where CLONE LOCAL writes the copy a backup streams.
func (d *Driver) backupDir() string { return d.DataDir + ".backup" }

// Backup implements instance.Backuper with the plugin replicas clone with:
// CLONE LOCAL DATA DIRECTORY has the running server, a primary or a
// replica, write a copy of its data beside it, consistent at one point
// (InnoDB's, which holds the system tables and every table the
// application user makes: CLONE copies no other storage engine's), which
// is then streamed as one tar and removed. The copy needs as much free
// space on the volume as the data has, for the length of the backup.
func (d *Driver) Backup(ctx context.Context, w io.Writer) (api.Position, error) {
	dir := d.backupDir()
	if err := os.RemoveAll(dir); err != nil {
		return api.Position{}, err
	}
	defer os.RemoveAll(dir)
	c, err := d.openBackup()
	if err != nil {
		return api.Position{}, err
	}
	defer c.Close()
	// A local clone records no position of its own (clone_status has no
	// GTIDs for it): what had committed before it began is in the copy,
	// so that is the position the backup is known to hold. A transaction
	// committed while it ran may be in it too.
	row, err := c.QueryRow(ctx, "SELECT @@global.gtid_executed AS gtid")
	if err != nil {
		return api.Position{}, err
	}
	if err := c.Exec(ctx, CloneLocalStatement(dir)); err != nil {
		return api.Position{}, fmt.Errorf("CLONE LOCAL: %w", err)
	}
	if err := datatar.Write(w, dir); err != nil {
		return api.Position{}, fmt.Errorf("streaming the copy: %w", err)
	}
	// gtid_executed's text breaks the line after each member's comma.
	return api.Position{GTID: strings.Join(strings.Fields(row["gtid"]), "")}, nil
}

// openBackup is an admin connection of the backup's own, whose statement
// may take as long as the copy does: the shared one bounds each read.
func (d *Driver) openBackup() (mysqlfamily.Conn, error) {
	return mysqlfamily.OpenAdminFor(socketPath(d.cfg), "root", 0)
}

// CloneLocalStatement copies the server's data into dir, which must not
// exist (its parent must, writable by mysqld).
func CloneLocalStatement(dir string) string {
	return "CLONE LOCAL DATA DIRECTORY = " + mysqlfamily.QuoteString(dir)
}

// restoreDir is where a restore unpacks before the rename.
func (d *Driver) restoreDir() string { return d.DataDir + ".restore" }

// DiscardRestore implements instance.Backuper.
func (d *Driver) DiscardRestore() error { return os.RemoveAll(d.restoreDir()) }

// Restore implements instance.Backuper: the tar unpacked into a scratch
// directory and verified, then a server without networking or grant
// checks (the source's root admits the source's OS user only) loads the
// grant tables and gives root to this manager's OS user and the Secret's
// passwords to the application and replication users, and forgets any
// source the copy replicated from; then a new system identifier, the
// completion marker and the rename into place. The copy's InnoDB redo is
// applied by that first start. The GTID history stays the source's: the
// restored server (with a server_uuid of its own) goes on from it.
func (d *Driver) Restore(ctx context.Context, r io.Reader, verify func() error) error {
	return d.restore(ctx, r, verify, nil)
}

// restore is Restore, then the replay of to when it is not nil.
func (d *Driver) restore(ctx context.Context, r io.Reader, verify func() error, to *replay) (err error) {
	if has, err := d.HasData(); err != nil || has {
		return errors.Join(err, errors.New("the instance already has data"))
	}
	stmts, err := d.restoreStatements()
	if err != nil {
		return err
	}
	tmp := d.restoreDir()
	if err := instance.UnpackVerified(tmp, 0o750, r, datatar.Extract, verify); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	args := append(tempArgs(d.cfg, tmp), "--skip-grant-tables")
	credentials := mysqlfamily.Statements("the restored database's credentials (it keeps the source's user and database names)", stmts...)
	work := credentials
	if to != nil {
		// The files go beside the data (never in it), and go once the
		// restore ends either way.
		defer os.RemoveAll(d.replayDir())
		args, work = replayServerArgs(args), d.replayWork(to, credentials)
	}
	if err := d.tools.Serve(ctx, args, work); err != nil {
		return err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	return d.Complete(tmp, hex.EncodeToString(id), nil)
}

// restoreStatements load the grant tables (skipped at start) and make the
// restored users this instance's: root by auth_socket for the manager's
// OS user, the Secret's passwords; the USE fails (1049) when the backup
// lacks the Secret's database.
func (d *Driver) restoreStatements() ([]string, error) {
	if d.osUser == "" {
		return nil, errors.New("the manager's OS user is unknown")
	}
	app, repl, err := d.Credentials()
	if err != nil {
		return nil, err
	}
	stmts := append([]string{"FLUSH PRIVILEGES"}, AdminUserStatements(d.osUser)...)
	return append(stmts,
		fmt.Sprintf("ALTER USER %s IDENTIFIED WITH caching_sha2_password BY %s", mysqlfamily.Account(app.User, "%"), mysqlfamily.QuoteString(app.Password)),
		fmt.Sprintf("ALTER USER %s IDENTIFIED WITH caching_sha2_password BY %s", mysqlfamily.Account(api.ReplicationUser, "%"), mysqlfamily.QuoteString(repl)),
		adminInterfaceGrant,
		"USE "+mysqlfamily.QuoteIdent(app.Database),
		"RESET REPLICA ALL",
	), nil
}
