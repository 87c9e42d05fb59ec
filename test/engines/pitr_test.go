//go:build engines

package engines

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	"github.com/mydb-dev/mydb/test/s3server"
)

// TestPostgresPointInTimeRestore: a primary started with --wal-archive
// archives every WAL file through its manager into a real S3 server, each
// object with its SHA-256; its status says how far the archive goes. A
// table dropped after two batches of orders comes back, from a base
// backup taken before both and the archive, as it was between the
// batches; a target past the archive's end fails the restore and leaves
// no data (it does not end somewhere else); "latest" replays everything.
func TestPostgresPointInTimeRestore(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t, s3server.Options{})
	store := s3.Store(t)
	ctx := context.Background()
	spec := postgresSpec()

	p := archivingPrimary(t, spec, "pitr-src", "127.0.45.", 2*time.Second)
	archive := destination(s3, "pitr/src").S3
	p.setArchive(t, *archive)
	base := p.backup(t, "pitr-base", s3, "pitr/base")

	app := p.app()
	mustExec(t, app, "CREATE TABLE orders (id int PRIMARY KEY, placed timestamptz NOT NULL DEFAULT clock_timestamp())")
	mustExec(t, app, "INSERT INTO orders (id) SELECT g FROM generate_series(1, 100) g")
	// The target lies between the batches' commits.
	time.Sleep(50 * time.Millisecond)
	target := time.Now().UTC()
	time.Sleep(50 * time.Millisecond)
	mustExec(t, app, "INSERT INTO orders (id) SELECT g FROM generate_series(101, 200) g")
	mustExec(t, app, "DROP TABLE orders")
	dropped := time.Now().UTC()

	s := p.waitStatus(time.Minute, "the archive to pass the drop", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && s.Archive.LastRecoverableTime.After(dropped)
	})
	a := s.Archive
	if !a.Configured || a.Archived == 0 || a.LastArchived == "" || a.Failed != 0 || !strings.HasSuffix(a.Prefix, "/pitr/src") {
		t.Errorf("archive status %+v", *a)
	}
	t.Logf("archive: %d files, last %s at %s, recoverable to %s, %d pending", a.Archived, a.LastArchived,
		a.LastArchivedTime.Format(time.RFC3339Nano), a.LastRecoverableTime.Format(time.RFC3339Nano), a.Pending)

	// Each object holds the bytes its recorded digest says.
	objects, err := store.List(ctx, "pitr/src/wal/")
	if err != nil || len(objects) == 0 {
		t.Fatalf("the archive's objects: %v (%d)", err, len(objects))
	}
	for _, o := range objects[:min(3, len(objects))] {
		st, err := store.Stat(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := store.Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		size, sum := digest(rc)
		rc.Close()
		if st.SHA256 == "" || sum != st.SHA256 || size != st.Size {
			t.Errorf("%s: holds %d bytes sha256 %s, recorded %q", o.Key, size, sum, st.SHA256)
		}
	}

	restore := func(n *node, id string, to api.RecoveryTarget) {
		t.Helper()
		c, host := n.manager()
		if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
			ID: id, Source: destination(s3, "pitr/base"), SHA256: base.SHA256, Size: base.Size, Format: base.Format,
			Archive: archive, Target: &to,
		}); err != nil {
			t.Fatalf("%s: POST %s: %v", n.name, api.PathRestore, err)
		}
	}
	awaiting := func(prefix string) *node {
		return awaitingRestore(t, spec, "pitr-dst"+prefix, "127.0."+prefix+".")
	}
	orders := func(db *sql.DB) (int, error) {
		var n int
		err := db.QueryRow("SELECT count(*) FROM orders").Scan(&n)
		return n, err
	}

	dst := awaiting("46")
	t.Run("a target past the archive fails the restore and leaves no data", func(t *testing.T) {
		restore(dst, "pitr-too-late", api.RecoveryTarget{Time: ptrTo(time.Now().Add(time.Hour))})
		s := dst.waitStatus(3*time.Minute, "the restore to fail", func(s api.Status) bool {
			return s.Restore != nil && s.Restore.ID == "pitr-too-late" && s.Restore.Phase == api.OperationFailed && s.AwaitingRestore
		})
		if !strings.Contains(s.Restore.Message, "recovery ended before configured recovery target was reached") {
			t.Errorf("restore message %q, want the engine's reason", s.Restore.Message)
		}
		dst.assertNoData(t)
	})

	t.Run("the dropped table comes back as it was at the target", func(t *testing.T) {
		restore(dst, "pitr-between", api.RecoveryTarget{Time: &target})
		dst.waitReady(3*time.Minute, api.RolePrimary)
		db := dst.app()
		n, err := orders(db)
		if err != nil || n != 100 {
			t.Fatalf("orders after a restore to %s: %d, %v; want the first batch's 100", target.Format(time.RFC3339Nano), n, err)
		}
		var timeline int
		if err := db.QueryRow("SELECT timeline_id FROM pg_control_checkpoint()").Scan(&timeline); err != nil || timeline < 2 {
			t.Errorf("the restored primary's timeline: %d, %v; want a new one", timeline, err)
		}
		mustExec(t, db, "INSERT INTO orders (id) VALUES (1000)")
		// The restored database archives nowhere yet: its controller
		// gives it a prefix of its own (the source's is never written).
		t.Logf("restored to %s: %d orders, timeline %d", target.Format(time.RFC3339Nano), n, timeline)
	})

	t.Run("latest replays the drop", func(t *testing.T) {
		// The window's pruning first: everything below the segment where
		// the base backup's own WAL ends goes, and the replay from that
		// backup still has all it needs.
		cut, err := api.LSNSegment(base.Position.LSN)
		if err != nil {
			t.Fatal(err)
		}
		deleted, err := mydatabase.S3ArchivePruner{}.PruneArchive(ctx, *archive, pitrwindow.Cut{Segment: cut})
		if err != nil || deleted == 0 {
			t.Fatalf("pruning below segment %d (the base ends at %s): %d deleted, %v", cut, base.Position.LSN, deleted, err)
		}
		t.Logf("pruned %d archived files below segment %d, where the base backup ends (%s)", deleted, cut, base.Position.LSN)
		n := awaiting("47")
		restore(n, "pitr-latest", api.RecoveryTarget{Latest: true})
		n.waitReady(3*time.Minute, api.RolePrimary)
		if _, err := orders(n.app()); err == nil || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("orders after replaying everything: %v, want the drop replayed", err)
		}
	})

	// Nothing the restores did wrote into the source's archive.
	after, err := store.List(ctx, "pitr/src/wal/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range after {
		if st, err := store.Stat(ctx, o.Key); err != nil || st.SHA256 == "" {
			t.Errorf("%s: %v, recorded %q", o.Key, err, st.SHA256)
		}
	}
	if _, err := store.Stat(ctx, instance.WALKey("pitr/src", "00000002.history")); !errors.Is(err, objectstore.ErrNotFound) {
		t.Errorf("the source's archive and a restored database's timeline 2 history: %v, want none there", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// archivingPrimary starts a one-instance database of spec whose manager
// archives its WAL (--wal-archive), closing a file every archiveTimeout,
// and returns its primary once it is ready.
func archivingPrimary(t testing.TB, spec engineSpec, dir, ipPrefix string, archiveTimeout time.Duration) *node {
	t.Helper()
	c := newClusterIn(t, spec, dir, ipPrefix, 1)
	p := c.nodes[0]
	p.extraArgs = []string{"--wal-archive", "--archive-timeout", archiveTimeout.String()}
	p.start()
	c.setPrimary(p)
	p.waitReady(time.Minute, api.RolePrimary)
	return p
}

// archivingPair starts a two-instance database of spec whose managers
// archive (--wal-archive) and returns it with its primary and its
// streaming replica; beforeReplica (if any) runs on the primary before the
// replica clones it.
func archivingPair(t *testing.T, spec engineSpec, dir, ipPrefix string, archiveTimeout time.Duration, beforeReplica func(p *node)) (c *cluster, p, r *node) {
	t.Helper()
	c = newClusterIn(t, spec, dir, ipPrefix, 2)
	p, r = c.nodes[0], c.nodes[1]
	for _, n := range c.nodes {
		n.extraArgs = []string{"--wal-archive", "--archive-timeout", archiveTimeout.String()}
	}
	p.start()
	c.setPrimary(p)
	p.waitReady(time.Minute, api.RolePrimary)
	if beforeReplica != nil {
		beforeReplica(p)
	}
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	return c, p, r
}

// setArchive tells n's manager where its WAL goes, as the controller does.
func (n *node) setArchive(t testing.TB, d api.S3Object) {
	t.Helper()
	c, host := n.manager()
	if _, err := c.SetArchive(context.Background(), host, n.auth(), api.ArchiveRequest{Destination: d}); err != nil {
		t.Fatalf("%s: PUT %s: %v", n.name, api.PathArchive, err)
	}
}

// TestPostgresArchiveAcrossAFailover: a primary that cannot archive (it
// was never told where) holds its WAL; its replica, told where, archives
// nothing while it follows. The primary is killed and the replica
// promoted: the segments it received and the old primary never archived
// go into the archive from the new primary (else a gap no restore could
// cross), then its new timeline's. A restore from a backup taken before
// the failover to a moment after it crosses the timeline switch and holds
// the writes of both sides of it.
func TestPostgresArchiveAcrossAFailover(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := postgresSpec()

	src, p, r := archivingPair(t, spec, "pitr-failover", "127.0.48.", 2*time.Second, nil)
	archive := destination(s3, "pitr/failover").S3
	c, host := r.manager()
	if _, err := c.SetArchive(ctx, host, r.auth(), api.ArchiveRequest{Destination: *archive}); err != nil {
		t.Fatalf("PUT %s: %v", api.PathArchive, err)
	}
	base := r.backup(t, "failover-base", s3, "pitr/failover-base")

	mustExec(t, p.app(), "CREATE TABLE orders (id int PRIMARY KEY)")
	mustExec(t, p.app(), "INSERT INTO orders SELECT g FROM generate_series(1, 100) g")
	// Three closed segments the old primary keeps and cannot archive.
	for range 3 {
		mustExec(t, p.superuser(t, "postgres"), "SELECT pg_switch_wal() FROM (SELECT pg_current_xact_id()) x")
	}
	waitFor(t, time.Minute, "the replica to hold the first orders", func() error {
		var n int
		if err := r.app().QueryRow("SELECT count(*) FROM orders").Scan(&n); err != nil || n != 100 {
			return fmt.Errorf("%d rows, %v", n, err)
		}
		return nil
	})
	if s, _ := p.status(); s.Archive == nil || s.Archive.Configured || s.Archive.Pending == 0 && s.Archive.Failed == 0 {
		t.Logf("the old primary's archive: %+v", s.Archive)
	}
	p.killGroup()
	<-p.doneChan()
	src.setPrimary(r)
	r.waitReady(2*time.Minute, api.RolePrimary)

	mustExec(t, r.app(), "INSERT INTO orders SELECT g FROM generate_series(101, 200) g")
	time.Sleep(50 * time.Millisecond)
	target := time.Now().UTC()
	time.Sleep(50 * time.Millisecond)
	mustExec(t, r.app(), "INSERT INTO orders SELECT g FROM generate_series(201, 300) g")
	s := r.waitStatus(time.Minute, "the archive to pass the target", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && s.Archive.LastRecoverableTime.After(target)
	})
	t.Logf("the new primary's archive: %d files, last %s", s.Archive.Archived, s.Archive.LastArchived)
	objects, err := s3.Store(t).List(ctx, "pitr/failover/wal/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objects {
		keys = append(keys, strings.TrimPrefix(o.Key, "pitr/failover/wal/"))
	}
	t.Logf("archived: %s", strings.Join(keys, " "))
	if !slices.Contains(keys, "00000002.history") {
		t.Errorf("no history of timeline 2 in the archive: %v", keys)
	}
	// Without the new primary's backfill, timeline 1 would be missing (the
	// restore below then ends "before configured recovery target").
	if !slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "00000001") && len(k) == 24 }) {
		t.Errorf("no segment of timeline 1 in the archive: %v", keys)
	}

	n := awaitingRestore(t, spec, "pitr-failover-dst", "127.0.49.")
	c, host = n.manager()
	if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
		ID: "failover-pitr", Source: destination(s3, "pitr/failover-base"), SHA256: base.SHA256, Size: base.Size, Format: base.Format,
		Archive: archive, Target: &api.RecoveryTarget{Time: &target},
	}); err != nil {
		t.Fatal(err)
	}
	n.waitReady(3*time.Minute, api.RolePrimary)
	var count, timeline int
	if err := n.app().QueryRow("SELECT count(*) FROM orders").Scan(&count); err != nil || count != 200 {
		t.Errorf("orders restored to %s, after the failover: %d, %v; want 200 (100 from each side)", target.Format(time.RFC3339Nano), count, err)
	}
	if err := n.app().QueryRow("SELECT timeline_id FROM pg_control_checkpoint()").Scan(&timeline); err != nil || timeline < 3 {
		t.Errorf("restored timeline %d, %v: want past the source's 2", timeline, err)
	}
}

