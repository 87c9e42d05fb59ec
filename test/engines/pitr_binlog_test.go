//go:build engines

package engines

import (
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	"github.com/mydb-dev/mydb/test/s3server"
)

// binlogEngine is what the binary log point-in-time tests need to know of
// an engine.
type binlogEngine struct {
	spec func() engineSpec
	name string
	// ipPrefix returns the loopback prefix of the test's cluster i.
	ipPrefix func(i int) string
	// insertRange is the statement inserting ids from..to into table.
	insertRange func(table string, from, to int) string
	// positionQuery reads the server's GTID position (column 1).
	positionQuery string
	// exactTimes: a restore to T holds the transactions committed at or
	// before T (MySQL's GTID events keep microseconds); otherwise those
	// of the seconds before T's (MariaDB's binary log keeps seconds).
	exactTimes bool
}

var (
	mariadbBinlogs = binlogEngine{
		spec: mariadbSpec, name: "mariadb", positionQuery: "SELECT @@global.gtid_binlog_pos",
		// 89-91 are the client TLS test's.
		ipPrefix: func(i int) string {
			return fmt.Sprintf("127.0.%d.", []int{80, 81, 82, 83, 84, 85, 86, 87, 88, 102, 108}[i])
		},
		insertRange: func(table string, from, to int) string {
			return fmt.Sprintf("INSERT INTO %s SELECT seq FROM seq_%d_to_%d", table, from, to)
		},
	}
	mysqlBinlogs = binlogEngine{
		spec: mysqlSpec, name: "mysql", positionQuery: "SELECT @@global.gtid_executed",
		// 102 is MariaDB's; 103-107 the benchmarks'.
		ipPrefix: func(i int) string {
			return fmt.Sprintf("127.0.%d.", []int{92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 109}[i])
		},
		insertRange: func(table string, from, to int) string {
			return fmt.Sprintf("INSERT INTO %s WITH RECURSIVE seq (n) AS (SELECT %d UNION ALL SELECT n + 1 FROM seq WHERE n < %d) SELECT n FROM seq", table, from, to)
		},
		exactTimes: true,
	}
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
	binlogPointInTimeUnderAWriter(t, mariadbBinlogs)
}

// TestMySQLPointInTimeUnderAWriter is the same proof for MySQL, whose
// restores are exact to the microsecond: each target lies between two of
// the writer's rows, a microsecond before the later one's statement
// began (so after the earlier one committed), and the copy must hold
// exactly the rows up to the earlier one.
func TestMySQLPointInTimeUnderAWriter(t *testing.T) {
	t.Parallel()
	binlogPointInTimeUnderAWriter(t, mysqlBinlogs)
}

