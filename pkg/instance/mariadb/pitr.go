package mariadb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Point-in-time recovery: the manager archives the binary logs
// (instance.BinlogArchiver); a restore to a point prepares the backup,
// then pipes each archived file after the backup's GTID position through
// mariadb-binlog into a server on the restored data, up to the target.

var _ instance.BinlogArchiver = (*Driver)(nil)

// RestoreToBinlogs implements instance.BinlogArchiver. The restored
// database starts a GTID history of its own: its binary log begins empty,
// and nothing of the source's replication is kept.
func (d *Driver) RestoreToBinlogs(ctx context.Context, r io.Reader, verify func() error, target api.RecoveryTarget, fetch instance.FetchBinlogs) error {
	if target.LSN != "" {
		return errors.New("a MariaDB restore goes to a time, a GTID or the latest, not an LSN")
	}
	return d.restore(ctx, r, verify, &replay{target: target, fetch: fetch})
}

func (d *Driver) replayDir() string { return d.DataDir + ".replay" }

// backupPosition is the GTID position of the restored data in dir, on the
// server c reaches: the backup's binary log position, raised in each
// domain by the replica position its data records (gtid_slave_pos), so a
// position mariadb-backup left short of what a replica's data holds does
// not make the replay apply a transaction twice.
func (d *Driver) backupPosition(ctx context.Context, c mysqlfamily.Conn, dir string) (binlog.Position, error) {
	gtid, err := backupGTID(dir)
	if err != nil {
		return nil, err
	}
	base, err := binlog.ParsePosition(gtid)
	if err != nil {
		return nil, fmt.Errorf("the backup's GTID position: %w", err)
	}
	row, err := c.QueryRow(ctx, "SELECT @@GLOBAL.gtid_slave_pos AS pos")
	if err != nil {
		return nil, err
	}
	replica, err := binlog.ParsePosition(row["pos"])
	if err != nil {
		return nil, fmt.Errorf("the backup's replica position: %w", err)
	}
	for _, g := range replica {
		base = base.With(g)
	}
	return base, nil
}

// stopDatetime is mariadb-binlog's --stop-datetime for target: the
// replay stops at the first event of the target's second. The binary log
// keeps whole seconds (when a transaction's statement began), so this
// replays every transaction of an earlier second and nothing that may
// have committed after the target; a transaction of the target's own
// second is not replayed, even one that committed before the target.
// The API's times are whole seconds: a restore to 14:07:05 ends with what
// was committed before 14:07:05.
func stopDatetime(target time.Time) string {
	return target.UTC().Truncate(time.Second).Format(time.DateTime)
}

// replayArgs are mariadb-binlog's arguments to replay file, which s
// summarizes, after applied. A GTID target stops the replay after its
// transaction (mariadb-binlog's GTID --stop-position is inclusive).
func replayArgs(file string, s binlog.Summary, applied binlog.Position, target api.RecoveryTarget) []string {
	args := []string{"--no-defaults"}
	if len(applied) > 0 && !s.Begin().Covers(applied) {
		// The file begins before what is applied (the backup's
		// position is inside it): events up to the position are
		// skipped. Only then: with a --start-position, a
		// --stop-datetime at or before the file's first event (a file
		// the server opened in the target's second) fails with "never
		// reached expected GTID state" instead of replaying nothing.
		args = append(args, "--start-position="+applied.String())
	}
	if target.Time != nil {
		args = append(args, "--stop-datetime="+stopDatetime(*target.Time))
	}
	if instance.HoldsTarget(s.End, target) {
		args = append(args, "--stop-position="+target.GTID)
	}
	return append(args, file)
}

// replayBinlogs pipes each file through mariadb-binlog into the server on
// the restored data, which listens on the socket only.
func (d *Driver) replayBinlogs(ctx context.Context, files []instance.ReplayFile, base binlog.Position, target api.RecoveryTarget) error {
	u, err := user.Current()
	if err != nil {
		return err
	}
	return instance.ReplayEach(ctx, d.cfg.Log, files, base, func(local string, f instance.ReplayFile, applied binlog.Position) (bool, error) {
		return instance.HoldsTarget(f.Summary.End, target), d.replayFile(ctx, u.Username, local, f.Summary, applied, target)
	})
}

func (d *Driver) replayFile(ctx context.Context, username, file string, s binlog.Summary, applied binlog.Position, target api.RecoveryTarget) error {
	read := d.cfg.Tool(ctx, "mariadb-binlog", replayArgs(file, s, applied, target)...)
	// --stop-datetime is read in the tool's time zone.
	read.Env = append(read.Env, "TZ=UTC")
	// --skip-ssl: MariaDB 11's client verifies a certificate even on the
	// socket, and this server has none.
	apply := d.cfg.Tool(ctx, "mariadb", "--no-defaults", "--socket="+d.socket(), "--user="+username, "--skip-ssl", "--binary-mode", "--batch")
	return mysqlfamily.Replay(read, apply, file)
}
