package mariadb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// BackupFormat is mariadb-backup's physical backup as one mbstream
// (xbstream) stream, unprepared.
const BackupFormat = "mariadb-backup-xbstream"

var _ instance.Backuper = (*Driver)(nil)

// BackupFormat implements instance.Backuper.
func (d *Driver) BackupFormat() string { return BackupFormat }

// Backup implements instance.Backuper with the stream replicas clone from:
// mariadb-backup copies InnoDB with its redo log and takes BACKUP STAGE
// locks for the rest, so the backup is consistent at one GTID position, on
// a replica as on the primary.
func (d *Driver) Backup(ctx context.Context, w io.Writer) (api.Position, error) {
	gtid, err := d.streamBackup(ctx, w)
	return api.Position{GTID: gtid}, err
}

func (d *Driver) restoreDir() string { return d.DataDir + ".restore" }

// DiscardRestore implements instance.Backuper.
func (d *Driver) DiscardRestore() error { return os.RemoveAll(d.restoreDir()) }

// Restore implements instance.Backuper: the stream unpacked into a scratch
// directory, prepared (the redo log applied: the data is consistent), given
// this instance's passwords by a server without networking, then a new
// system identifier, the completion marker and the rename into place.
func (d *Driver) Restore(ctx context.Context, r io.Reader, verify func() error) error {
	return d.restore(ctx, r, verify, nil)
}

// replay is what a restore to a point replays after the backup.
type replay struct {
	target api.RecoveryTarget
	fetch  instance.FetchBinlogs
}

func (d *Driver) restore(ctx context.Context, r io.Reader, verify func() error, to *replay) (err error) {
	if has, err := d.HasData(); err != nil || has {
		return errors.Join(err, errors.New("the instance already has data"))
	}
	users, err := d.credentialStatements()
	if err != nil {
		return err
	}
	tmp := d.restoreDir()
	mbstream := func(r io.Reader, dir string) error {
		x := d.cfg.Tool(ctx, "mbstream", "-x", "-C", dir)
		x.Stdin = r
		if err := x.Run(); err != nil {
			return fmt.Errorf("mbstream: %w", err)
		}
		return nil
	}
	if err := instance.UnpackVerified(tmp, 0o750, r, mbstream, verify); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := d.cfg.Tool(ctx, "mariadb-backup", "--no-defaults", "--prepare", "--target-dir="+tmp).Run(); err != nil {
		return fmt.Errorf("mariadb-backup --prepare: %w", err)
	}
	credentials := mysqlfamily.Statements("the restored database's credentials (it keeps the source's user and database names)", users...)
	work := credentials
	if to != nil {
		// The files go beside the data (never in it), and go once the
		// restore ends either way.
		defer os.RemoveAll(d.replayDir())
		work = func(ctx context.Context, c mysqlfamily.Conn) error {
			// Read before the credentials reset the replica position.
			base, err := d.backupPosition(ctx, c, tmp)
			if err != nil {
				return err
			}
			files, err := to.fetch.Into(ctx, base, d.replayDir())
			if err != nil {
				return err
			}
			// The credentials first: FLUSH PRIVILEGES turns the grant
			// tables on, which the replayed account statements need;
			// and again after, in case the binary logs changed them.
			if err := credentials(ctx, c); err != nil {
				return err
			}
			if err := d.replayBinlogs(ctx, files, base, to.target); err != nil {
				return err
			}
			return credentials(ctx, c)
		}
	}
	// Without the grant tables any socket client is admin, whoever ran the
	// source; FLUSH PRIVILEGES loads them for the ALTER USERs.
	server := d.cfg.Tool(context.Background(), "mariadbd", append(d.serverArgs(tmp), "--skip-networking", "--skip-grant-tables")...)
	if err := mysqlfamily.WithTempServer(ctx, server, d.openAdmin, work); err != nil {
		return err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	upgraded, err := upgradeRecordOfBackup(tmp)
	if err != nil {
		return err
	}
	return d.Complete(tmp, hex.EncodeToString(id), upgraded)
}

// credentialStatements make the Secret's passwords those of the restored
// users and forget the source's replication: the restored database is a
// new primary whose GTID history starts with its own binlog.
func (d *Driver) credentialStatements() ([]string, error) {
	app, repl, err := d.Credentials()
	if err != nil {
		return nil, err
	}
	appAccount := mysqlfamily.Account(app.User, "%")
	return []string{
		"FLUSH PRIVILEGES",
		fmt.Sprintf("ALTER USER %s IDENTIFIED BY PASSWORD %s", appAccount, mysqlfamily.QuoteString(mysqlfamily.NativePasswordHash(app.Password))),
		fmt.Sprintf("ALTER USER %s IDENTIFIED BY PASSWORD %s", mysqlfamily.Account(api.ReplicationUser, "%"), mysqlfamily.QuoteString(mysqlfamily.NativePasswordHash(repl))),
		// Fails (1049) when the backup lacks the Secret's database.
		"USE " + mysqlfamily.QuoteIdent(app.Database),
		"RESET SLAVE ALL",
		"SET GLOBAL gtid_slave_pos = ''",
	}, nil
}
