//go:build e2e

package e2e

import (
	"context"
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
		s := managerStatus(t, ns, "copy-0", ip)
		if s == nil || s.Restore == nil || s.Restore.Phase != api.OperationRunning || s.Restore.Bytes == 0 {
			return fmt.Errorf("copy-0 is not loading yet: %+v", s)
		}
		loadedBytes = s.Restore.Bytes
		return nil
	})
	rig.kill("copy-0")
	t.Logf("killed copy-0 %d bytes into the load of %d", loadedBytes, snap.Status.SizeBytes)
	// Not a fixed wait: once the status says copy-0 is not ready (the
	// controller saw the kill), it must not say Ready or Restored.
	var d *examplev1.MyDatabase
	eventually(t, time.Minute, func() error {
		var err error
		if d, err = admin.MyDatabases(ns).Get(ctx, "copy", metav1.GetOptions{}); err != nil {
			return err
		}
		for _, in := range d.Status.Instances {
			if in.Name == "copy-0" && !in.Ready {
				return nil
			}
		}
		return fmt.Errorf("the status does not say copy-0 is down yet: %+v", d.Status.Instances)
	})
	if meta.IsStatusConditionTrue(d.Status.Conditions, examplev1.ConditionReady) || meta.IsStatusConditionTrue(d.Status.Conditions, examplev1.ConditionRestored) {
		t.Fatalf("copy is Ready or Restored with its load killed: %+v", d.Status.Conditions)
	}
	rig.revive("copy-0")
	took := restored(t, ns, "copy", 5*time.Minute)
	t.Logf("restored %s after the instance came back", took.Round(100*time.Millisecond))
	dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}, 1, want)
}
