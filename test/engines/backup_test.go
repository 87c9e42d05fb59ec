//go:build engines

package engines

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/s3server"
)

// backupSpec is what the backup flow needs to know about an engine's data.
type backupSpec struct {
	engine engineSpec
	// srcPrefix, dstPrefix and onePrefix are the loopback /24s of the
	// source and the restored databases.
	srcPrefix, dstPrefix, onePrefix string
	// load writes the data, as the engine's administrator: two databases,
	// the types dumps get wrong, thousands of rows and a blob over 20 MiB.
	load func(t *testing.T, n *node)
	// checksums are each table's row count and digest of its rows in
	// order, computed by SQL on n.
	checksums func(t *testing.T, n *node) map[string]string
	// credentials checks that dst's own credentials work on n and src's
	// are refused.
	credentials func(t *testing.T, n *node, src *cluster)
}

// The backup tests run alongside each other (after the engine suites,
// which run alone): their databases and S3 servers share nothing.
func TestPostgresBackupRestore(t *testing.T) { t.Parallel(); testBackupRestore(t, postgresBackup()) }
func TestMariaDBBackupRestore(t *testing.T)  { t.Parallel(); testBackupRestore(t, mariadbBackup()) }
func TestMySQLBackupRestore(t *testing.T)    { t.Parallel(); testBackupRestore(t, mysqlBackup()) }

