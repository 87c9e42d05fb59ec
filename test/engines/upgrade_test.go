//go:build engines

package engines

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// TestMariaDBRollingUpgradeAcrossLines runs, by hand, the steps of the
// controller's rolling update of a MariaDB database from 10.11 to 11.8
// (docs/operations.md "Rolling updates, primary last"), with the engine
// images the real node runs (bookworm's 10.11, trixie's 11.8): the replica
// starts 11.8 on its 10.11 data, which the manager upgrades
// (mariadb-upgrade) before it follows the 10.11 primary; a switchover makes
// it the primary; the old primary comes back on 11.8 and re-clones from it.
// Every row is kept, on both, and the upgrade runs once per data set.
func TestMariaDBRollingUpgradeAcrossLines(t *testing.T) {
	spec := mariadbSpec()
	spec.image = "mariadb-10.11"
	c := newClusterIn(t, spec, "mariadb-upgrade", "127.0.70.", 2)
	newer, err := rootOf("mariadb-11.8", spec.osUser)
	if err != nil {
		t.Fatal(err)
	}
	if newer.uid != c.uid || newer.gid != c.gid {
		t.Fatalf("the 11.8 image's %s is %d:%d, the 10.11 image's %d:%d: a claim would change owners", spec.osUser, newer.uid, newer.gid, c.uid, c.gid)
	}
	p, r := c.nodes[0], c.nodes[1]
	fig := &figures{}
	defer func() { t.Logf("upgrade figures:\n  %s", strings.Join(fig.lines, "\n  ")) }()

	app, wantBulk := upgradeSource(t, c, p, "on 10.11")
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	waitRow(t, r, 1, 30*time.Second)
	assertServerVersion(t, p, "10.11.")
	assertServerVersion(t, r, "10.11.")
	if strings.Contains(r.logSince(0), "upgrading the data") {
		t.Error("a 10.11 clone of a 10.11 primary was upgraded")
	}

	// 1. The replica first: the new image on its claim.
	if _, code := r.stop(); code != 0 {
		t.Fatalf("replica exit code %d", code)
	}
	r.image = newer
	logFrom := r.logSize()
	start := time.Now()
	r.start()
	s := r.waitReady(2*time.Minute, api.RoleReplica)
	fig.add("replica on 11.8 with its 10.11 data: upgraded and streaming from the 10.11 primary %.2fs after its start", time.Since(start).Seconds())
	log := r.logSince(logFrom)
	if !strings.Contains(log, "upgrading the data with mariadb-upgrade") || !strings.Contains(log, "upgraded the data") {
		t.Fatalf("the replica did not upgrade its 10.11 data; its log:\n%s", log)
	}
	if strings.Contains(log, "cloning from the primary") {
		t.Fatal("the replica re-cloned instead of keeping its data")
	}
	assertServerVersion(t, r, "11.8.")
	assertUpgradeInfo(t, r, "11.8.")
	if s.Upstream != fmt.Sprintf("%s:%d", p.host, p.port) {
		t.Errorf("the upgraded replica streams from %q", s.Upstream)
	}
	mustExec(t, app, "INSERT INTO kept VALUES (2, 'on 10.11, to an 11.8 replica')")
	waitRow(t, r, 2, 30*time.Second)
	if got := bulkDigest(t, r.app()); got != wantBulk {
		t.Errorf("the upgraded replica's bulk table: %s, the primary's %s", got, wantBulk)
	}

	// Upgraded once: a restart on the same line does not run it again.
	if _, code := r.stop(); code != 0 {
		t.Fatalf("replica exit code %d", code)
	}
	logFrom = r.logSize()
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	if strings.Contains(r.logSince(logFrom), "upgrading the data") {
		t.Error("the upgraded replica ran mariadb-upgrade again at its next start")
	}

	// 2. One switchover: the primary fences, the replica catches up with
	// its last write and is promoted.
	mustExec(t, app, "INSERT INTO kept VALUES (3, 'last write on 10.11')")
	c.setTopology(p, r.name)
	fenced := p.waitStatus(time.Minute, "fenced", func(s api.Status) bool { return s.Fenced && s.FencedPosition != nil })
	r.waitStatus(time.Minute, "at the fenced primary's last write", func(s api.Status) bool {
		return s.Position != nil && s.Position.Reached(*fenced.FencedPosition)
	})
	if _, code := p.stop(); code != 0 {
		t.Fatalf("old primary exit code %d", code)
	}
	start = time.Now()
	c.setPrimary(r)
	r.waitReady(time.Minute, api.RolePrimary)
	fig.add("11.8 replica promoted: writable %.2fs after the topology change", time.Since(start).Seconds())
	waitRow(t, r, 3, 5*time.Second)
	mustExec(t, r.app(), "INSERT INTO kept VALUES (4, 'on the 11.8 primary')")

	// 3. The old primary last, on 11.8: it served as primary, so it
	// re-clones from the new one (11.8 to 11.8).
	p.image = newer
	logFrom = p.logSize()
	start = time.Now()
	p.start()
	p.waitStatus(2*time.Minute, "following the 11.8 primary", func(s api.Status) bool {
		return s.Ready && s.Role == api.RoleReplica && s.Upstream == fmt.Sprintf("%s:%d", r.host, r.port)
	})
	fig.add("old primary on 11.8: re-clone %s, start to streaming %.2fs", p.cloneSeconds(), time.Since(start).Seconds())
	if strings.Contains(p.logSince(logFrom), "upgrading the data") {
		t.Error("a clone of the 11.8 primary was upgraded again: its record must say 11.8")
	}
	assertServerVersion(t, p, "11.8.")
	assertUpgradeInfo(t, p, "11.8.")
	waitRow(t, p, 4, 30*time.Second)
	for _, n := range []*node{p, r} {
		var rows int
		if err := n.app().QueryRow("SELECT count(*) FROM kept").Scan(&rows); err != nil || rows != 4 {
			t.Errorf("%s: %d rows of kept (%v), want 4", n.name, rows, err)
		}
		if got := bulkDigest(t, n.app()); got != wantBulk {
			t.Errorf("%s: bulk table %s after the upgrade, %s before", n.name, got, wantBulk)
		}
	}
}

