//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPointInTimeRestore, with real PostgreSQL and MariaDB and a real S3
// server: a database with spec.backup.pointInTimeRecovery archives its
// log (PostgreSQL's WAL, MariaDB's binary logs; the ContinuousArchiving
// condition True, status.recoverability advancing); from a backup taken
// before two batches of writes, a new database with
// restoreFrom.pointInTime between them (the backup picked by mydb) holds
// exactly the first batch, on both its instances; a target past the window
// is a 422.
func TestPointInTimeRestore(t *testing.T) {
	t.Parallel()
	for _, dc := range dataCases {
		t.Run(dc.engine.name, func(t *testing.T) {
			t.Parallel()
			testPointInTimeRestore(t, dc)
		})
	}
}

func testPointInTimeRestore(t *testing.T, dc dataCase) {
	ctx := context.Background()
	ns := newNamespace(t)
	srv, dest := startS3(t, ns, "e2e/pitr")
	store := srv.Store(t)
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
	const rows = 100
	source := dc.startSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
		Backup: &examplev1.BackupPolicy{Destination: dest,
			PointInTimeRecovery: &examplev1.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: 10 * time.Second}}}}, rows)
	src, h, primary := source.db, source.h, source.primary

	waitArchiving(t, ns, "src", 2*time.Minute)

	if r := backupRaw(t, ns, "src", `{"metadata":{"name":"base"}}`); r.err != nil {
		t.Fatal(r)
	}
	base := waitBackup(t, ns, "base", 5*time.Minute)
	if base.Status.Phase != examplev1.BackupPhaseSucceeded {
		t.Fatalf("backup: %s", base.Status.Message)
	}

	// The first batch, then a target on a whole second after it (what
	// metav1.Time holds), then the second batch after that second.
	dc.write(t, primary, rows, rows+50)
	want, err := dc.sums(t, primary)
	if err != nil {
		t.Fatal(err)
	}
	target := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(target.Add(200 * time.Millisecond)))
	dc.write(t, primary, rows+50, rows+100)
	h.t.Logf("target %s, between the batches", target.Format(time.RFC3339))

	r, c := waitRecoverablePast(t, ns, "src", target, 2*time.Minute)
	t.Logf("recoverability %+v; %s", *r, c.Message)
	if r.FirstRecoverableTime == nil || !r.FirstRecoverableTime.Equal(base.Status.CompletionTime) {
		t.Errorf("firstRecoverableTime %v, want the base backup's end %v", r.FirstRecoverableTime, base.Status.CompletionTime)
	}
	// PostgreSQL's segments are below wal/, MariaDB's binary logs below
	// binlog/<epoch>/ (instance.WALKey, instance.BinlogKey).
	logDir := map[string]string{"postgres": "/wal/", "mariadb": "/binlog/"}[dc.engine.name]
	objects, err := store.List(ctx, "e2e/pitr/"+ns+"/src/"+string(src.UID)+logDir)
	if err != nil || len(objects) == 0 {
		t.Fatalf("the archive in the bucket: %d objects, %v", len(objects), err)
	}

	// A target past the window is refused at admission, with the window.
	tooLate := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "too-late"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.Engine(dc.engine.name), Version: dc.version, StorageSize: quantity("1Gi"),
		RestoreFrom: &examplev1.RestoreSource{BackupName: "base", PointInTime: &examplev1.RecoveryTarget{Time: &metav1.Time{Time: time.Now().Add(time.Hour)}}}}}
	_, err = dbs.Create(ctx, tooLate, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.restoreFrom.pointInTime.time") || !strings.Contains(err.Error(), "lastRecoverableTime") {
		t.Errorf("a target an hour ahead: %v, want 422 on spec.restoreFrom.pointInTime.time with the window", err)
	} else {
		t.Logf("a target an hour ahead: %v", err)
	}

	// kubectl mydb restore --database: mydb picks the backup, base, the
	// one that ended before the target; the copy is shaped like src.
	if r := kubectlMydb(t, "restore", "--database", "src", "--time", target.Format(time.RFC3339), "--to", "copy", "-n", ns); r.err != nil ||
		!strings.Contains(r.stdout, "replayed to "+target.UTC().Format(time.RFC3339)) {
		t.Fatalf("kubectl mydb restore:\n%s", r)
	}
	startRig(t, ns, "copy", dc.engine)
	took := restored(t, ns, "copy", 5*time.Minute)
	if d, err := dbs.Get(ctx, "copy", metav1.GetOptions{}); err != nil || !strings.Contains(conditionMessage(meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionRestored)), `"base"`) {
		t.Errorf("the copy's Restored condition does not name the backup picked, base: %v", err)
	}
	copyH := &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}
	copyH.waitStreaming(2)
	dc.waitSums(t, copyH, 2, want)
	t.Logf("restored to %s in %s: the first batch's rows on both instances", target.Format(time.RFC3339), took.Round(100*time.Millisecond))

	// The copy archives nothing into its source's archive.
	after, err := store.List(ctx, "e2e/pitr/"+ns+"/src/"+string(src.UID)+"/")
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[string]bool{}
	for _, o := range after {
		if strings.HasSuffix(o.Key, ".history") {
			t.Errorf("%s: a timeline history in the source's archive (the source never changed timeline)", o.Key)
		}
		if rest, ok := strings.CutPrefix(o.Key, "e2e/pitr/"+ns+"/src/"+string(src.UID)+"/binlog/"); ok {
			epoch, _, _ := strings.Cut(rest, "/")
			epochs[epoch] = true
		}
	}
	if len(epochs) > 1 {
		// Only the source's primary archived: one data directory.
		t.Errorf("binary logs of %d data directories in the source's archive, want the source primary's alone: %v", len(epochs), epochs)
	}
}
