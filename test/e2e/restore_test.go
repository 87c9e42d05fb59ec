//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/registry/example/mydatabasebackup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dataCase is how one engine stores the rows dumps get wrong, and how a
// table's content is summed up on the server.
type dataCase struct {
	replicationCase
	// schema creates the tables notes (text, binary, times, numbers,
	// JSON) and blobs (large objects or values).
	schema []string
	// insertNote and insertBlob write one row each, with placeholders.
	insertNote, insertBlob string
	// session prepares a connection for the checksums.
	session []string
	// checksums are per-table queries answering "<rows>:<md5>".
	checksums map[string]string
}

var dataCases = []dataCase{
	{
		replicationCase: replicationCases[0],
		schema: []string{
			`CREATE TABLE notes (id int PRIMARY KEY, body text, raw bytea, at timestamptz, amount numeric(24,6), doc jsonb)`,
			`CREATE TABLE blobs (id int PRIMARY KEY, lo oid)`,
		},
		insertNote: `INSERT INTO notes VALUES ($1, $2, $3, $4, $5, $6)`,
		insertBlob: `INSERT INTO blobs VALUES ($1, lo_from_bytea(0, $2))`,
		session:    []string{`SET TIME ZONE 'UTC'`},
		checksums: map[string]string{
			"notes": `SELECT count(*) || ':' || coalesce(md5(string_agg(n::text, '|' ORDER BY id)), '') FROM notes n`,
			"blobs": `SELECT count(*) || ':' || coalesce(md5(string_agg(id || '=' || md5(lo_get(lo)), '|' ORDER BY id)), '') FROM blobs`,
		},
	},
	{
		replicationCase: replicationCases[1],
		schema: []string{
			`CREATE TABLE notes (id INT PRIMARY KEY, body TEXT CHARACTER SET utf8mb4, raw BLOB, at DATETIME(6), amount DECIMAL(24,6), doc JSON) ENGINE=InnoDB`,
			`CREATE TABLE blobs (id INT PRIMARY KEY, data LONGBLOB) ENGINE=InnoDB`,
		},
		insertNote: `INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?)`,
		insertBlob: `INSERT INTO blobs VALUES (?, ?)`,
		session:    []string{`SET SESSION group_concat_max_len = 1073741824`, `SET time_zone = '+00:00'`},
		checksums: map[string]string{
			"notes": `SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT_WS('#', id, HEX(body), HEX(raw), at, amount, doc) ORDER BY id SEPARATOR '|')), '')) FROM notes`,
			"blobs": `SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT(id, '=', MD5(data)) ORDER BY id SEPARATOR '|')), '')) FROM blobs`,
		},
	},
}

// write inserts notes from..to-1 and as many blobs, each with the values
// dumps get wrong: quotes, backslashes, newlines, tabs and non-ASCII text,
// NUL and 0xff bytes, times across a DST change in a zone, long decimals,
// nested JSON, and 64 KiB binary values.
func (dc dataCase) write(t *testing.T, db *sql.DB, from, to int) {
	t.Helper()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		body := fmt.Sprintf("note %d\nit's \"quoted\" \\back\\slashed\ttabbed; DROP TABLE notes; -- é€😀", i)
		raw := []byte{0x00, 0xff, byte(i), '\'', '\\', '\n', 0x00}
		at := time.Date(2026, 3, 29, 1, 0, 0, 123456000, paris).Add(time.Duration(i) * 17 * time.Minute)
		amount := fmt.Sprintf("%d.%06d", i*1000003, i%1000000)
		doc := fmt.Sprintf(`{"id": %d, "tags": ["a\"b", "c\\d"], "nested": {"ok": true, "n": null}}`, i)
		mustExec(t, db, dc.insertNote, i, body, raw, at, amount, doc)
		blob := []byte(strings.Repeat(fmt.Sprintf("blob %d \x00\xff ", i), 64<<10/12))
		mustExec(t, db, dc.insertBlob, i, blob)
	}
}