// assertServerVersion checks that n's server reports a version starting
// with prefix.
// upgradeSource makes p the primary of c, with row 1 of table kept saying
// what, and the engine's bulk table, whose digest it returns.
func upgradeSource(t *testing.T, c *cluster, p *node, what string) (*sql.DB, string) {
	t.Helper()
	p.start()
	c.setPrimary(p)
	p.waitReady(2*time.Minute, api.RolePrimary)
	app := p.app()
	mustExec(t, app, "CREATE TABLE kept (id int PRIMARY KEY, v varchar(40))")
	mustExec(t, app, fmt.Sprintf("INSERT INTO kept VALUES (1, '%s')", what))
	for _, stmt := range c.spec.bulkLoad {
		mustExec(t, app, stmt)
	}
	return app, bulkDigest(t, app)
}

func assertServerVersion(t *testing.T, n *node, prefix string) {
	t.Helper()
	var v string
	if err := n.app().QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, prefix) {
		t.Errorf("%s runs MariaDB %s, want %s*", n.name, v, prefix)
	}
}

// assertUpgradeInfo checks that n's data was last upgraded by a version
// starting with prefix: the file mariadb-upgrade 11 writes, or the one
// before it, which mariadb-install-db and a clone's record write.
func assertUpgradeInfo(t *testing.T, n *node, prefix string) {
	t.Helper()
	dir := filepath.Join(n.dataRoot, n.c.spec.dataSubdir)
	b, err := os.ReadFile(filepath.Join(dir, "mariadb_upgrade_info"))
	if os.IsNotExist(err) {
		b, err = os.ReadFile(filepath.Join(dir, "mysql_upgrade_info"))
	}
	if err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
	if !strings.HasPrefix(string(b), prefix) {
		t.Errorf("%s: the data was last upgraded by %q, want %s*", n.name, b, prefix)
	}
}

