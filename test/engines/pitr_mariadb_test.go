//go:build engines

package engines

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	"github.com/mydb-dev/mydb/test/s3server"
)

// TestMariaDBPointInTimeUnderAWriter is the point-in-time issue's proof for
// MariaDB: a writer commits a row carrying its time every 10 ms for a
// minute on a primary whose manager archives the binary logs to a real S3
// server; for three targets inside that minute, a restore from a base
// backup taken before it holds exactly the rows whose binary log second is
// before the target's (count and checksum of ids and times): the binary
// log keeps whole seconds, and a restore replays nothing of the target's
// own second, which may have committed after it. While
// the writer runs, lastRecoverableTime stays within the archive timeout
// and a bound of now. A target past the archive is refused and leaves no
// data; an LSN is refused.
func TestMariaDBPointInTimeUnderAWriter(t *testing.T) {
	t.Parallel()
	const (
		archiveTimeout = 2 * time.Second
		// Beyond the archive timeout: the second the Rotate's time is
		// truncated to, the look (every second) and the upload.
		windowSlack = 5 * time.Second
		writeEvery  = 10 * time.Millisecond
		writeFor    = time.Minute
	)
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := mariadbSpec()

	p := archivingPrimary(t, spec, "pitr-mariadb", "127.0.80.", archiveTimeout)
	archive := destination(s3, "pitr/mariadb").S3
	p.setArchive(t, *archive)
	app := p.app()
	// The time is the statement's (NOW(6)), which is also what the
	// binary log records for the transaction, in whole seconds.
	mustExec(t, app, "CREATE TABLE ticks (id int PRIMARY KEY, at decimal(17,6) NOT NULL)")
	// Rows before the base backup, which the restore has from it.
	for i := 1; i <= 10; i++ {
		mustExec(t, app, fmt.Sprintf("INSERT INTO ticks (id, at) VALUES (%d, UNIX_TIMESTAMP(NOW(6)))", i))
	}
	// At least one binary log closes (and is archived) in a second before
	// the one the base begins in: the retention window's pruning below
	// deletes it (the backup's start time keeps whole seconds).
	p.waitStatus(time.Minute, "a binary log archived", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.Archived > 0 && s.Archive.LastRecoverableTime != nil
	})
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 100*time.Millisecond)))
	base := p.backup(t, "mariadb-writer-base", s3, "pitr/mariadb-base")
	written := 10

	written = writeWhileArchiving(t, p, written, writeEvery, writeFor, archiveTimeout, windowSlack, func(id int) error {
		_, err := app.Exec("INSERT INTO ticks (id, at) VALUES (?, UNIX_TIMESTAMP(NOW(6)))", id)
		return err
	})

	type row struct {
		id int
		at string // as the server wrote it: seconds.micros
	}
	readRows := func(db *sql.DB) ([]row, error) {
		rs, err := db.Query("SELECT id, at FROM ticks ORDER BY id")
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var out []row
		for rs.Next() {
			var r row
			if err := rs.Scan(&r.id, &r.at); err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, rs.Err()
	}
	second := func(r row) int64 {
		s, _, _ := strings.Cut(r.at, ".")
		var n int64
		fmt.Sscan(s, &n)
		return n
	}
	digest := func(rows []row) string {
		h := md5.New()
		for _, r := range rows {
			fmt.Fprintf(h, "%d@%s,", r.id, r.at)
		}
		return hex.EncodeToString(h.Sum(nil))
	}
	rows, err := readRows(app)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != written || rows[len(rows)-1].id != written {
		t.Fatalf("the table holds %d rows, the writer committed %d", len(rows), written)
	}

	// Three targets inside the minute, each in the middle of a second:
	// the copy must hold every row of the seconds before, none of that
	// second or after.
	type goal struct {
		target time.Time
		rows   []row
	}
	var goals []goal
	for _, frac := range []int{25, 50, 75} {
		sec := second(rows[len(rows)*frac/100])
		target := time.Unix(sec, int64(500*time.Millisecond)).UTC()
		var upTo []row
		for _, r := range rows {
			if second(r) < sec {
				upTo = append(upTo, r)
			}
		}
		if len(upTo) == len(rows) || len(upTo) <= 10 {
			t.Fatalf("target %s: %d of %d rows, want a target inside the writer's minute", target, len(upTo), len(rows))
		}
		goals = append(goals, goal{target: target, rows: upTo})
	}
	s := p.waitStatus(time.Minute, "the archive to pass the last target", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && s.Archive.LastRecoverableTime.After(goals[len(goals)-1].target)
	})
	t.Logf("%d rows written; archive: %d binary logs, recoverable to %s", written, s.Archive.Archived, s.Archive.LastRecoverableTime.Format(time.RFC3339Nano))

	// The retention window's pruning with this base: what it holds and
	// what closed before it began goes; every restore below still has
	// what it replays.
	if base.Position == nil || base.Position.GTID == "" {
		t.Fatalf("the base backup has no GTID position: %+v", base.Position)
	}
	cut := pitrwindow.Cut{GTID: base.Position.GTID, Began: base.StartTime.Truncate(time.Second)}
	deleted, err := mydatabase.S3ArchivePruner{}.PruneArchive(ctx, *archive, cut)
	if err != nil || deleted == 0 {
		t.Fatalf("pruning what the base (at %s, begun %s) holds: %d deleted, %v", cut.GTID, cut.Began.Format(time.RFC3339), deleted, err)
	}
	t.Logf("pruned %d archived binary logs the base holds (at %s)", deleted, cut.GTID)

	restore := func(t *testing.T, n *node, id string, target api.RecoveryTarget) error {
		t.Helper()
		c, host := n.manager()
		_, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
			ID: id, Source: destination(s3, "pitr/mariadb-base"),
			SHA256: base.SHA256, Size: base.Size, Format: base.Format,
			Archive: archive, Target: &target,
		})
		return err
	}
	for i, g := range goals {
		t.Run(fmt.Sprintf("a restore to target %d holds exactly the rows of the seconds before it", i+1), func(t *testing.T) {
			prefix := fmt.Sprint(81 + i)
			n := awaitingRestore(t, spec, "pitr-mariadb-dst"+prefix, "127.0."+prefix+".")
			begun := time.Now()
			if err := restore(t, n, fmt.Sprintf("mariadb-writer-%d", i+1), api.RecoveryTarget{Time: ptrTo(g.target)}); err != nil {
				t.Fatalf("POST %s: %v", api.PathRestore, err)
			}
			n.waitReady(3*time.Minute, api.RolePrimary)
			took := time.Since(begun)
			got, err := readRows(n.app())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(g.rows) || digest(got) != digest(g.rows) {
				last := "none"
				if len(got) > 0 {
					last = fmt.Sprintf("id %d at %s", got[len(got)-1].id, got[len(got)-1].at)
				}
				t.Errorf("restored to %s: %d rows (last %s, md5 %s), want the %d up to id %d at %s (md5 %s)",
					g.target.Format(time.RFC3339Nano), len(got), last, digest(got), len(g.rows),
					g.rows[len(g.rows)-1].id, g.rows[len(g.rows)-1].at, digest(g.rows))
			}
			// The copy writes on a history of its own.
			mustExec(t, n.app(), fmt.Sprintf("INSERT INTO ticks (id, at) VALUES (%d, 0)", math.MaxInt32))
			t.Logf("restored to %s: %d rows, the source's up to id %d; ready %s after the request",
				g.target.Format(time.RFC3339Nano), len(got), g.rows[len(g.rows)-1].id, took.Round(10*time.Millisecond))
		})
	}

	t.Run("a target the archive does not reach fails the restore and leaves no data", func(t *testing.T) {
		n := awaitingRestore(t, spec, "pitr-mariadb-dst84", "127.0.84.")
		if err := restore(t, n, "mariadb-beyond", api.RecoveryTarget{Time: ptrTo(time.Now().Add(time.Hour))}); err != nil {
			t.Fatalf("POST %s: %v", api.PathRestore, err)
		}
		st := n.waitStatus(3*time.Minute, "the restore to fail", func(s api.Status) bool {
			return s.Restore != nil && s.Restore.Phase == api.OperationFailed
		})
		if !strings.Contains(st.Restore.Message, "its files reach") {
			t.Errorf("the failed restore says %q, want where the archive reaches", st.Restore.Message)
		}
		n.assertNoData(t)
		if err := restore(t, n, "mariadb-lsn", api.RecoveryTarget{LSN: "0/3000148"}); err == nil || !strings.Contains(err.Error(), "target.lsn") {
			t.Errorf("a restore of MariaDB to an LSN: %v, want a refusal naming target.lsn", err)
		}
		t.Logf("a target an hour ahead: %s", st.Restore.Message)
	})
}

