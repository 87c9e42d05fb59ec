package mysql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Point-in-time recovery: the manager archives the binary logs
// (instance.BinlogArchiver, on mysqlfamily.Server); a restore to a point
// unpacks the backup, starts a server on it with GTIDs on, and pipes each
// archived file after the data's gtid_executed through mysqlbinlog into
// it, up to the first transaction that committed after the target.
//
// The semantics are exact to the microsecond: every GTID event records
// when its transaction committed on its original source, so a restore to
// T holds every transaction committed at or before T and none after.

var _ instance.BinlogArchiver = (*Driver)(nil)

// replay is what a restore to a point replays after the backup.
type replay struct {
	target api.RecoveryTarget
	fetch  instance.FetchBinlogs
}

// RestoreToBinlogs implements instance.BinlogArchiver. The restored
// server keeps the source's GTID history (as a plain restore does) and
// adds its own under a server_uuid of its own.
func (d *Driver) RestoreToBinlogs(ctx context.Context, r io.Reader, verify func() error, target api.RecoveryTarget, fetch instance.FetchBinlogs) error {
	if target.LSN != "" {
		return errors.New("a MySQL restore goes to a time, a GTID or the latest, not an LSN")
	}
	return d.restore(ctx, r, verify, &replay{target: target, fetch: fetch})
}

func (d *Driver) replayDir() string { return d.DataDir + ".replay" }

// replayServerArgs turn GTIDs on in the server a restore replays into:
// mysqlbinlog's SQL sets each transaction's GTID (GTID_NEXT), which needs
// them, and the server then skips a transaction its data already holds.
// Commits are not flushed one by one: the server's clean stop at the end
// makes the data durable, and a restore that crashes starts again from
// the backup (a flush per commit replays about 1,000 rows a second here).
func replayServerArgs(args []string) []string {
	return append(args, "--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--innodb-flush-log-at-trx-commit=2")
}

// dataPosition is the GTID set the restored data holds.
func dataPosition(ctx context.Context, c mysqlfamily.Conn) (binlog.Position, error) {
	row, err := c.QueryRow(ctx, "SELECT @@GLOBAL.gtid_executed AS gtid")
	if err != nil {
		return nil, err
	}
	p, err := binlog.ParsePosition(row["gtid"])
	if err != nil {
		return nil, fmt.Errorf("the backup's gtid_executed: %w", err)
	}
	return p, nil
}

// replayArgs are mysqlbinlog's arguments to replay file after applied,
// stopping before the event at stop (none when stop is negative).
func replayArgs(file string, applied binlog.Position, stop int64) []string {
	args := []string{"--no-defaults"}
	if len(applied) > 0 {
		// A file may begin before what is applied (the backup's set is
		// inside it, or a promoted replica's file repeats its source's).
		args = append(args, "--exclude-gtids="+applied.String())
	}
	if stop >= 0 {
		args = append(args, "--stop-position="+strconv.FormatInt(stop, 10))
	}
	return append(args, file)
}

// stopOffset is where the replay of file, which ends at end, stops for
// target: at the first transaction committed after a time, right after a
// GTID's transaction, or -1 to replay the whole file.
func stopOffset(file string, end binlog.Position, target api.RecoveryTarget) (int64, error) {
	if target.Time == nil && !instance.HoldsTarget(end, target) {
		return -1, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if target.Time != nil {
		return binlog.FirstCommitAfter(f, *target.Time)
	}
	g, err := binlog.ParseGTID(target.GTID)
	if err != nil {
		return 0, err
	}
	return binlog.EndOfTransaction(f, g)
}

// replayBinlogs pipes each file through mysqlbinlog into the server on the
// restored data, which listens on the socket only, until the target.
func (d *Driver) replayBinlogs(ctx context.Context, files []instance.ReplayFile, base binlog.Position, target api.RecoveryTarget) error {
	return instance.ReplayEach(ctx, d.cfg.Log, files, base, func(local string, f instance.ReplayFile, applied binlog.Position) (bool, error) {
		stop, err := stopOffset(local, f.Summary.End, target)
		if err != nil {
			return false, err
		}
		read := d.cfg.Tool(ctx, "mysqlbinlog", replayArgs(local, applied, stop)...)
		apply := d.cfg.Tool(ctx, "mysql", "--no-defaults", "--socket="+socketPath(d.cfg), "--user=root", "--binary-mode", "--batch")
		// The target is in this file when the replay stops in it.
		return stop >= 0 || instance.HoldsTarget(f.Summary.End, target), mysqlfamily.Replay(read, apply, local)
	})
}

// replayWork is the temporary server's work in a restore to a point:
// read the data's position, choose the files, set the credentials, replay
// and set them again (the binary logs may have changed them).
func (d *Driver) replayWork(to *replay, credentials func(context.Context, mysqlfamily.Conn) error) func(context.Context, mysqlfamily.Conn) error {
	return func(ctx context.Context, c mysqlfamily.Conn) error {
		base, err := dataPosition(ctx, c)
		if err != nil {
			return err
		}
		files, err := to.fetch.Into(ctx, base, d.replayDir())
		if err != nil {
			return err
		}
		if err := credentials(ctx, c); err != nil {
			return err
		}
		if err := d.replayBinlogs(ctx, files, base, to.target); err != nil {
			return err
		}
		return credentials(ctx, c)
	}
}