// sums reads each table's checksum on one instance.
func (dc dataCase) sums(t *testing.T, db *sql.DB) (map[string]string, error) {
	t.Helper()
	for _, q := range dc.session {
		if _, err := db.Exec(q); err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	for table, q := range dc.checksums {
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		out[table] = s
	}
	return out, nil
}

// waitSums waits until the harness's database has n instances streaming,
// each holding want.
func (dc dataCase) waitSums(t *testing.T, h *replicationHarness, n int, want map[string]string) {
	t.Helper()
	status := h.waitStreaming(n)
	for _, in := range status.Instances {
		db := h.connect(in.Name)
		eventually(t, 2*time.Minute, func() error {
			got, err := dc.sums(t, db)
			if err != nil {
				return fmt.Errorf("%s: %v", in.Name, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%s (%s) holds %v, want %v", in.Name, in.Role, got, want)
			}
			return nil
		})
		t.Logf("%s/%s (%s): %v", h.db, in.Name, in.Role, want)
	}
}

// source is a database a test backs up, with rows written.
type source struct {
	db *examplev1.MyDatabase
	h  *replicationHarness
	// status is the database's once its instances streamed.
	status  examplev1.MyDatabaseStatus
	primary *sql.DB
	// sums are the primary's per-table checksums after the writes.
	sums map[string]string
}

// startSource creates the database src in ns with spec, its engine and
// version dc's, plays its pods, and once its instances stream writes rows
// rows of dc's tables to the primary.
func (dc dataCase) startSource(t *testing.T, ns string, spec examplev1.MyDatabaseSpec, rows int) source {
	t.Helper()
	return dc.createSource(t, ns, spec, rows, func() { startRig(t, ns, "src", dc.engine) })
}

// createSource is startSource with run starting the pods' instances (nil
// when a real node runs them).
func (dc dataCase) createSource(t *testing.T, ns string, spec examplev1.MyDatabaseSpec, rows int, run func()) source {
	t.Helper()
	spec.Engine, spec.Version = examplev1.Engine(dc.engine.name), dc.version
	db, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns).Create(context.Background(),
		&examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "src"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if run != nil {
		run()
	}
	src := source{db: db, h: &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "src"}}
	src.status = src.h.waitStreaming(int(*spec.Replicas))
	src.primary = src.h.connect(src.status.CurrentPrimary)
	for _, q := range dc.schema {
		mustExec(t, src.primary, q)
	}
	dc.write(t, src.primary, 0, rows)
	if src.sums, err = dc.sums(t, src.primary); err != nil {
		t.Fatal(err)
	}
	return src
}

// TestBackupAndRestore, for postgres and mariadb, with real engines and a
// real S3 server: rows of tricky types on a 2-instance database are backed
// up (postgres: kubectl mydb backup, from the replica by default;
// mariadb: POST .../backup asking for the primary) to the bucket, with
// size and checksum shown by kubectl get mdbb; a new database restored
// from it holds the same per-table checksums on every instance. Then,
// under deletionPolicy Delete with finalBackup, the source is deleted: its
// final backup outlives it, its other backup goes with it and so does that
// backup's dump, and a database restored from the final backup holds every
// row, the last ones included.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	for _, dc := range dataCases {
		t.Run(dc.engine.name, func(t *testing.T) {
			ctx := context.Background()
			ns := newNamespace(t)
			srv, dest := startS3(t, ns, "e2e/"+dc.engine.name)
			store := srv.Store(t)
			admin := mydbClient(t, restConfig(t)).ExampleV1()
			const rows = 200
			source := dc.startSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
				DeletionPolicy: examplev1.DeletionPolicyDelete,
				Backup:         &examplev1.BackupPolicy{FinalBackup: true, Destination: dest}}, rows)
			src, h, status, primary, want := source.db, source.h, source.status, source.primary, source.sums
			// The replica has every row before the backup is asked for.
			dc.waitSums(t, h, 2, want)

			// The backup.
			start := time.Now()
			wantInstance, wantRole := "", examplev1.InstanceRolePrimary
			switch dc.engine.name {
			case "postgres":
				r := kubectlMydb(t, "backup", "src", "-n", ns, "--name", "snap", "--wait", "5m")
				if r.err != nil || !strings.Contains(r.stdout, "mydatabasebackup.example.com/snap succeeded: s3://"+srv.Bucket+"/e2e/postgres/"+ns+"/src/") {
					t.Fatalf("kubectl mydb backup:\n%s", r)
				}
				for _, in := range status.Instances {
					if in.Role == examplev1.InstanceRoleReplica {
						wantInstance, wantRole = in.Name, examplev1.InstanceRoleReplica
					}
				}
			default:
				if r := backupRaw(t, ns, "src", `{"metadata":{"name":"snap"},"spec":{"target":"Primary"}}`); r.err != nil {
					t.Fatal(r)
				}
				wantInstance = status.CurrentPrimary
			}
			snap := waitBackup(t, ns, "snap", 5*time.Minute)
			took := time.Since(start)
			s := snap.Status
			if s.Phase != examplev1.BackupPhaseSucceeded {
				t.Fatalf("backup %s: %s", s.Phase, s.Message)
			}
			t.Logf("%s: backup of %s (%s) %d bytes, format %s, sha256 %s, position %+v, in %s (status %s)", dc.engine.name, s.Instance, s.Role,
				s.SizeBytes, s.Format, s.Checksum, s.Position, took.Round(100*time.Millisecond), s.CompletionTime.Sub(s.StartTime.Time))
			if s.Instance != wantInstance || s.Role != wantRole || s.DatabaseUID != src.UID || s.SizeBytes <= 0 || len(s.Checksum) != 64 || s.Format == "" || s.Position == nil {
				t.Errorf("backup status %+v: want of %s (%s), of the database's UID, with size, checksum, format and position", s, wantInstance, wantRole)
			}
			obj, err := store.Stat(ctx, s.Location.S3.Key)
			if err != nil || obj.Size != s.SizeBytes {
				t.Errorf("the dump in the bucket: %+v %v, want %d bytes", obj, err, s.SizeBytes)
			}
			out := mustKubectl(t, "", "get", "mdbb", "snap", "-n", ns)
			if !strings.Contains(out, "Succeeded") || !strings.Contains(out, s.Checksum[:12]) || !strings.Contains(out, mydatabasebackup.HumanBytes(s.SizeBytes)) || !strings.Contains(out, wantInstance) {
				t.Errorf("kubectl get mdbb:\n%s\nwant the phase, instance, size and checksum", out)
			}
			t.Logf("kubectl get mdbb:\n%s", out)
			if out := mustKubectl(t, "", "get", "mdbb", "snap", "-n", ns, "-o", "wide"); !strings.Contains(out, s.Location.URI()) || !strings.Contains(out, s.Checksum) {
				t.Errorf("kubectl get mdbb -o wide:\n%s\nwant the location and the whole checksum", out)
			}

			// The restore: a new database from the backup.
			start = time.Now()
			switch dc.engine.name {
			case "postgres":
				if r := kubectlMydb(t, "restore", "snap", "--to", "copy", "-n", ns); r.err != nil {
					t.Fatalf("kubectl mydb restore:\n%s", r)
				}
			default:
				copyDB := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "copy"}, Spec: examplev1.MyDatabaseSpec{
					Engine: examplev1.Engine(dc.engine.name), Version: dc.version, Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
					RestoreFrom: &examplev1.RestoreSource{BackupName: "snap"}}}
				if _, err := admin.MyDatabases(ns).Create(ctx, copyDB, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			startRig(t, ns, "copy", dc.engine)
			loaded := restored(t, ns, "copy", 5*time.Minute)
			copyH := &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}
			copyH.waitStreaming(2)
			t.Logf("%s: restored %d bytes into copy in %s, 2 instances streaming after %s", dc.engine.name, s.SizeBytes,
				loaded.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
			dc.waitSums(t, copyH, 2, want)

			// The final backup: the last rows, then the source goes.
			dc.write(t, primary, rows, rows+20)
			wantFinal, err := dc.sums(t, primary)
			if err != nil {
				t.Fatal(err)
			}
			mustKubectl(t, "", "delete", "mdb/src", "-n", ns, "--wait=false")
			eventually(t, 5*time.Minute, func() error {
				if _, err := admin.MyDatabases(ns).Get(ctx, "src", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("src still there: %v", err)
				}
				return nil
			})
			finals, err := admin.MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{LabelSelector: names.FinalBackupLabel + "=src"})
			if err != nil || len(finals.Items) != 1 {
				t.Fatalf("final backups of src: %v %v", finals, err)
			}
			final := finals.Items[0]
			if final.Status.Phase != examplev1.BackupPhaseSucceeded || final.Status.DatabaseUID != src.UID ||
				final.Status.Role != examplev1.InstanceRolePrimary || len(final.OwnerReferences) != 0 {
				t.Errorf("final backup %s: %+v owners %v: want a succeeded backup of src's primary, owned by nothing", final.Name, final.Status, final.OwnerReferences)
			}
			// snap was src's (deletionPolicy Delete): it went, and its dump with it.
			eventually(t, reconcileTimeout, func() error {
				if _, err := admin.MyDatabaseBackups(ns).Get(ctx, "snap", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("snap still there: %v", err)
				}
				if _, err := store.Stat(ctx, s.Location.S3.Key); err == nil {
					return fmt.Errorf("snap's dump is still in the bucket")
				}
				return nil
			})

			copy2 := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "after"}, Spec: examplev1.MyDatabaseSpec{
				Engine: examplev1.Engine(dc.engine.name), Version: dc.version, Replicas: int32Ptr(1), StorageSize: quantity("1Gi"),
				RestoreFrom: &examplev1.RestoreSource{BackupName: final.Name}}}
			if _, err := admin.MyDatabases(ns).Create(ctx, copy2, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			startRig(t, ns, "after", dc.engine)
			restored(t, ns, "after", 5*time.Minute)
			dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "after"}, 1, wantFinal)
		})
	}
}