// TestMariaDBArchiveAcrossAFailover: a primary that cannot archive (it was
// never told where) holds its binary logs; its replica, cloned after the
// first rows and told where, archives nothing while it follows, and its
// backup is the base. The primary is
// killed and the replica promoted: the transactions it replicated are in
// its own binary logs, which it archives as the primary, with those it
// writes after. A restore from the base to a moment after the failover
// holds the writes of both sides of it.
func TestMariaDBArchiveAcrossAFailover(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := mariadbSpec()

	// Rows before the replica's clone: its data holds them, its own
	// binary log none (its first file begins after them, with an empty
	// Gtid_list); its backup's position says where its data is.
	src, p, r := archivingPair(t, spec, "pitr-mariadb-failover", "127.0.85.", 2*time.Second, func(p *node) {
		mustExec(t, p.app(), "CREATE TABLE orders (id int PRIMARY KEY)")
		mustExec(t, p.app(), "INSERT INTO orders SELECT seq FROM seq_1_to_50")
	})
	archive := destination(s3, "pitr/mariadb-failover").S3
	r.setArchive(t, *archive)
	base := r.backup(t, "mariadb-failover-base", s3, "pitr/mariadb-failover-base")
	if base.Position != nil {
		t.Logf("the base backup's position: %q", base.Position.GTID)
	}

	mustExec(t, p.app(), "INSERT INTO orders SELECT seq FROM seq_51_to_100")
	waitFor(t, time.Minute, "the replica to hold the first orders", func() error {
		var n int
		if err := r.app().QueryRow("SELECT count(*) FROM orders").Scan(&n); err != nil || n != 100 {
			return fmt.Errorf("%d rows, %v", n, err)
		}
		return nil
	})
	if s, _ := p.status(); s.Archive == nil || s.Archive.Configured || s.Archive.Archived != 0 {
		t.Errorf("the old primary, never told where, archived: %+v", s.Archive)
	}
	p.killGroup()
	<-p.doneChan()
	src.setPrimary(r)
	r.waitReady(2*time.Minute, api.RolePrimary)

	mustExec(t, r.app(), "INSERT INTO orders SELECT seq FROM seq_101_to_200")
	// A target on the next whole second (what the API holds): the rows
	// after it are written in its second or later, which a restore to it
	// does not replay.
	target := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(target.Add(100 * time.Millisecond)))
	mustExec(t, r.app(), "INSERT INTO orders SELECT seq FROM seq_201_to_300")
	s := r.waitStatus(time.Minute, "the archive to reach the target", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && !s.Archive.LastRecoverableTime.Before(target)
	})
	objects, err := s3.Store(t).List(ctx, "pitr/mariadb-failover/binlog/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objects {
		keys = append(keys, strings.TrimPrefix(o.Key, "pitr/mariadb-failover/binlog/"))
	}
	t.Logf("the new primary's archive: %d files, last %s: %s", s.Archive.Archived, s.Archive.LastArchived, strings.Join(keys, " "))

	n := awaitingRestore(t, spec, "pitr-mariadb-failover-dst", "127.0.86.")
	c, host := n.manager()
	if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
		ID: "mariadb-failover-pitr", Source: destination(s3, "pitr/mariadb-failover-base"), SHA256: base.SHA256, Size: base.Size, Format: base.Format,
		Archive: archive, Target: &api.RecoveryTarget{Time: &target},
	}); err != nil {
		t.Fatal(err)
	}
	n.waitReady(3*time.Minute, api.RolePrimary)
	var count, max int
	if err := n.app().QueryRow("SELECT count(*), coalesce(max(id), 0) FROM orders").Scan(&count, &max); err != nil || count != 200 || max != 200 {
		t.Errorf("orders restored to %s, after the failover: %d (up to %d), %v; want 200 (100 from each side)", target.Format(time.RFC3339), count, max, err)
	}
}