// testBackupRestore backs a loaded database up from its primary and from
// its replica into a real S3 server, then restores into new databases with
// other credentials: a corrupted and a truncated object fail and leave no
// data, a load killed midway leaves none either and is done again, and the
// restored primary and a replica cloned from it hold exactly the source's
// rows.
func testBackupRestore(t *testing.T, b backupSpec) {
	s3 := s3server.Start(t, s3server.Options{})
	store := s3.Store(t)
	name := b.engine.name

	src := newClusterIn(t, b.engine, "backup-src-"+name, b.srcPrefix, 2)
	p, r := src.nodes[0], src.nodes[1]
	p.start()
	src.setPrimary(p)
	p.waitReady(time.Minute, api.RolePrimary)
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	start := time.Now()
	b.load(t, p)
	want := b.checksums(t, p)
	t.Logf("%s: loaded in %s: %v", name, time.Since(start).Round(time.Millisecond), want)
	// The replica has every row before its backup is taken.
	waitFor(t, time.Minute, "the replica to hold the rows", func() error {
		if got := b.checksums(t, r); !equalMaps(got, want) {
			return fmt.Errorf("replica %v", got)
		}
		return nil
	})

	var fig []string
	backups := map[api.Role]api.Operation{}
	for _, n := range []*node{p, r} {
		key := fmt.Sprintf("%s/from-%s", name, n.name)
		op := n.backup(t, "backup-"+n.name, s3, key)
		role := api.RolePrimary
		if n == r {
			role = api.RoleReplica
		}
		if op.Role != role || op.Instance != n.name || op.Size < 20<<20 || op.Bytes != op.Size || op.Position == nil || *op.Position == (api.Position{}) || op.Format == "" {
			t.Fatalf("backup of %s: %+v", n.name, op)
		}
		// The checksum is of the bytes the bucket holds.
		rc, err := store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		size, sum := digest(rc)
		rc.Close()
		if size != op.Size || sum != op.SHA256 {
			t.Fatalf("the object holds %d bytes %s, the backup says %d %s", size, sum, op.Size, op.SHA256)
		}
		fig = append(fig, fmt.Sprintf("backup from the %s: %s (position %+v)", role, throughput(op), *op.Position))
		backups[role] = op
	}

	// A new database with other passwords, started to restore.
	dst := newClusterIn(t, b.engine, "backup-dst-"+name, b.dstPrefix, 2)
	dp, dr := dst.nodes[0], dst.nodes[1]
	for _, n := range dst.nodes {
		n.extraArgs = []string{"--restore"}
	}
	dp.start()
	dst.setPrimary(dp)
	dp.waitStatus(time.Minute, "awaiting its restore", func(s api.Status) bool { return s.AwaitingRestore && !s.Ready })
	if _, err := os.Stat(filepath.Join(dp.dataRoot, b.engine.dataSubdir)); !os.IsNotExist(err) {
		t.Fatalf("an instance awaiting its restore has a data directory: %v", err)
	}

	good := backups[api.RolePrimary]
	obj := fmt.Sprintf("%s/from-%s", name, p.name)
	t.Run("a corrupted object fails the restore and leaves no data", func(t *testing.T) {
		rc, err := store.Get(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(rc)
		rc.Close()
		data[len(data)/2] ^= 0xff // same size, one byte flipped
		if _, err := store.Put(context.Background(), name+"/corrupt", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Put(context.Background(), name+"/truncated", bytes.NewReader(data[:len(data)/3])); err != nil {
			t.Fatal(err)
		}
		for key, msg := range map[string]string{name + "/corrupt": "checksum mismatch", name + "/truncated": "bytes, the backup"} {
			id := "restore-" + strings.ReplaceAll(key, "/", "-")
			dp.postRestore(t, id, s3, key, good)
			s := dp.waitStatus(2*time.Minute, "the failed restore "+id, func(s api.Status) bool {
				return s.Restore != nil && s.Restore.ID == id && s.Restore.Phase == api.OperationFailed && s.AwaitingRestore
			})
			if !strings.Contains(s.Restore.Message, msg) || s.Ready || dp.get(api.PathReadyz) != http.StatusServiceUnavailable {
				t.Errorf("restore of %s: %+v; status ready %v, reason %q", key, s.Restore, s.Ready, s.Reason)
			}
			dp.assertNoData(t)
		}
	})

	t.Run("a restore killed midway leaves no data and is done again", func(t *testing.T) {
		dp.postRestore(t, "restore-killed", s3, obj, good)
		s := dp.waitStatus(2*time.Minute, "the load under way", func(s api.Status) bool {
			return s.Restore != nil && s.Restore.ID == "restore-killed" && s.Restore.Phase == api.OperationRunning && s.Restore.Bytes > 0
		})
		// kill -9 of the manager and whatever engine tool it runs.
		dp.killGroup()
		<-dp.doneChan()
		t.Logf("killed at %d of %d bytes", s.Restore.Bytes, s.Restore.Size)
		if _, err := os.Stat(filepath.Join(dp.dataRoot, b.engine.dataSubdir, "mydb-complete")); !os.IsNotExist(err) {
			t.Fatalf("a killed restore left complete-looking data: %v", err)
		}
		dp.start()
		s = dp.waitStatus(time.Minute, "awaiting the restore again", func(s api.Status) bool { return s.AwaitingRestore })
		if s.Ready || s.Restore != nil {
			t.Errorf("after the restart: ready %v, restore %+v", s.Ready, s.Restore)
		}
		dp.assertNoData(t)
	})

	t.Run("the restored primary and its clone hold the source's rows and their own credentials", func(t *testing.T) {
		dp.postRestore(t, "restore-final", s3, obj, good)
		dp.waitReady(3*time.Minute, api.RolePrimary)
		s, _ := dp.status()
		op := s.Restore
		if op == nil || op.Phase != api.OperationSucceeded || op.Bytes != good.Size || s.AwaitingRestore {
			t.Fatalf("restore %+v", op)
		}
		fig = append(fig, "restore (load, verify, recovery, credentials): "+throughput(*op))
		if got := b.checksums(t, dp); !equalMaps(got, want) {
			t.Errorf("restored primary:\n got %v\nwant %v", got, want)
		}
		b.credentials(t, dp, src)

		// Its replica clones from it (started with --restore too, it
		// loads nothing) and follows it like a bootstrapped one's.
		dr.start()
		dr.waitReady(3*time.Minute, api.RoleReplica)
		if s, _ := dr.status(); s.Restore != nil {
			t.Errorf("the replica was restored: %+v", s.Restore)
		}
		if got := b.checksums(t, dr); !equalMaps(got, want) {
			t.Errorf("replica of the restored primary:\n got %v\nwant %v", got, want)
		}
		mustExec(t, dp.app(), "CREATE TABLE after_restore (id int PRIMARY KEY)")
		mustExec(t, dp.app(), "INSERT INTO after_restore VALUES (42)")
		waitFor(t, 30*time.Second, "the write after the restore on the replica", func() error {
			var n int
			return dr.app().QueryRow("SELECT id FROM after_restore").Scan(&n)
		})
	})

	t.Run("a backup taken on a replica restores", func(t *testing.T) {
		n := awaitingRestore(t, b.engine, "backup-one-"+name, b.onePrefix)
		n.postRestore(t, "restore-from-replica", s3, fmt.Sprintf("%s/from-%s", name, r.name), backups[api.RoleReplica])
		n.waitReady(3*time.Minute, api.RolePrimary)
		if got := b.checksums(t, n); !equalMaps(got, want) {
			t.Errorf("restored from the replica's backup:\n got %v\nwant %v", got, want)
		}
		b.credentials(t, n, src)
	})
	t.Logf("%s backup figures:\n  %s", name, strings.Join(fig, "\n  "))
}

// backup asks n's manager for a backup to key and waits for its end.
func (n *node) backup(t testing.TB, id string, s3 *s3server.Server, key string) api.Operation {
	t.Helper()
	return n.backupTo(t, id, destination(s3, key))
}

// backupTo asks n's manager for a backup to dest and waits for its end.
func (n *node) backupTo(t testing.TB, id string, dest api.Destination) api.Operation {
	t.Helper()
	c, host := n.manager()
	if _, err := c.StartBackup(context.Background(), host, n.auth(), api.BackupRequest{ID: id, Destination: dest}); err != nil {
		t.Fatalf("%s: POST %s: %v", n.name, api.PathBackups, err)
	}
	op := n.waitBackup(t, id)
	if op.Phase != api.OperationSucceeded {
		t.Fatalf("backup %s: %+v", id, op)
	}
	return op
}

// waitBackup waits for backup id of n to end.
func (n *node) waitBackup(t testing.TB, id string) api.Operation {
	t.Helper()
	c, host := n.manager()
	var op api.Operation
	waitFor(t, 3*time.Minute, "backup "+id, func() error {
		got, err := c.Backup(context.Background(), host, n.auth(), id)
		if err != nil {
			return err
		}
		if op = *got; op.Phase == api.OperationRunning {
			return fmt.Errorf("running, %d bytes", op.Bytes)
		}
		return nil
	})
	return op
}

func (n *node) postRestore(t *testing.T, id string, s3 *s3server.Server, key string, backup api.Operation) {
	t.Helper()
	n.postRestoreFrom(t, id, destination(s3, key), backup)
}

func (n *node) postRestoreFrom(t *testing.T, id string, source api.Destination, backup api.Operation) {
	t.Helper()
	c, host := n.manager()
	if _, err := c.StartRestore(context.Background(), host, n.auth(), api.RestoreRequest{
		ID: id, Source: source, SHA256: backup.SHA256, Size: backup.Size, Format: backup.Format,
	}); err != nil {
		t.Fatalf("%s: POST %s: %v", n.name, api.PathRestore, err)
	}
}

// assertNoData checks n has neither data nor what a load left.
// awaitingRestore starts a one-instance database of spec with --restore
// and returns its instance once the manager awaits the restore.
func awaitingRestore(t testing.TB, spec engineSpec, dir, ipPrefix string) *node {
	t.Helper()
	c := newClusterIn(t, spec, dir, ipPrefix, 1)
	n := c.nodes[0]
	n.extraArgs = []string{"--restore"}
	n.start()
	c.setPrimary(n)
	n.waitStatus(time.Minute, "awaiting its restore", func(s api.Status) bool { return s.AwaitingRestore })
	return n
}

func (n *node) assertNoData(t *testing.T) {
	t.Helper()
	for _, dir := range []string{n.c.spec.dataSubdir, n.c.spec.dataSubdir + ".restore"} {
		if _, err := os.Stat(filepath.Join(n.dataRoot, dir)); !os.IsNotExist(err) {
			t.Errorf("%s: %s exists after a failed restore (%v)", n.name, dir, err)
		}
	}
}

func destination(s3 *s3server.Server, key string) api.Destination {
	return api.Destination{S3: &api.S3Object{
		Endpoint: s3.Endpoint, Region: s3.Region, Bucket: s3.Bucket, Key: key,
		AccessKeyID: s3.AccessKeyID, SecretAccessKey: s3.SecretAccessKey,
	}}
}

func waitFor(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func digest(r io.Reader) (int64, string) {
	h := sha256.New()
	n, _ := io.Copy(h, r)
	return n, hex.EncodeToString(h.Sum(nil))
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// queryChecksums runs each named query (one text column, one row) on db.
func queryChecksums(t *testing.T, conn *sql.Conn, queries map[string]string, into map[string]string) {
	t.Helper()
	names := make([]string, 0, len(queries))
	for name := range queries {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		var v sql.NullString
		if err := conn.QueryRowContext(context.Background(), queries[name]).Scan(&v); err != nil {
			// A replica may not have the table yet: the comparison fails.
			into[name] = "error: " + err.Error()
			continue
		}
		// NULL: an empty table (or a replica not there yet).
		into[name] = v.String
		if !v.Valid {
			into[name] = "NULL"
		}
	}
}

func mustConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