// TestPostgresArchiveThroughput measures, side by side in one run, how fast
// a primary's closed WAL files reach the real S3 server one at a time
// (--archive-parallel 1, what PostgreSQL's archive_command alone does) and
// with uploads ahead of the engine (4, the default): each operation closes
// eight 16 MiB files on an idle primary and waits until the last one is
// archived, through a proxy that holds each request for a round trip. It
// fails only when files are not archived; the figures go to
// docs/benchmarks.md (no bound: on two cores the ratio is noise-bound).
func TestPostgresArchiveThroughput(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := postgresSpec()
	const files = 8
	// A bucket in another building: each request waits a round trip
	// before the local server sees it.
	const rtt = 50 * time.Millisecond
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(rtt)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(far.Close)
	primaries := map[int]*node{}
	for i, parallel := range []int{1, 4} {
		c := newClusterIn(t, spec, fmt.Sprintf("pitr-rate-%d", parallel), fmt.Sprintf("127.0.%d.", 50+i), 1)
		n := c.nodes[0]
		n.extraArgs = []string{"--wal-archive", "--archive-timeout", "1h", "--archive-parallel", strconv.Itoa(parallel)}
		n.start()
		c.setPrimary(n)
		n.waitReady(time.Minute, api.RolePrimary)
		mc, host := n.manager()
		d := *destination(s3, fmt.Sprintf("rate/%d", parallel)).S3
		d.Endpoint = far.URL
		if _, err := mc.SetArchive(ctx, host, n.auth(), api.ArchiveRequest{Destination: d}); err != nil {
			t.Fatal(err)
		}
		primaries[parallel] = n
	}
	supers := map[*node]*sql.DB{}
	for _, n := range primaries {
		supers[n] = n.superuser(t, "postgres")
		mustExec(t, supers[n], "CREATE TABLE filler (n int)")
	}
	closeFiles := func(n *node) error {
		super := supers[n]
		var last string
		for range files {
			// A write makes the file non-empty, so the switch closes it.
			if _, err := super.Exec("INSERT INTO filler VALUES (1)"); err != nil {
				return err
			}
			if err := super.QueryRow("SELECT pg_walfile_name(pg_switch_wal())").Scan(&last); err != nil {
				return err
			}
		}
		deadline := time.Now().Add(5 * time.Minute)
		for {
			s, err := n.status()
			if err == nil && s.Archive != nil && s.Archive.LastArchived >= last && s.Archive.Pending == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %s not archived within 5m: %+v (%v)", n.name, last, s.Archive, err)
			}
			// Each status read probes the engine: not so often that the
			// probes take the CPU the uploads need.
			time.Sleep(20 * time.Millisecond)
		}
	}
	results := map[int][]float64{}
	const rounds = 5
	for round := range rounds {
		for _, parallel := range []int{1, 4} {
			n := primaries[parallel]
			var failure error
			r := testing.Benchmark(func(b *testing.B) {
				for range b.N {
					if failure = closeFiles(n); failure != nil {
						b.FailNow()
					}
				}
			})
			if failure != nil || r.N == 0 {
				t.Fatalf("--archive-parallel %d: %v", parallel, failure)
			}
			mbps := float64(files*api.WALSegmentSize) / (float64(r.NsPerOp()) / 1e9) / 1e6
			results[parallel] = append(results[parallel], mbps)
			t.Logf("round %d, --archive-parallel %d: %d x %d files, %.0f ms per %d files, %.0f MB/s", round+1, parallel, r.N, files,
				float64(r.NsPerOp())/1e6, files, mbps)
		}
	}
	median := func(xs []float64) float64 { xs = slices.Clone(xs); slices.Sort(xs); return xs[len(xs)/2] }
	t.Logf("archive throughput to the S3 server %s away, median of %d rounds: one at a time %.0f MB/s, 4 at once %.0f MB/s (%.2fx)",
		rtt, rounds, median(results[1]), median(results[4]), median(results[4])/median(results[1]))
}