func binlogPointInTimeUnderAWriter(t *testing.T, e binlogEngine) {
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
	spec := e.spec()

	p := archivingPrimary(t, spec, "pitr-"+e.name, e.ipPrefix(0), archiveTimeout)
	archive := destination(s3, "pitr/"+e.name).S3
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
	base := p.backup(t, e.name+"-writer-base", s3, "pitr/"+e.name+"-base")
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

	// Three targets inside the minute. MariaDB's are in the middle of a
	// second: the copy must hold every row of the seconds before, none of
	// that second or after. MySQL's are a microsecond before a row's
	// statement began, after the row before it committed (one writer):
	// the copy must hold the rows before that row.
	type goal struct {
		name   string
		target time.Time
		rows   []row
		// cluster is the restored copy's ipPrefix.
		cluster int
	}
	// goalBefore is the target in the middle of cutAt's second
	// (MariaDB), or a microsecond before its statement began (MySQL).
	goalBefore := func(cutAt row) goal {
		sec := second(cutAt)
		target := time.Unix(sec, int64(500*time.Millisecond)).UTC()
		if e.exactTimes {
			target = microsOf(t, cutAt.at).Add(-time.Microsecond)
		}
		var upTo []row
		for _, r := range rows {
			if (!e.exactTimes && second(r) < sec) || (e.exactTimes && r.id < cutAt.id) {
				upTo = append(upTo, r)
			}
		}
		if len(upTo) == len(rows) || len(upTo) <= 10 {
			t.Fatalf("target %s: %d of %d rows, want a target inside the writer's minute", target, len(upTo), len(rows))
		}
		return goal{target: target, rows: upTo}
	}
	var goals []goal
	for i, frac := range []int{25, 50, 75} {
		g := goalBefore(rows[len(rows)*frac/100])
		g.name, g.cluster = fmt.Sprintf("target %d", i+1), 1+i
		goals = append(goals, g)
	}
	// A GTID target: the transaction of a row after the writer's, read
	// from the server's position (nothing else writes), then one more
	// row, which a restore to it must not hold.
	mustExec(t, app, fmt.Sprintf("INSERT INTO ticks (id, at) VALUES (%d, UNIX_TIMESTAMP(NOW(6)))", written+1))
	var executed string
	if err := app.QueryRow(e.positionQuery).Scan(&executed); err != nil {
		t.Fatal(err)
	}
	position, err := binlog.ParsePosition(executed)
	if err != nil || len(position) != 1 {
		t.Fatalf("the primary's position %q: %v, want one stream", executed, err)
	}
	gtidTarget := position[0].String()
	mustExec(t, app, fmt.Sprintf("INSERT INTO ticks (id, at) VALUES (%d, UNIX_TIMESTAMP(NOW(6)))", written+2))
	afterMarkers := time.Now()
	s := p.waitStatus(time.Minute, "the archive to pass the last target and the GTID's", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && s.Archive.LastRecoverableTime.After(goals[len(goals)-1].target) &&
			s.Archive.LastRecoverableTime.After(afterMarkers)
	})
	t.Logf("%d rows written; archive: %d binary logs, recoverable to %s", written, s.Archive.Archived, s.Archive.LastRecoverableTime.Format(time.RFC3339Nano))

	// One more target, in the middle of a second in which the server
	// closed a binary log and opened the next: the replay takes that
	// next file too, whose first events are of the target's second
	// (a MariaDB replay of it once failed with "never reached expected
	// GTID state").
	manifests, err := instance.ListBinlogManifests(ctx, s3.Store(t), "pitr/"+e.name)
	if err != nil {
		t.Fatal(err)
	}
	var closedIn []time.Time
	for _, m := range manifests {
		if m.Summary.Rotated && m.Summary.LastEvent.Unix() > second(rows[len(rows)/3]) && m.Summary.LastEvent.Unix() < second(rows[len(rows)-1])-2 {
			closedIn = append(closedIn, m.Summary.LastEvent)
		}
	}
	if len(closedIn) == 0 {
		t.Fatalf("no binary log closed in the writer's minute: %d archived", len(manifests))
	}
	slices.SortFunc(closedIn, time.Time.Compare)
	rotation := closedIn[len(closedIn)/2]
	cutAt := rows[len(rows)-1]
	for _, r := range rows {
		if microsOf(t, r.at).After(rotation.Add(500 * time.Millisecond)) {
			cutAt = r
			break
		}
	}
	if second(cutAt) != rotation.Unix() {
		t.Fatalf("no row in the second a binary log closed (%s) after its middle: the writer wrote none then", rotation.Format(time.RFC3339))
	}
	inRotation := goalBefore(cutAt)
	inRotation.name, inRotation.cluster = "a second in which a binary log closed", 10
	goals = append(goals, inRotation)

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
			ID: id, Source: destination(s3, "pitr/"+e.name+"-base"),
			SHA256: base.SHA256, Size: base.Size, Format: base.Format,
			Archive: archive, Target: &target,
		})
		return err
	}
	for i, g := range goals {
		t.Run(fmt.Sprintf("a restore to %s holds exactly the rows before it", g.name), func(t *testing.T) {
			n := awaitingRestore(t, spec, fmt.Sprintf("pitr-%s-dst%d", e.name, g.cluster), e.ipPrefix(g.cluster))
			begun := time.Now()
			if err := restore(t, n, fmt.Sprintf("%s-writer-%d", e.name, i+1), api.RecoveryTarget{Time: ptrTo(g.target)}); err != nil {
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

	t.Run("a restore to a GTID holds the rows up to its transaction", func(t *testing.T) {
		n := awaitingRestore(t, spec, fmt.Sprintf("pitr-%s-dst-gtid", e.name), e.ipPrefix(9))
		begun := time.Now()
		if err := restore(t, n, e.name+"-writer-gtid", api.RecoveryTarget{GTID: gtidTarget}); err != nil {
			t.Fatalf("POST %s: %v", api.PathRestore, err)
		}
		n.waitReady(3*time.Minute, api.RolePrimary)
		var count, max int
		if err := n.app().QueryRow("SELECT count(*), max(id) FROM ticks").Scan(&count, &max); err != nil || count != written+1 || max != written+1 {
			t.Errorf("restored to GTID %s: %d rows up to id %d (%v), want the %d up to id %d", gtidTarget, count, max, err, written+1, written+1)
		}
		t.Logf("restored to GTID %s: %d rows; ready %s after the request", gtidTarget, count, time.Since(begun).Round(10*time.Millisecond))
	})

	t.Run("a target the archive does not reach fails the restore and leaves no data", func(t *testing.T) {
		n := awaitingRestore(t, spec, "pitr-"+e.name+"-dst4", e.ipPrefix(4))
		if err := restore(t, n, e.name+"-beyond", api.RecoveryTarget{Time: ptrTo(time.Now().Add(time.Hour))}); err != nil {
			t.Fatalf("POST %s: %v", api.PathRestore, err)
		}
		st := n.waitStatus(3*time.Minute, "the restore to fail", func(s api.Status) bool {
			return s.Restore != nil && s.Restore.Phase == api.OperationFailed
		})
		if !strings.Contains(st.Restore.Message, "its files reach") {
			t.Errorf("the failed restore says %q, want where the archive reaches", st.Restore.Message)
		}
		n.assertNoData(t)
		if err := restore(t, n, e.name+"-lsn", api.RecoveryTarget{LSN: "0/3000148"}); err == nil || !strings.Contains(err.Error(), "target.lsn") {
			t.Errorf("a restore of %s to an LSN: %v, want a refusal naming target.lsn", e.name, err)
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
	binlogArchiveAcrossAFailover(t, mariadbBinlogs)
}

// TestMySQLArchiveAcrossAFailover is the same for MySQL: the promoted
// replica's binary logs hold what it applied, under its source's UUID.
func TestMySQLArchiveAcrossAFailover(t *testing.T) {
	t.Parallel()
	binlogArchiveAcrossAFailover(t, mysqlBinlogs)
}

func binlogArchiveAcrossAFailover(t *testing.T, e binlogEngine) {
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := e.spec()

	// Rows before the replica's clone: its data holds them, its own
	// binary log none (its first file begins after them, with an empty
	// Gtid_list); its backup's position says where its data is.
	src, p, r := archivingPair(t, spec, "pitr-"+e.name+"-failover", e.ipPrefix(5), 2*time.Second, func(p *node) {
		mustExec(t, p.app(), "CREATE TABLE orders (id int PRIMARY KEY)")
		mustExec(t, p.app(), e.insertRange("orders", 1, 50))
	})
	archive := destination(s3, "pitr/"+e.name+"-failover").S3
	r.setArchive(t, *archive)
	base := r.backup(t, e.name+"-failover-base", s3, "pitr/"+e.name+"-failover-base")
	if base.Position != nil {
		t.Logf("the base backup's position: %q", base.Position.GTID)
	}

	mustExec(t, p.app(), e.insertRange("orders", 51, 100))
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

	mustExec(t, r.app(), e.insertRange("orders", 101, 200))
	// A target on the next whole second (what the API holds): the rows
	// after it are written in its second or later, which a restore to it
	// does not replay.
	target := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(target.Add(100 * time.Millisecond)))
	mustExec(t, r.app(), e.insertRange("orders", 201, 300))
	s := r.waitStatus(time.Minute, "the archive to reach the target", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && !s.Archive.LastRecoverableTime.Before(target)
	})
	objects, err := s3.Store(t).List(ctx, "pitr/"+e.name+"-failover/binlog/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objects {
		keys = append(keys, strings.TrimPrefix(o.Key, "pitr/"+e.name+"-failover/binlog/"))
	}
	t.Logf("the new primary's archive: %d files, last %s: %s", s.Archive.Archived, s.Archive.LastArchived, strings.Join(keys, " "))

	n := awaitingRestore(t, spec, "pitr-"+e.name+"-failover-dst", e.ipPrefix(6))
	c, host := n.manager()
	if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
		ID: e.name + "-failover-pitr", Source: destination(s3, "pitr/"+e.name+"-failover-base"), SHA256: base.SHA256, Size: base.Size, Format: base.Format,
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
	binlogArchiveThroughAnOutage(t, mariadbBinlogs)
}

// TestMySQLArchiveThroughAnOutage is the same for MySQL.
func TestMySQLArchiveThroughAnOutage(t *testing.T) {
	t.Parallel()
	binlogArchiveThroughAnOutage(t, mysqlBinlogs)
}

func binlogArchiveThroughAnOutage(t *testing.T, e binlogEngine) {
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := e.spec()
	front, down := outageFront(t, s3)

	p := archivingPrimary(t, spec, "pitr-"+e.name+"-outage", e.ipPrefix(7), time.Second)
	archive := *destination(s3, e.name+"-outage").S3
	archive.Endpoint = front.URL
	p.setArchive(t, archive)
	app := p.app()
	mustExec(t, app, "CREATE TABLE orders (id int PRIMARY KEY)")
	base := p.backup(t, e.name+"-outage-base", s3, e.name+"-outage-base")
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

	n := awaitingRestore(t, spec, "pitr-"+e.name+"-outage-dst", e.ipPrefix(8))
	c, host := n.manager()
	if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
		ID: e.name + "-outage-latest", Source: destination(s3, e.name+"-outage-base"), SHA256: base.SHA256, Size: base.Size, Format: base.Format,
		Archive: destination(s3, e.name+"-outage").S3, Target: &api.RecoveryTarget{Latest: true},
	}); err != nil {
		t.Fatal(err)
	}
	n.waitReady(3*time.Minute, api.RolePrimary)
	var count int
	if err := n.app().QueryRow("SELECT count(*) FROM orders").Scan(&count); err != nil || count != 200 {
		t.Errorf("the latest restore holds %d orders, %v; want the 200 written during the outage", count, err)
	}
}

// microsOf reads a time the server wrote as UNIX_TIMESTAMP(NOW(6)):
// seconds.micros.
func microsOf(t *testing.T, at string) time.Time {
	t.Helper()
	sec, frac, _ := strings.Cut(at, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("%q: %v", at, err)
	}
	return time.Unix(s, us*1000).UTC()
}