// TestPostgresMajorUpgrade upgrades a PostgreSQL 15 primary and replica to
// 17 in the postgres-17 image (which carries 15's server too, as Debian
// installs majors side by side): a replica on 17 does not clone its 15
// primary; a primary on 17 whose image lacks 15's server says so and keeps
// its data; one whose data pg_upgrade refuses (a regproc column, whose OIDs
// an upgrade does not keep) says why, and its 15 data serves again on 15;
// with both fixed, the manager runs pg_upgrade --link before the server
// starts, and the replica then clones the upgraded primary. Every row, the
// application's password and the database's settings are kept.
func TestPostgresMajorUpgrade(t *testing.T) {
	const from, to = "15", "17"
	spec := postgresSpec()
	spec.image, spec.binDir = "postgres-"+to, "/usr/lib/postgresql/"+from+"/bin"
	c := newClusterIn(t, spec, "postgres-upgrade", "127.0.71.", 2)
	oldBin, newBin := spec.binDir, "/usr/lib/postgresql/"+to+"/bin"
	p, r := c.nodes[0], c.nodes[1]
	fig := &figures{}
	defer func() { t.Logf("upgrade figures:\n  %s", strings.Join(fig.lines, "\n  ")) }()

	app, wantBulk := upgradeSource(t, c, p, "on the old major")
	// A column pg_upgrade refuses to carry over (reg* types other than
	// regclass, regrole and regtype name OIDs the new cluster does not keep).
	mustExec(t, app, "CREATE TABLE refused (f regproc)")
	// A setting of the database's own (ALTER SYSTEM), which must survive.
	mustExec(t, p.superuser(t, "postgres"), "ALTER SYSTEM SET work_mem = '7MB'")
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	waitRow(t, r, 1, 30*time.Second)
	assertPostgresMajor(t, p, from)
	fig.add("primary's data directory: %d MB", p.dataBytes()>>20)

	// The replica first, on the new major: its primary still runs the old
	// one, so it keeps its data and waits.
	if _, code := r.stop(); code != 0 {
		t.Fatalf("replica exit code %d", code)
	}
	r.binDir = newBin
	r.start()
	s := r.waitStatus(time.Minute, "waiting for its primary's upgrade", func(s api.Status) bool {
		return strings.Contains(s.Reason, "clones only a primary of its own major version")
	})
	if s.Ready || s.EngineRunning {
		t.Errorf("a %s replica of a %s primary: %+v", to, from, s)
	}
	assertDataMajor(t, r, from)

	// The primary on the new major, in an image without the old one's
	// server: it says so and keeps its data.
	if _, code := p.stop(); code != 0 {
		t.Fatalf("primary exit code %d", code)
	}
	oldServer := filepath.Join(c.image.dir, "usr", "lib", "postgresql", from)
	if err := os.Rename(oldServer, oldServer+".hidden"); err != nil {
		t.Fatal(err)
	}
	p.binDir = newBin
	p.start()
	s = p.waitStatus(time.Minute, "the missing server named", func(s api.Status) bool {
		return strings.Contains(s.Reason, "the image has no PostgreSQL "+from+" server")
	})
	if s.Ready || s.EngineRunning {
		t.Errorf("a primary whose upgrade failed: %+v", s)
	}
	assertDataMajor(t, p, from)
	if _, err := os.Stat(filepath.Join(p.dataRoot, "pgdata.upgrade")); err == nil {
		t.Error("the failed upgrade left its new data directory")
	}
	if _, code := p.stop(); code != 0 {
		t.Fatalf("primary exit code %d", code)
	}
	if err := os.Rename(oldServer+".hidden", oldServer); err != nil {
		t.Fatal(err)
	}

	// With the old server there, pg_upgrade refuses the data: the reason
	// says why, and the data is the old major's, which serves again on it.
	p.start()
	s = p.waitStatus(time.Minute, "pg_upgrade's refusal named", func(s api.Status) bool {
		return strings.Contains(s.Reason, "pg_upgrade") && strings.Contains(s.Reason, "reg*")
	})
	t.Logf("a refused upgrade: %s", s.Reason)
	if s.Ready || s.EngineRunning {
		t.Errorf("a primary whose upgrade failed: %+v", s)
	}
	assertDataMajor(t, p, from)
	if _, err := os.Stat(filepath.Join(p.dataRoot, "pgdata.upgrade")); err == nil {
		t.Error("the refused upgrade left its new data directory")
	}
	if _, code := p.stop(); code != 0 {
		t.Fatalf("primary exit code %d", code)
	}
	p.binDir = oldBin
	p.start()
	p.waitReady(time.Minute, api.RolePrimary)
	if got := bulkDigest(t, p.app()); got != wantBulk {
		t.Errorf("the old major's data after the refused upgrade: %s, before %s", got, wantBulk)
	}
	mustExec(t, p.app(), "DROP TABLE refused")
	if _, code := p.stop(); code != 0 {
		t.Fatalf("primary exit code %d", code)
	}
	p.binDir = newBin

	// With the old server there, the upgrade.
	logFrom := p.logSize()
	start := time.Now()
	p.start()
	p.waitReady(5*time.Minute, api.RolePrimary)
	fig.add("primary on %s: pg_upgrade --link and ready %.2fs after its start", to, time.Since(start).Seconds())
	log := p.logSince(logFrom)
	if !strings.Contains(log, "upgraded the data to the server's major version") {
		t.Fatalf("the primary did not say it upgraded; its log:\n%s", log)
	}
	assertPostgresMajor(t, p, to)
	assertDataMajor(t, p, to)
	for _, leftover := range []string{"pgdata.upgrade", "pgdata.pg" + from} {
		if _, err := os.Stat(filepath.Join(p.dataRoot, leftover)); err == nil {
			t.Errorf("the upgrade left %s", leftover)
		}
	}
	app = p.app() // with the Secret's password: its SCRAM verifier came along
	if got := bulkDigest(t, app); got != wantBulk {
		t.Errorf("bulk table after the upgrade: %s, before %s", got, wantBulk)
	}
	var workMem string
	if err := app.QueryRow("SHOW work_mem").Scan(&workMem); err != nil || workMem != "7MB" {
		t.Errorf("work_mem after the upgrade: %q (%v), want the 7MB set before it", workMem, err)
	}
	mustExec(t, app, "INSERT INTO kept VALUES (2, 'on the new major')")

	// The replica clones the upgraded primary by itself.
	start = time.Now()
	r.waitStatus(5*time.Minute, "streaming from the upgraded primary", func(s api.Status) bool {
		return s.Ready && s.Role == api.RoleReplica && s.Upstream == fmt.Sprintf("%s:%d", p.host, p.port)
	})
	fig.add("replica on %s: cloned the upgraded primary, streaming %.2fs after the primary was ready", to, time.Since(start).Seconds())
	assertDataMajor(t, r, to)
	waitRow(t, r, 2, 30*time.Second)
	if got := bulkDigest(t, r.app()); got != wantBulk {
		t.Errorf("the replica's bulk table: %s, the primary's %s", got, wantBulk)
	}
}