// TestMariaDBArchiveThroughAnOutage: the S3 server becomes unreachable (a
// proxy in front of it answers every request 503) while the primary keeps
// writing: uploads fail and the manager's status says so (failures, the
// reason, a file waiting), the server keeps its binary logs; once the
// store is back, the backlog is archived, and a restore of the latest
// from a backup taken before the outage holds every row written during it.
func TestMariaDBArchiveThroughAnOutage(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := mariadbSpec()
	front, down := outageFront(t, s3)

	p := archivingPrimary(t, spec, "pitr-mariadb-outage", "127.0.87.", time.Second)
	archive := *destination(s3, "mariadb-outage").S3
	archive.Endpoint = front.URL
	p.setArchive(t, archive)
	app := p.app()
	mustExec(t, app, "CREATE TABLE orders (id int PRIMARY KEY)")
	base := p.backup(t, "mariadb-outage-base", s3, "mariadb-outage-base")
	p.waitStatus(time.Minute, "a file archived", func(s api.Status) bool { return s.Archive != nil && s.Archive.Archived > 0 })

	down.Store(true)
	cut := time.Now()
	for i := 1; i <= 100; i++ {
		mustExec(t, app, fmt.Sprintf("INSERT INTO orders VALUES (%d)", i))
	}
	s := p.waitStatus(time.Minute, "the outage in the status", func(s api.Status) bool {
		a := s.Archive
		return a != nil && a.Failed > 0 && a.LastFailureTime != nil && (a.LastArchivedTime == nil || a.LastFailureTime.After(*a.LastArchivedTime)) && a.Pending > 0
	})
	t.Logf("the first failed upload %s after the cut: %s (%d waiting)", time.Since(cut).Round(100*time.Millisecond), s.Archive.LastFailure, s.Archive.Pending)
	for i := 101; i <= 200; i++ {
		mustExec(t, app, fmt.Sprintf("INSERT INTO orders VALUES (%d)", i))
	}
	time.Sleep(3 * time.Second)
	written := time.Now().UTC()
	if s, _ := p.status(); s.Archive != nil && s.Archive.LastRecoverableTime != nil && !s.Archive.LastRecoverableTime.Before(written.Truncate(time.Second)) {
		t.Errorf("the window reached %s while the store was down", s.Archive.LastRecoverableTime)
	}

	down.Store(false)
	back := time.Now()
	s = p.waitStatus(time.Minute, "the backlog archived", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.Pending == 0 && s.Archive.LastRecoverableTime != nil && s.Archive.LastRecoverableTime.After(written)
	})
	t.Logf("the backlog archived %s after the store came back; %d failed attempts in all, %d files", time.Since(back).Round(100*time.Millisecond), s.Archive.Failed, s.Archive.Archived)

	n := awaitingRestore(t, spec, "pitr-mariadb-outage-dst", "127.0.88.")
	c, host := n.manager()
	if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
		ID: "mariadb-outage-latest", Source: destination(s3, "mariadb-outage-base"), SHA256: base.SHA256, Size: base.Size, Format: base.Format,
		Archive: destination(s3, "mariadb-outage").S3, Target: &api.RecoveryTarget{Latest: true},
	}); err != nil {
		t.Fatal(err)
	}
	n.waitReady(3*time.Minute, api.RolePrimary)
	var count int
	if err := n.app().QueryRow("SELECT count(*) FROM orders").Scan(&count); err != nil || count != 200 {
		t.Errorf("the latest restore holds %d orders, %v; want the 200 written during the outage", count, err)
	}
}