// TestPostgresArchiveThroughAnOutage: the S3 server becomes unreachable (a
// proxy in front of it answers every request 503) while the primary keeps
// writing: uploads fail and the manager's status says so (failures, the
// reason, files waiting), the engine keeps every file; once the server is
// back, the backlog drains and the archive holds every segment, none
// missing.
func TestPostgresArchiveThroughAnOutage(t *testing.T) {
	t.Parallel()
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	front, down := outageFront(t, s3)

	n := archivingPrimary(t, postgresSpec(), "pitr-outage", "127.0.52.", 2*time.Second)
	d := *destination(s3, "outage").S3
	d.Endpoint = front.URL
	n.setArchive(t, d)
	super := n.superuser(t, "postgres")
	mustExec(t, super, "CREATE TABLE filler (n int)")
	closeFile := func() string {
		t.Helper()
		mustExec(t, super, "INSERT INTO filler VALUES (1)")
		var name string
		if err := super.QueryRow("SELECT pg_walfile_name(pg_switch_wal())").Scan(&name); err != nil {
			t.Fatal(err)
		}
		return name
	}
	first := closeFile()
	n.waitStatus(time.Minute, "the first file archived", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastArchived >= first
	})

	down.Store(true)
	cut := time.Now()
	var last string
	for range 3 {
		last = closeFile()
	}
	s := n.waitStatus(3*time.Minute, "the outage in the status", func(s api.Status) bool {
		a := s.Archive
		return a != nil && a.Failed > 0 && a.LastFailureTime != nil && (a.LastArchivedTime == nil || a.LastFailureTime.After(*a.LastArchivedTime))
	})
	t.Logf("the first failed upload %s after the cut: %s", time.Since(cut).Round(100*time.Millisecond), s.Archive.LastFailure)
	if s.Archive.LastArchived >= last {
		t.Errorf("%s archived while the store was down", s.Archive.LastArchived)
	}

	down.Store(false)
	back := time.Now()
	s = n.waitStatus(3*time.Minute, "the backlog archived", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastArchived >= last
	})
	t.Logf("the backlog (up to %s) archived %s after the store came back; %d failed attempts in all", last, time.Since(back).Round(100*time.Millisecond), s.Archive.Failed)

	objects, err := s3.Store(t).List(ctx, "outage/wal/")
	if err != nil {
		t.Fatal(err)
	}
	var segments []uint64
	for _, o := range objects {
		if _, seg, ok := api.WALSegment(strings.TrimPrefix(o.Key, "outage/wal/")); ok {
			segments = append(segments, seg)
		}
	}
	slices.Sort(segments)
	_, lastSeg, _ := api.WALSegment(last)
	for i := 1; i < len(segments); i++ {
		if segments[i] != segments[i-1]+1 {
			t.Errorf("segment %d missing from the archive: %v", segments[i-1]+1, segments)
		}
	}
	if len(segments) == 0 || segments[len(segments)-1] < lastSeg {
		t.Errorf("archived segments %v, want up to %d", segments, lastSeg)
	}
}

// outageFront is a proxy in front of s3 that answers every request 503
// while down is set: an object store that goes away and comes back.
func outageFront(t *testing.T, s3 *s3server.Server) (front *httptest.Server, down *atomic.Bool) {
	t.Helper()
	target, err := url.Parse(s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	down = &atomic.Bool{}
	front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, "the object store is down", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front, down
}