// TestRestoreInterruptedByAKill, on postgres: the primary of a database
// being restored is killed (kill -9 of the manager and its tools) in the
// middle of the load. The database is not Ready and not Restored while
// it is down; once the pod's instance runs again it awaits its data, the
// controller asks it again, and the database holds the full data.
func TestRestoreInterruptedByAKill(t *testing.T) {
	t.Parallel()
	dc := dataCases[0]
	ctx := context.Background()
	ns := newNamespace(t)
	_, dest := startS3(t, ns, "kill")
	admin := mydbClient(t, restConfig(t)).ExampleV1()
	// Some 100 MiB of blobs: a load that takes a while.
	want := dc.startSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(1), StorageSize: quantity("1Gi"),
		Backup: &examplev1.BackupPolicy{Destination: dest}}, 1500).sums
	if r := backupRaw(t, ns, "src", `{"metadata":{"name":"snap"}}`); r.err != nil {
		t.Fatal(r)
	}
	snap := waitBackup(t, ns, "snap", 5*time.Minute)
	if snap.Status.Phase != examplev1.BackupPhaseSucceeded {
		t.Fatalf("backup %s: %s", snap.Status.Phase, snap.Status.Message)
	}
	t.Logf("backup of %d bytes", snap.Status.SizeBytes)

	copyDB := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "copy"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.EnginePostgres, Version: dc.version, Replicas: int32Ptr(1), StorageSize: quantity("1Gi"),
		RestoreFrom: &examplev1.RestoreSource{BackupName: "snap"}}}
	if _, err := admin.MyDatabases(ns).Create(ctx, copyDB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rig := startRig(t, ns, "copy", dc.engine)
	var ip string
	var loadedBytes int64
	eventually(t, 3*time.Minute, func() error {
		pod, err := kubeClient(t).CoreV1().Pods(ns).Get(ctx, "copy-0", metav1.GetOptions{})
		if err != nil || pod.Status.PodIP == "" {
			return fmt.Errorf("copy-0 has no IP yet: %v", err)
		}
		ip = pod.Status.PodIP
		s := managerStatus(ip)
		if s == nil || s.Restore == nil || s.Restore.Phase != api.OperationRunning || s.Restore.Bytes == 0 {
			return fmt.Errorf("copy-0 is not loading yet: %+v", s)
		}
		loadedBytes = s.Restore.Bytes
		return nil
	})
	rig.kill("copy-0")
	t.Logf("killed copy-0 %d bytes into the load of %d", loadedBytes, snap.Status.SizeBytes)
	time.Sleep(3 * time.Second)
	d, err := admin.MyDatabases(ns).Get(ctx, "copy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if meta.IsStatusConditionTrue(d.Status.Conditions, examplev1.ConditionReady) || meta.IsStatusConditionTrue(d.Status.Conditions, examplev1.ConditionRestored) {
		t.Fatalf("copy is Ready or Restored with its load killed: %+v", d.Status.Conditions)
	}
	rig.revive("copy-0")
	took := restored(t, ns, "copy", 5*time.Minute)
	t.Logf("restored %s after the instance came back", took.Round(100*time.Millisecond))
	dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}, 1, want)
}
