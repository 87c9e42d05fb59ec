//go:build engines

package engines

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
	"github.com/mydb-dev/mydb/test/stats"
)

// figures are the suite's measurements, logged at the end of each engine.
type figures struct {
	lines []string
}

func (f *figures) add(format string, args ...any) {
	f.lines = append(f.lines, fmt.Sprintf(format, args...))
}

// suiteStep is one step of runSuite.
type suiteStep struct {
	name string
	run  func(t *testing.T)
}

// runSuite is the whole life of a three-instance database: bootstrap and
// re-bootstrap, user confinement, clones and streaming under load, a clean
// stop, an engine crash, a promotion, and an old primary rejoining.
func runSuite(t *testing.T, spec engineSpec) {
	c := newCluster(t, spec, 3)
	p, r1, r2 := c.nodes[0], c.nodes[1], c.nodes[2]
	fig := &figures{}
	later := &credentialsUnderTest{}
	defer func() {
		t.Logf("%s figures:\n  %s", spec.name, strings.Join(fig.lines, "\n  "))
	}()

	steps := []suiteStep{
		{"bootstrap is idempotent and survives a restart", func(t *testing.T) { testBootstrap(t, c, p, fig) }},
		{"the application user is confined", func(t *testing.T) { spec.assertAppConfined(t, c, p.app()) }},
		{"replicas clone and stream", func(t *testing.T) { testReplicas(t, c, p, []*node{r1, r2}, fig) }},
		{"an idle instance's health stream says one digest", func(t *testing.T) { testIdleDigest(t, []*node{p, r1, r2}) }},
		{"metrics: the engine's figures under the exporters' names", func(t *testing.T) { testMetrics(t, c, p, []*node{r1, r2}, fig) }},
		{"short-lived users: roles, replicated, expired everywhere", func(t *testing.T) { testCredentials(t, c, p, []*node{r1, r2}, later, fig) }},
		{"roles and databases: made, changed and dropped as asked", func(t *testing.T) { testObjects(t, c, p, []*node{r1, r2}, fig) }},
		{"Sync replication: a commit returns once a replica has it, waits with none", func(t *testing.T) { testSync(t, c, p, []*node{r1, r2}, fig) }},
		{"a renewed certificate is served without a restart", func(t *testing.T) { testCertificateRenewal(t, c, p, r2, fig) }},
		{"a rotated CA is taken without a restart", func(t *testing.T) { testCARotation(t, c, p, []*node{r1, r2}, fig) }},
		{"parameters: live ones without a restart, start ones on the command line", func(t *testing.T) { testParameters(t, c, p, r2, fig) }},
		{"an engine crash is noticed and repaired", func(t *testing.T) { testCrash(t, c, p, []*node{r1, r2}, fig) }},
		{"a replica whose history the primary purged re-clones", func(t *testing.T) { testPurgedHistory(t, c, p, r2, fig) }},
		{"a switchover target fences the primary, which the replicas catch up with", func(t *testing.T) { testFence(t, c, p, []*node{r1, r2}, fig) }},
		{"a credential made just before the primary goes", func(t *testing.T) {
			// Its expiry comes after the old primary stopped: only the new
			// one can drop it.
			later.beforePromotion = newCredential(t, p, "bob", api.CredentialReadOnly, 20*time.Second)
		}},
		{"promotion re-points the other replica", func(t *testing.T) { testPromotion(t, c, p, r1, r2, fig) }},
		{"a credential the old primary made expires on the new one", func(t *testing.T) { testCredentialExpiresAfterPromotion(t, r1, later) }},
		{"SIGTERM stops every instance cleanly, the primary under load", func(t *testing.T) { testStopAll(t, c, r1, fig) }},
		{"no password on a command line or in an environment", func(t *testing.T) { testNoLeaks(t, c) }},
	}
	// After the CA rotation.
	at := slices.IndexFunc(steps, func(s suiteStep) bool { return strings.HasPrefix(s.name, "a rotated CA") }) + 1
	steps = slices.Insert(steps, at, suiteStep{"a server certificate of the user's own is served, replicas still verify the primary", func(t *testing.T) {
		testServerCertificateOfTheUsersOwn(t, c, p, []*node{r1, r2}, fig)
	}})
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

func testBootstrap(t *testing.T, c *cluster, p *node, fig *figures) {
	// A fresh ext4 volume's lost+found, and what an interrupted bootstrap
	// left behind: neither may get in the way.
	c.mkdir(filepath.Join(p.dataRoot, "lost+found"), 0o700)
	leftover := filepath.Join(p.dataRoot, c.spec.dataSubdir+".bootstrap")
	c.mkdir(leftover, 0o700)
	c.writeFile(filepath.Join(leftover, "half-written"), "x", 0o600)

	// Until a topology arrives the instance only serves status.
	p.start()
	s := p.waitStatus(10*time.Second, "role waiting", func(s api.Status) bool { return s.Role == api.RoleWaiting })
	if s.Ready || p.get(api.PathReadyz) != 503 || p.get(api.PathHealthz) != 200 {
		t.Fatalf("a waiting instance must be alive but not ready: %+v", s)
	}
	if _, err := os.Stat(filepath.Join(p.dataRoot, c.spec.dataSubdir)); err == nil {
		t.Fatal("the instance bootstrapped before it was told a topology")
	}

	start := time.Now()
	c.setPrimary(p)
	first := p.waitReady(2*time.Minute, api.RolePrimary)
	fig.add("bootstrap to ready primary: %.2fs", time.Since(start).Seconds())
	if first.SystemIdentifier == "" || first.Position == nil {
		t.Fatalf("status lacks system identifier or position: %+v", first)
	}
	if _, err := os.Stat(leftover); err == nil {
		t.Errorf("the interrupted bootstrap's leftover %s is still there", leftover)
	}
	if _, err := os.Stat(filepath.Join(p.dataRoot, "lost+found")); err != nil {
		t.Errorf("lost+found was removed: %v", err)
	}
	app := p.app()
	mustExec(t, app, "CREATE TABLE kept (id int PRIMARY KEY, v varchar(20))")
	mustExec(t, app, "INSERT INTO kept VALUES (1, 'before restart')")

	logFrom := p.logSize()
	d, code := p.stop()
	fig.add("SIGTERM to exit (primary, idle): %.2fs, exit code %d", d.Seconds(), code)
	if code != 0 {
		t.Fatalf("exit code after SIGTERM: %d", code)
	}
	if d > 25*time.Second {
		t.Errorf("stop took %s, beyond the stop timeout", d)
	}
	c.spec.assertCleanStop(t, p, logFrom)

	logFrom = p.logSize()
	p.start()
	again := p.waitReady(time.Minute, api.RolePrimary)
	if again.SystemIdentifier != first.SystemIdentifier {
		t.Fatalf("system identifier changed across a restart: %s -> %s", first.SystemIdentifier, again.SystemIdentifier)
	}
	if strings.Contains(p.logSince(logFrom), "bootstrapping a new data set") {
		t.Fatal("the restart bootstrapped again")
	}
	var v string
	if err := p.app().QueryRow("SELECT v FROM kept WHERE id = 1").Scan(&v); err != nil || v != "before restart" {
		t.Fatalf("row written before the restart: %q, %v", v, err)
	}
}

func testReplicas(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	app := p.app()
	mustExec(t, app, "CREATE TABLE writes (id bigint PRIMARY KEY, at varchar(40))")
	for _, stmt := range c.spec.bulkLoad {
		mustExec(t, app, stmt)
	}
	wantBulk := bulkDigest(t, app)
	fig.add("primary's data directory before the clones: %d MB", p.dataBytes()>>20)
	before, err := p.status()
	if err != nil {
		t.Fatal(err)
	}

	// The clone endpoint (MariaDB's) serves only the database's instances:
	// not a client without a certificate, not the controller, and another
	// CA's certificate does not get through the handshake. Postgres
	// replicas clone with pg_basebackup instead.
	for _, who := range []struct {
		name    string
		creds   *api.Credentials
		mariadb int
	}{{"no certificate", nil, http.StatusUnauthorized}, {"the controller", c.controller, http.StatusForbidden}, {"another CA's", c.ca.Stranger(), 0}} {
		want := who.mariadb
		if c.spec.name != "mariadb" && want != 0 {
			want = http.StatusNotFound
		}
		if got := getAs(p.statusAddr, p.name, api.PathClone, c.ca, who.creds); got != want {
			t.Errorf("GET /v1/clone with %s: %d, want %d", who.name, got, want)
		}
	}
	// What an interrupted clone left behind is discarded.
	leftover := filepath.Join(replicas[0].dataRoot, c.spec.dataSubdir+".clone")
	c.mkdir(leftover, 0o700)
	c.writeFile(filepath.Join(leftover, "half-copied"), "x", 0o600)

	var wg sync.WaitGroup
	cloneTimes := make([]time.Duration, len(replicas))
	for i, r := range replicas {
		start := time.Now()
		r.start()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < 2*time.Minute {
				if s, err := r.status(); err == nil && s.Ready && s.Role == api.RoleReplica {
					cloneTimes[i] = time.Since(start)
					return
				}
				time.Sleep(25 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for i, r := range replicas {
		s := r.waitReady(time.Second, api.RoleReplica)
		fig.add("%s: clone %s; manager start to streaming replica %.2fs", r.name, r.cloneSeconds(), cloneTimes[i].Seconds())
		if s.SystemIdentifier != before.SystemIdentifier {
			t.Errorf("%s: system identifier %s, the primary's is %s", r.name, s.SystemIdentifier, before.SystemIdentifier)
		}
		if !s.Streaming || s.Upstream != fmt.Sprintf("%s:%d", p.host, p.port) {
			t.Errorf("%s: streaming %v from %q", r.name, s.Streaming, s.Upstream)
		}
		if got := bulkDigest(t, r.app()); got != wantBulk {
			t.Errorf("%s: bulk table %s, the primary's %s", r.name, got, wantBulk)
		}
		if _, err := r.app().Exec("INSERT INTO kept VALUES (2, 'on a replica')"); err == nil {
			t.Errorf("%s: a replica accepted a write", r.name)
		}
	}

	if _, err := os.Stat(leftover); err == nil {
		t.Errorf("the interrupted clone's leftover %s is still there", leftover)
	}
	checkReplicationOverVerifiedTLS(t, c, p, replicas)

	delays := measureReplication(t, app, replicaApps(replicas), 400, 10*time.Millisecond)
	fig.add("row-visible delay on the replicas, 400 writes at 100/s: p50 %s, p99 %s, max %s",
		stats.Percentile(delays, 50), stats.Percentile(delays, 99), stats.Percentile(delays, 100))
	if stats.Percentile(delays, 99) > 2*time.Second {
		t.Errorf("p99 replication delay %s exceeds 2s", stats.Percentile(delays, 99))
	}

	after := p.waitReady(5*time.Second, api.RolePrimary)
	if c.spec.progress(after.Position) <= c.spec.progress(before.Position) {
		t.Errorf("the primary's position did not advance: %+v -> %+v", before.Position, after.Position)
	}
	for _, r := range replicas {
		s := waitCaughtUp(t, c, r, after)
		if s.LagSeconds == nil {
			t.Errorf("%s: no lag reported", r.name)
		}
	}
}

// bulkDigest summarises table bulk: rows, sum of ids, total length of v.
func bulkDigest(t *testing.T, db *sql.DB) string {
	t.Helper()
	var n, ids, length int64
	if err := db.QueryRow("SELECT count(*), sum(id), sum(length(v)) FROM bulk").Scan(&n, &ids, &length); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d rows, id sum %d, %d bytes", n, ids, length)
}

func replicaApps(replicas []*node) []*sql.DB {
	var dbs []*sql.DB
	for _, r := range replicas {
		dbs = append(dbs, r.app())
	}
	return dbs
}

// waitCaughtUp waits until the replica's position reaches the primary's.
func waitCaughtUp(t *testing.T, c *cluster, r *node, primary api.Status) api.Status {
	t.Helper()
	want := c.spec.progress(primary.Position)
	return r.waitStatus(30*time.Second, fmt.Sprintf("position %d", want), func(s api.Status) bool {
		return s.Ready && c.spec.progress(s.Position) >= want
	})
}

func testCrash(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	before := p.waitReady(5*time.Second, api.RolePrimary)
	var rows int
	if err := p.app().QueryRow("SELECT count(*) FROM writes").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	replicaLogs := make([]int64, len(replicas))
	for i, r := range replicas {
		replicaLogs[i] = r.logSize()
	}
	start := time.Now()
	if err := killPID(before.EnginePID); err != nil {
		t.Fatal(err)
	}
	down := p.waitStatus(5*time.Second, "the crash noticed", func(s api.Status) bool {
		return !s.Ready && s.Restarts == before.Restarts+1
	})
	noticed := time.Since(start)
	if down.LastExit == "" || !strings.Contains(down.LastExit, "killed") {
		t.Errorf("last exit %q does not say the engine was killed", down.LastExit)
	}
	after := p.waitReady(time.Minute, api.RolePrimary)
	fig.add("kill -9 of the primary's engine: noticed in %s, ready again in %.2fs", noticed.Round(time.Millisecond), time.Since(start).Seconds())
	if after.EnginePID == before.EnginePID || after.Restarts != before.Restarts+1 {
		t.Errorf("engine pid %d -> %d, restarts %d -> %d", before.EnginePID, after.EnginePID, before.Restarts, after.Restarts)
	}
	var rowsAfter int
	if err := p.app().QueryRow("SELECT count(*) FROM writes").Scan(&rowsAfter); err != nil || rowsAfter != rows {
		t.Fatalf("rows after the crash: %d (%v), before: %d", rowsAfter, err, rows)
	}
	mustExec(t, p.app(), "INSERT INTO kept VALUES (3, 'after the crash')")
	for i, r := range replicas {
		waitRow(t, r, 3, 30*time.Second)
		r.waitReady(30*time.Second, api.RoleReplica)
		// Waiting out a primary's restart is no reason for a new clone.
		if strings.Contains(r.logSince(replicaLogs[i]), "cloning from the primary") {
			t.Errorf("%s re-cloned because the primary restarted", r.name)
		}
	}

	// A replica's engine killed while rows arrive resumes from where its
	// crash-safe position says, neither losing nor re-applying a row.
	r := replicas[0]
	rBefore := r.waitReady(5*time.Second, api.RoleReplica)
	start = time.Now()
	if err := killPID(rBefore.EnginePID); err != nil {
		t.Fatal(err)
	}
	for id := 10; id < 20; id++ {
		mustExec(t, p.app(), fmt.Sprintf("INSERT INTO kept VALUES (%d, 'replica down')", id))
	}
	r.waitStatus(5*time.Second, "the crash noticed", func(s api.Status) bool { return s.Restarts == rBefore.Restarts+1 })
	waitRow(t, r, 19, 30*time.Second)
	rAfter := r.waitReady(30*time.Second, api.RoleReplica)
	fig.add("kill -9 of a replica's engine: streaming again in %.2fs", time.Since(start).Seconds())
	var n int
	if err := r.app().QueryRow("SELECT count(*) FROM kept WHERE id BETWEEN 10 AND 19").Scan(&n); err != nil || n != 10 {
		t.Errorf("%s: %d of the 10 rows written while it was down (%v)", r.name, n, err)
	}
	if !rAfter.Streaming || rAfter.LastExit == "" {
		t.Errorf("%s after its crash: %+v", r.name, rAfter)
	}
}

// testPurgedHistory stops a replica, has the primary purge the binary logs
// it would need, and restarts it: it must notice and re-clone instead of
// retrying for ever (a claim kept from an earlier scale-down is this case).
func testPurgedHistory(t *testing.T, c *cluster, p, r *node, fig *figures) {
	if c.spec.purgeHistory == nil {
		t.Skip("not covered for " + c.spec.name)
	}
	if _, code := r.stop(); code != 0 {
		t.Fatalf("%s: exit code %d", r.name, code)
	}
	for id := 30; id < 40; id++ {
		mustExec(t, p.app(), fmt.Sprintf("INSERT INTO kept VALUES (%d, 'replica away')", id))
	}
	c.spec.purgeHistory(t, p)
	logFrom := r.logSize()
	start := time.Now()
	r.start()
	// The rows written while it was away can only arrive through a clone.
	waitRow(t, r, 39, time.Minute)
	r.waitReady(30*time.Second, api.RoleReplica)
	fig.add("replica back after its history was purged: re-clone %s, start to streaming %.2fs", r.cloneSeconds(), time.Since(start).Seconds())
	if log := r.logSince(logFrom); !strings.Contains(log, "cannot catch up") {
		t.Error("the replica did not say it re-cloned because it could not catch up")
	}
}

func testPromotion(t *testing.T, c *cluster, old, r1, r2 *node, fig *figures) {
	// MySQL family, under Sync: the replica to promote has received the
	// last commits but not applied them (its commits held), while the
	// other has them all. Its SQL thread applies them during the
	// promotion, with the new primary's semi-synchronous waits already
	// set: they must not wait for an acknowledgement, which the other
	// replica, already holding them, never sends (e2e found the promotion
	// stalled for the applier's whole 30 s bound, then for good).
	var held chan error
	if c.spec.holdCommits != nil {
		c.setSync(old, true)
		old.waitStatus(30*time.Second, "synchronous with both replicas", func(s api.Status) bool {
			return s.Ready && s.Synchronous && s.SyncReplicas == 2
		})
		held = make(chan error, 1)
		go func() { held <- c.spec.holdCommits(r1, 10*time.Second) }()
		time.Sleep(time.Second)
		for i := range 20 {
			mustExec(t, old.app(), fmt.Sprintf("INSERT INTO kept VALUES (%d, 'applied late on r1')", 7000+i))
		}
	}
	// Both replicas hold everything before the old primary goes (a planned
	// switchover; rewinding a replica that got further is the next issue).
	last := old.waitReady(5*time.Second, api.RolePrimary)
	waitCaughtUp(t, c, r1, last)
	waitCaughtUp(t, c, r2, last)
	if d, code := old.stop(); code != 0 {
		t.Fatalf("old primary exit code %d after %s", code, d)
	}

	start := time.Now()
	c.setPrimary(r1)
	promoted := r1.waitReady(time.Minute, api.RolePrimary)
	fig.add("topology change to a writable new primary: %.2fs", time.Since(start).Seconds())
	if held != nil {
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		// The commits are held 10 s from a second before the writes
		// (past the old primary's stop: MySQL's takes 3 s): the promotion
		// waits for them, and no more.
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("a Sync promotion with commits left to apply took %s, want well within the applier's 30 s bound", took.Round(time.Millisecond))
		}
		var n int
		if err := r1.app().QueryRow("SELECT count(*) FROM kept WHERE id BETWEEN 7000 AND 7019").Scan(&n); err != nil || n != 20 {
			t.Errorf("the new primary holds %d of the 20 commits it applied while promoted (%v)", n, err)
		}
		fig.add("Sync: promotion of a replica with 20 commits held (10 s from before they came) in its relay log: writable after %.2fs", time.Since(start).Seconds())
	}
	s := r2.waitStatus(time.Minute, "following the new primary", func(s api.Status) bool {
		return s.Ready && s.Upstream == fmt.Sprintf("%s:%d", r1.host, r1.port)
	})
	fig.add("topology change to the other replica streaming from it: %.2fs", time.Since(start).Seconds())
	if promoted.SystemIdentifier != s.SystemIdentifier {
		t.Errorf("system identifiers differ after promotion: %s, %s", promoted.SystemIdentifier, s.SystemIdentifier)
	}
	mustExec(t, r1.app(), "INSERT INTO kept VALUES (4, 'on the new primary')")
	waitRow(t, r2, 4, 30*time.Second)

	// The old primary comes back told to be a replica: it served as
	// primary, so it re-clones from the new one instead of following with
	// data that may have diverged.
	logFrom := old.logSize()
	start = time.Now()
	old.start()
	old.waitStatus(2*time.Minute, "following the new primary", func(s api.Status) bool {
		return s.Ready && s.Role == api.RoleReplica && s.Upstream == fmt.Sprintf("%s:%d", r1.host, r1.port)
	})
	fig.add("old primary rejoining as a replica: re-clone %s, start to streaming %.2fs", old.cloneSeconds(), time.Since(start).Seconds())
	if !strings.Contains(old.logSince(logFrom), "served as primary") {
		t.Error("the old primary did not say why it re-cloned")
	}
	waitRow(t, old, 4, 30*time.Second)
	if _, err := old.app().Exec("INSERT INTO kept VALUES (5, 'on the old primary')"); err == nil {
		t.Error("the old primary accepted a write as a replica")
	}
	if held != nil {
		c.setSync(r1, false)
		r1.waitStatus(30*time.Second, "asynchronous", func(s api.Status) bool { return s.Ready && !s.Synchronous })
	}
}

// testStopAll stops the primary first, while a client writes to it, then
// the replicas: every engine must shut down cleanly within the timeout.
func testStopAll(t *testing.T, c *cluster, primary *node, fig *figures) {
	app := primary.app()
	var writes int
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for id := 1000; ; id++ {
			if _, err := app.Exec(fmt.Sprintf("INSERT INTO writes VALUES (%d, 'during the stop')", id)); err != nil {
				return // the server went away: expected
			}
			writes++
		}
	}()
	// Let the writer get going before the stop.
	primary.waitStatus(10*time.Second, "writes under way", func(api.Status) bool {
		var n int
		_ = app.QueryRow("SELECT count(*) FROM writes WHERE id >= 1000").Scan(&n)
		return n >= 20
	})
	order := []*node{primary}
	for _, n := range c.nodes {
		if n != primary {
			order = append(order, n)
		}
	}
	for _, n := range order {
		logFrom := n.logSize()
		d, code := n.stop()
		what := "replica"
		if n == primary {
			<-writerDone
			what = fmt.Sprintf("primary under write load, %d writes before it", writes)
		}
		fig.add("%s (%s): SIGTERM to exit %.2fs, exit code %d", n.name, what, d.Seconds(), code)
		if code != 0 {
			t.Errorf("%s: exit code %d", n.name, code)
		}
		if d > 25*time.Second {
			t.Errorf("%s: stop took %s, beyond the stop timeout", n.name, d)
		}
		c.spec.assertCleanStop(t, n, logFrom)
	}
	for pid, cmdline := range processes() {
		if strings.Contains(cmdline, c.dir) {
			t.Errorf("pid %d still runs after every manager stopped: %s", pid, cmdline)
		}
	}
}

func testNoLeaks(t *testing.T, c *cluster) {
	c.leaks.stop()
	leaks, seen := c.leaks.report()
	if seen < 10 {
		t.Fatalf("the process scan saw only %d of the suite's processes; it is not looking", seen)
	}
	for _, l := range leaks {
		t.Errorf("password visible: %s", l)
	}
	t.Logf("scanned the command lines of %d processes the suite started (and their environments): no password", seen)
}

func mustExec(t testing.TB, db *sql.DB, stmt string) {
	t.Helper()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// waitRow waits until row id of table kept is visible on n.
func waitRow(t *testing.T, n *node, id int, timeout time.Duration) {
	t.Helper()
	db := n.app()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		var got int
		lastErr = db.QueryRow(fmt.Sprintf("SELECT id FROM kept WHERE id = %d", id)).Scan(&got)
		if lastErr == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: row %d not visible within %s: %v", n.name, id, timeout, lastErr)
}

// testFence: told that r[0] is to be the primary, the primary refuses
// writes and reports the position of its last one, which both replicas
// reach; told the target is gone (the switchover given up), it takes
// writes again.
func testFence(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	mustExec(t, p.app(), "INSERT INTO kept VALUES (9001, 'before the fence')")
	start := time.Now()
	c.setTopology(p, replicas[0].name)
	s := p.waitStatus(time.Minute, "fenced", func(s api.Status) bool { return s.Fenced && s.FencedPosition != nil })
	fig.add("topology change to a fenced primary (last write at %+v): %.2fs", *s.FencedPosition, time.Since(start).Seconds())
	if s.Ready {
		t.Errorf("a fenced primary is ready: %+v", s)
	}
	if _, err := p.app().Exec("INSERT INTO kept VALUES (9002, 'while fenced')"); err == nil {
		t.Error("a fenced primary took a write")
	}
	for _, r := range replicas {
		rs := r.waitStatus(time.Minute, "at the fenced primary's last write", func(rs api.Status) bool {
			return rs.Position != nil && rs.Position.Reached(*s.FencedPosition)
		})
		fig.add("topology change to %s at the fenced primary's last write (%+v): %.2fs", r.name, *rs.Position, time.Since(start).Seconds())
		waitRow(t, r, 9001, 10*time.Second)
	}
	start = time.Now()
	c.setTopology(p, "")
	p.waitReady(time.Minute, api.RolePrimary)
	fig.add("fence lifted to a writable primary again: %.2fs", time.Since(start).Seconds())
	mustExec(t, p.app(), "INSERT INTO kept VALUES (9003, 'after the fence')")
	for _, r := range replicas {
		r.waitReady(time.Minute, api.RoleReplica)
		waitRow(t, r, 9003, 30*time.Second)
	}
}

// checkReplicationOverVerifiedTLS asks the engines themselves whether the
// replicas' connections to p are encrypted, and, where the engine says,
// whether the replica verified p's certificate: PostgreSQL's pg_stat_ssl
// for p's walsenders (verification is sslmode=verify-full in
// primary_conninfo, which the manager sets); MariaDB's and MySQL's
// replica status.
func checkReplicationOverVerifiedTLS(t *testing.T, c *cluster, p *node, replicas []*node) {
	t.Helper()
	switch c.spec.name {
	case "postgres":
		var encrypted, all int
		if err := p.superuser(t, "postgres").QueryRow(
			"SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s USING (pid)").Scan(&encrypted, &all); err != nil {
			t.Fatal(err)
		}
		if all != len(replicas) || encrypted != all {
			t.Errorf("%d of %d replication connections over TLS, want all %d replicas'", encrypted, all, len(replicas))
		}
	case "mariadb":
		for _, r := range replicas {
			db, err := mariadbRoot(r)
			if err != nil {
				t.Fatal(err)
			}
			status, err := mysqlfamily.QueryRowMap(context.Background(), db, "SHOW SLAVE STATUS")
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			if status["Master_SSL_Allowed"] != "Yes" || status["Master_SSL_Verify_Server_Cert"] != "Yes" {
				t.Errorf("%s: Master_SSL_Allowed %q, Master_SSL_Verify_Server_Cert %q, want both Yes", r.name,
					status["Master_SSL_Allowed"], status["Master_SSL_Verify_Server_Cert"])
			}
		}
	case "mysql":
		for _, r := range replicas {
			out, err := r.adminSQL("SELECT SSL_ALLOWED, SSL_VERIFY_SERVER_CERTIFICATE FROM performance_schema.replication_connection_configuration")
			if err != nil {
				t.Fatal(err)
			}
			if out != "YES\tYES" {
				t.Errorf("%s: SSL_ALLOWED, SSL_VERIFY_SERVER_CERTIFICATE = %q, want YES and YES", r.name, out)
			}
		}
	}
}

// testIdleDigest: the controller reads a database only to resync while
// every instance's health stream says the same digest (api.StatusDigest):
// a real, idle instance's must not move by itself, or the controller would
// read it every poll interval after all.
func testIdleDigest(t *testing.T, nodes []*node) {
	for _, n := range nodes {
		waitFor(t, time.Minute, n.name+" ready", func() error {
			s, err := n.status()
			if err == nil && !s.Ready {
				err = fmt.Errorf("not ready: %s", s.Reason)
			}
			return err
		})
	}
	// Settled first: a primary whose replicas just cloned counts their
	// semi-synchronous connections as they come (under load, a moment
	// after they stream).
	for _, n := range nodes {
		var last string
		stableSince := time.Now()
		waitFor(t, 30*time.Second, n.name+" settled", func() error {
			s, err := n.status()
			if err != nil {
				return err
			}
			if d := api.StatusDigest(s); d != last {
				last, stableSince = d, time.Now()
			}
			if time.Since(stableSince) < 2*time.Second {
				return fmt.Errorf("its status changed %s ago", time.Since(stableSince).Round(time.Millisecond))
			}
			return nil
		})
	}
	const watch = 4 * time.Second
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, host := n.manager()
			ctx, cancel := context.WithTimeout(context.Background(), watch)
			defer cancel()
			var digests, statuses []string
			_ = c.WatchHealth(ctx, host, n.auth(), func(h api.Health) {
				if len(digests) == 0 || digests[len(digests)-1] != h.Digest {
					digests = append(digests, h.Digest)
					// What changed, as the status says it just after.
					s, err := n.status()
					b, _ := json.Marshal(s)
					statuses = append(statuses, fmt.Sprintf("%s %v", b, err))
				}
			})
			if len(digests) != 1 || digests[0] == "" {
				t.Errorf("%s, idle: its health stream said the digests %q in %s, want one; the statuses then:\n%s", n.name, digests, watch, strings.Join(statuses, "\n"))
			}
		}()
	}
	wg.Wait()
}