func assertPostgresMajor(t *testing.T, n *node, major string) {
	t.Helper()
	var v string
	if err := n.app().QueryRow("SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, major+".") {
		t.Errorf("%s runs PostgreSQL %s, want %s", n.name, v, major)
	}
}

func assertDataMajor(t *testing.T, n *node, major string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.dataRoot, "pgdata", "PG_VERSION"))
	if err != nil {
		t.Fatalf("%s: %v", n.name, err)
	}
	if got := strings.TrimSpace(string(b)); got != major {
		t.Errorf("%s's data is PostgreSQL %s's, want %s's", n.name, got, major)
	}
}

// TestPostgresMajorUpgradeDowntime measures, side by side in one run on
// copies of the same 1 GB PostgreSQL 15 data directory, the downtime of
// the manager's upgrade to 17 (from the manager's start to a writable
// primary: initdb, pg_upgrade --link, the server's start) against the same
// upgrade by hand (initdb, pg_upgrade --link, pg_ctl start -w). It fails only when an upgrade fails or changes a row; the
// figures go to docs/operations.md (no bound: on two cores the ratio is
// noise-bound).
func TestPostgresMajorUpgradeDowntime(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement")
	}
	spec := postgresSpec()
	spec.image, spec.binDir = "postgres-17", "/usr/lib/postgresql/15/bin"
	c := newClusterIn(t, spec, "postgres-upgrade-downtime", "127.0.72.", 1)
	n := c.nodes[0]
	n.start()
	c.setPrimary(n)
	n.waitReady(2*time.Minute, api.RolePrimary)
	start := time.Now()
	// About 1 GB: 3 million rows of 264 bytes and their index.
	mustExec(t, n.app(), "CREATE TABLE big (id int PRIMARY KEY, v text)")
	mustExec(t, n.app(), "INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 3000000) g")
	var rows int
	var table int64
	var sum string
	// Every row's checksum, in id order.
	const checksum = "SELECT count(*), md5(string_agg(md5(v), '' ORDER BY id)) FROM big"
	if err := n.app().QueryRow("SELECT pg_total_relation_size('big')").Scan(&table); err != nil {
		t.Fatal(err)
	}
	if err := n.app().QueryRow(checksum).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	if _, code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	size := n.dataBytes()
	t.Logf("loaded %d rows (%d MB with the index), a %d MB data directory, in %s", rows, table>>20, size>>20, time.Since(start).Round(time.Second))

	// By hand, on a copy in the same volume (pg_upgrade --link needs one).
	hand := filepath.Join(n.dataRoot, "by-hand")
	if out, err := exec.Command("cp", "-a", filepath.Join(n.dataRoot, "pgdata"), hand).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	inImage := func(name string, args ...string) error {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = n.runDir, []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: c.image.dir, Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", name, err, out)
		}
		return nil
	}
	const oldBin, newBin = "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/17/bin"
	start = time.Now()
	steps := [][]string{
		{newBin + "/initdb", "-D", hand + ".new", "--username=postgres", "--auth-local=peer", "--encoding=UTF8", "--locale=C.UTF-8", "--data-checksums"},
		{newBin + "/pg_upgrade", "--old-bindir=" + oldBin, "--new-bindir=" + newBin, "--old-datadir=" + hand, "--new-datadir=" + hand + ".new",
			"--username=postgres", "--socketdir=" + n.runDir, "--link", "--jobs=2"},
		// -l: the server must not hold this command's output open.
		{newBin + "/pg_ctl", "-D", hand + ".new", "-w", "-l", filepath.Join(n.runDir, "by-hand.log"), "-o", fmt.Sprintf("-c listen_addresses='' -c unix_socket_directories=%s -c port=%d", n.runDir, n.port), "start"},
	}
	for _, s := range steps {
		if err := inImage(s[0], s[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	byHand := time.Since(start)
	if err := inImage(newBin+"/pg_ctl", "-D", hand+".new", "-w", "stop"); err != nil {
		t.Fatal(err)
	}

	// The manager's.
	n.binDir = newBin
	start = time.Now()
	n.start()
	n.waitReady(5*time.Minute, api.RolePrimary)
	managed := time.Since(start)
	var after int
	var afterSum string
	if err := n.app().QueryRow(checksum).Scan(&after, &afterSum); err != nil || after != rows || afterSum != sum {
		t.Fatalf("after the upgrade: %d rows, checksum %s (%v); before: %d rows, checksum %s", after, afterSum, err, rows, sum)
	}
	assertPostgresMajor(t, n, "17")
	t.Logf("PostgreSQL 15 -> 17 of a %d MB table in a %d MB data directory: by hand (initdb, pg_upgrade --link, pg_ctl start -w) %s; "+
		"the manager (start to a writable primary) %s; %.2fx",
		table>>20, size>>20, byHand.Round(10*time.Millisecond), managed.Round(10*time.Millisecond), managed.Seconds()/byHand.Seconds())
}
