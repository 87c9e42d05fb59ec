//go:build e2e && node

package e2e

import (
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/test/s3server"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodePointInTimeAndHibernation, PostgreSQL, MariaDB and MySQL on the
// real node with the pods exactly as mydb writes them: PostgreSQL's
// archive_command runs mydb-instance inside the database container and
// reaches its manager over the run directory's socket, MariaDB's and
// MySQL's managers archive the binary logs themselves, each into a real
// S3 server on the node's address; a database restored to a second between two batches
// holds the first; then the source hibernates (no pod, claims kept) and
// wakes with every row, its primary unchanged. One engine after the other.
func TestNodePointInTimeAndHibernation(t *testing.T) {
	ran := map[string]bool{}
	for _, dc := range nodeDataCases() {
		ran[dc.engine.name] = true
		t.Run(dc.engine.name, func(t *testing.T) { testNodePointInTimeAndHibernation(t, dc) })
	}
	if !ran["postgres"] || !ran["mariadb"] || !ran["mysql"] {
		t.Fatalf("the node's engines are %v, want postgres, mariadb and mysql", ran)
	}
}

func testNodePointInTimeAndHibernation(t *testing.T, dc dataCase) {
	ns := newNamespace(t)
	_, dest := startS3With(t, ns, "node/pitr", s3server.Options{Host: nodeAddress(t)})
	src := dc.createSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
		Backup: &examplev1.BackupPolicy{Destination: dest,
			PointInTimeRecovery: &examplev1.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: 10 * time.Second}}}}, 100, nil)
	h, primary := src.h, src.primary
	waitArchiving(t, ns, "src", 3*time.Minute)
	if r := backupRaw(t, ns, "src", `{"metadata":{"name":"base"}}`); r.err != nil {
		t.Fatal(r)
	}
	if b := waitBackup(t, ns, "base", 5*time.Minute); b.Status.Phase != examplev1.BackupPhaseSucceeded {
		t.Fatalf("backup: %s", b.Status.Message)
	}
	dc.write(t, primary, 100, 150)
	first, err := dc.sums(t, primary)
	if err != nil {
		t.Fatal(err)
	}
	// MariaDB's and MySQL's position after the first batch: the GTID of
	// its last transaction (nothing else writes).
	positionQuery := map[string]string{"mariadb": "SELECT @@global.gtid_binlog_pos", "mysql": "SELECT @@global.gtid_executed"}[dc.engine.name]
	var lastOfFirst string
	if positionQuery != "" {
		var executed string
		if err := primary.QueryRow(positionQuery).Scan(&executed); err != nil {
			t.Fatal(err)
		}
		p, err := binlog.ParsePosition(executed)
		if err != nil || len(p) != 1 {
			t.Fatalf("the primary's position %q: %v, want one stream", executed, err)
		}
		lastOfFirst = p[0].String()
	}
	target := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(target.Add(200 * time.Millisecond)))
	dc.write(t, primary, 150, 200)
	all, err := dc.sums(t, primary)
	if err != nil {
		t.Fatal(err)
	}
	waitRecoverablePast(t, ns, "src", target, 2*time.Minute)
	if r := kubectlMydb(t, "restore", "--database", "src", "--time", target.Format(time.RFC3339), "--to", "copy", "-n", ns); r.err != nil {
		t.Fatalf("kubectl mydb restore:\n%s", r)
	}
	took := restored(t, ns, "copy", 5*time.Minute)
	dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}, 2, first)
	t.Logf("restored to %s in %s on the real node: the first batch on both instances", target.Format(time.RFC3339), took.Round(100*time.Millisecond))

	if lastOfFirst != "" {
		// To the first batch's last transaction, by its GTID.
		if r := kubectlMydb(t, "restore", "--database", "src", "--gtid", lastOfFirst, "--to", "copy-gtid", "-n", ns); r.err != nil ||
			!strings.Contains(r.stdout, "replayed to GTID "+lastOfFirst) {
			t.Fatalf("kubectl mydb restore --gtid:\n%s", r)
		}
		took := restored(t, ns, "copy-gtid", 5*time.Minute)
		dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy-gtid"}, 2, first)
		t.Logf("restored to GTID %s in %s on the real node: the first batch on both instances", lastOfFirst, took.Round(100*time.Millisecond))
	}

	before := h.waitStreaming(2)
	if r := kubectlMydb(t, "hibernate", "src", "-n", ns); r.err != nil {
		t.Fatal(r)
	}
	start := time.Now()
	waitHibernated(t, ns, "src", 3*time.Minute)
	t.Logf("hibernated in %s on the real node", time.Since(start).Round(100*time.Millisecond))
	if r := kubectlMydb(t, "wake", "src", "-n", ns); r.err != nil {
		t.Fatal(r)
	}
	start = time.Now()
	after := h.waitStreaming(2)
	t.Logf("woke in %s on the real node, primary %s", time.Since(start).Round(100*time.Millisecond), after.CurrentPrimary)
	if after.CurrentPrimary != before.CurrentPrimary {
		t.Errorf("woke with primary %s, hibernated with %s", after.CurrentPrimary, before.CurrentPrimary)
	}
	dc.waitSums(t, h, 2, all)
	if out := mustKubectl(t, "", "get", "mdb", "src", "-n", ns, "-o", "wide"); !strings.Contains(out, "RECOVERABLE TO") {
		t.Errorf("kubectl get mdb -o wide:\n%s", out)
	}
}
