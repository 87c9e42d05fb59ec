//go:build e2e && node

// Day-two operations on the real node: evictions against the database's
// PodDisruptionBudget, scaling through the claims local-path-provisioner
// makes, a backup to an S3 server the pods reach over the node's network,
// a restore into a new database, and a delete that takes the data with it.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/test/s3server"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// nodeDataCases are the data cases at the versions the node has images
// for. MySQL, which the rig cannot run, takes MariaDB's case with SHA-2
// checksums: MySQL 9.7 has no MD5().
func nodeDataCases() []dataCase {
	var out []dataCase
	for _, tc := range nodeReplicationCases() {
		for _, dc := range dataCases {
			switch {
			case tc.engine.name == dc.engine.name:
			case tc.engine.name == "mysql" && dc.engine.name == "mariadb":
				dc.checksums = map[string]string{
					"notes": `SELECT CONCAT(COUNT(*), ':', COALESCE(SHA2(GROUP_CONCAT(CONCAT_WS('#', id, HEX(body), HEX(raw), at, amount, doc) ORDER BY id SEPARATOR '|'), 256), '')) FROM notes`,
					"blobs": `SELECT CONCAT(COUNT(*), ':', COALESCE(SHA2(GROUP_CONCAT(CONCAT(id, '=', SHA2(data, 256)) ORDER BY id SEPARATOR '|'), 256), '')) FROM blobs`,
				}
			default:
				continue
			}
			dc.replicationCase = tc
			out = append(out, dc)
		}
	}
	return out
}

// nodeAddress is the node's InternalIP: where its pods reach this machine.
func nodeAddress(t *testing.T) string {
	t.Helper()
	nodes, err := kubeClient(t).CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	t.Fatalf("no node with an InternalIP: %+v", nodes.Items)
	return ""
}

// TestNodeOperations: for each engine, on the real node, a 3-instance
// database with rows of tricky types under deletionPolicy Delete. An
// eviction of a replica goes through and a second one, of the primary,
// is refused while the first is down (the PodDisruptionBudget); scaling
// to 5 clones two replicas that hold the rows and scaling to 2 keeps the
// primary; a change of spec.resources replaces both pods primary last
// (one switchover, no failover, every row kept); a backup goes to an S3 server the pods reach at the node's
// address, and a new database restored from it holds the same checksums
// on both its instances; deleting the source takes its claims and their
// volumes.
func TestNodeOperations(t *testing.T) {
	for _, dc := range nodeDataCases() {
		t.Run(dc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			kube := kubeClient(t)
			admin := mydbClient(t, restConfig(t)).ExampleV1()
			ns := newNamespace(t)
			srv, dest := startS3With(t, ns, "node/"+dc.engine.name, s3server.Options{Host: nodeAddress(t)})
			store := srv.Store(t)
			src := dc.createSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(3), StorageSize: quantity("1Gi"),
				DeletionPolicy: examplev1.DeletionPolicyDelete, Backup: &examplev1.BackupPolicy{Destination: dest}}, 200, nil)
			spec, h, status, want := src.db.Spec, src.h, src.status, src.sums
			dc.waitSums(t, h, 3, want)

			// Evictions, as kubectl drain asks for them.
			replica := ""
			for _, in := range status.Instances {
				if in.Role == examplev1.InstanceRoleReplica {
					replica = in.Name
				}
			}
			evict := func(pod string) error {
				return kube.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}})
			}
			eventually(t, time.Minute, func() error {
				pdb, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, names.PodDisruptionBudget("src"), metav1.GetOptions{})
				if err != nil {
					return err
				}
				if pdb.Status.DisruptionsAllowed != 1 {
					return fmt.Errorf("PodDisruptionBudget allows %d disruptions: %+v", pdb.Status.DisruptionsAllowed, pdb.Status)
				}
				return nil
			})
			evictedPod, err := kube.CoreV1().Pods(ns).Get(ctx, replica, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := evict(replica); err != nil {
				t.Fatalf("evicting the replica %s with every instance ready: %v", replica, err)
			}
			if err := evict(status.CurrentPrimary); !apierrors.IsTooManyRequests(err) {
				t.Errorf("evicting the primary %s while the replica %s is evicted: %v, want 429 (the PodDisruptionBudget)", status.CurrentPrimary, replica, err)
			} else {
				t.Logf("%s: a second eviction while %s is down: %v", dc.engine.name, replica, err)
			}
			evicted := time.Now()
			// The StatefulSet makes the pod again (a new UID), and it streams.
			eventually(t, 2*time.Minute, func() error {
				p, err := kube.CoreV1().Pods(ns).Get(ctx, replica, metav1.GetOptions{})
				if err != nil || p.UID == evictedPod.UID {
					return fmt.Errorf("the evicted pod %s is not made again yet: %v", replica, err)
				}
				return nil
			})
			status = h.waitStreaming(3)
			t.Logf("%s: the evicted replica %s streams again %s after its eviction", dc.engine.name, replica, time.Since(evicted).Round(100*time.Millisecond))

			// Scale out: two replicas cloned onto new claims; and in.
			scaled := time.Now()
			h.scale(5)
			dc.waitSums(t, h, 5, want)
			t.Logf("%s: scaled 3 -> 5, both new replicas hold the rows after %s", dc.engine.name, time.Since(scaled).Round(100*time.Millisecond))
			before := status.CurrentPrimary
			h.scale(2)
			if status = h.waitStreaming(2); status.CurrentPrimary != before {
				t.Errorf("scaling 5 -> 2 moved the primary from %s to %s", before, status.CurrentPrimary)
			}

			// A new template (spec.resources) goes out primary last: the
			// replica's pod, one switchover, then the old primary's pod.
			status = rollOutNewTemplate(t, ns, "src", h, 2)
			if status.CurrentPrimary == before {
				t.Errorf("after the rolling update the primary is still %s", before)
			}
			dc.waitSums(t, h, 2, want)

			// The backup, from the primary, into the bucket on the node's address.
			start := time.Now()
			if r := backupRaw(t, ns, "src", `{"metadata":{"name":"snap"},"spec":{"target":"Primary"}}`); r.err != nil {
				t.Fatal(r)
			}
			snap := waitBackup(t, ns, "snap", 5*time.Minute)
			took := time.Since(start)
			s := snap.Status
			if s.Phase != examplev1.BackupPhaseSucceeded {
				t.Fatalf("backup %s: %s", s.Phase, s.Message)
			}
			if obj, err := store.Stat(ctx, s.Location.S3.Key); err != nil || obj.Size != s.SizeBytes {
				t.Errorf("the dump in the bucket: %+v %v, want %d bytes", obj, err, s.SizeBytes)
			}
			t.Logf("%s: backup of %s to %s: %d bytes in %s", dc.engine.name, s.Instance, s.Location.URI(), s.SizeBytes, took.Round(100*time.Millisecond))

			// The restore into a new database.
			start = time.Now()
			copySpec := examplev1.MyDatabaseSpec{Engine: spec.Engine, Version: spec.Version, Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
				RestoreFrom: &examplev1.RestoreSource{BackupName: "snap"}}
			if _, err := admin.MyDatabases(ns).Create(ctx, &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "copy"}, Spec: copySpec}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			loaded := restored(t, ns, "copy", 5*time.Minute)
			dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}, 2, want)
			t.Logf("%s: restored %d bytes into copy: Restored after %s, both instances holding the rows after %s", dc.engine.name, s.SizeBytes,
				loaded.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))

			// Delete under deletionPolicy Delete: the claims go, and the
			// provisioner deletes their volumes.
			claims, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var volumes []string
			for _, c := range claims.Items {
				if strings.HasPrefix(c.Name, "data-src-") && c.Spec.VolumeName != "" {
					volumes = append(volumes, c.Spec.VolumeName)
				}
			}
			if len(volumes) != 5 {
				t.Errorf("src has %d bound claims, want 5 (scaling in keeps them): %v", len(volumes), volumes)
			}
			mustKubectl(t, "", "delete", "mdb/src", "-n", ns, "--timeout=3m")
			eventually(t, 3*time.Minute, func() error {
				claims, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return err
				}
				for _, c := range claims.Items {
					if strings.HasPrefix(c.Name, "data-src-") {
						return fmt.Errorf("claim %s is still there", c.Name)
					}
				}
				for _, v := range volumes {
					if _, err := kube.CoreV1().PersistentVolumes().Get(ctx, v, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("volume %s is still there: %v", v, err)
					}
				}
				return nil
			})
			if _, err := admin.MyDatabases(ns).Get(ctx, "copy", metav1.GetOptions{}); err != nil {
				t.Errorf("copy went with src: %v", err)
			}
		})
	}
}

// rollOutNewTemplate changes db's spec.resources, which needs new pods,
// and checks that every one of its n pods was made anew (a new UID) with
// exactly one switchover and no failover, every instance running the
// update revision and streaming; it returns the status then.
func rollOutNewTemplate(t *testing.T, ns, db string, h *replicationHarness, n int) examplev1.MyDatabaseStatus {
	t.Helper()
	return rollOut(t, ns, db, h, n, `{"spec":{"resources":{"requests":{"cpu":"30m"}}}}`, 1)
}

// rollOut applies the merge patch to db and waits until its n instances
// run the new template and stream, every pod replaced, with switchovers
// planned switchovers and no failover.
func rollOut(t *testing.T, ns, db string, h *replicationHarness, n int, patch string, switchovers int) examplev1.MyDatabaseStatus {
	t.Helper()
	ctx := context.Background()
	kube := kubeClient(t)
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + db})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for _, p := range pods.Items {
		uids[p.Name] = p.UID
	}
	switchoversBefore := eventCount(t, ns, failover.ReasonSwitchoverCompleted)
	failovers := eventCount(t, ns, failover.ReasonFailoverCompleted)
	start := time.Now()
	if _, err := dbs.Patch(ctx, db, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, func() error {
		d, err := dbs.Get(ctx, db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s := d.Status
		p := meta.FindStatusCondition(s.Conditions, examplev1.ConditionProgressing)
		if s.ObservedGeneration != d.Generation || int(s.UpdatedReplicas) != n || p == nil || p.Status != metav1.ConditionFalse {
			return fmt.Errorf("updated %d of %d, Progressing %s", s.UpdatedReplicas, n, conditionMessage(p))
		}
		for _, in := range s.Instances {
			if in.Revision != s.UpdateRevision {
				return fmt.Errorf("instance %s runs %s, not %s", in.Name, in.Revision, s.UpdateRevision)
			}
		}
		return nil
	})
	status := h.waitStreaming(n)
	took := time.Since(start)
	pods, err = kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + db})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if uids[p.Name] == p.UID {
			t.Errorf("pod %s was not replaced by the rolling update", p.Name)
		}
	}
	if switchovers > 0 {
		waitEvents(t, ns, failover.ReasonSwitchoverCompleted, switchoversBefore, switchovers)
	} else if got := eventCount(t, ns, failover.ReasonSwitchoverCompleted) - switchoversBefore; got != 0 {
		t.Errorf("%d switchovers during the rolling update, want none", got)
	}
	if got := eventCount(t, ns, failover.ReasonFailoverCompleted) - failovers; got != 0 {
		t.Errorf("%d failovers during the rolling update, want none", got)
	}
	t.Logf("%s/%s: rolling update (%s) of %d pods done in %s (primary now %s)", ns, db, patch, n, took.Round(100*time.Millisecond), status.CurrentPrimary)
	return status
}

// TestNodeVolumeBackup: for each engine on the real node, a
// backup to a volume destination is written by a dump-server pod (mydb's
// image, a claim of its own from local-path) that is gone once the backup
// succeeded; a new database restored from it through a read-only
// dump-server pod holds the same per-table checksums;
// deleting the backup deletes its claim.
func TestNodeVolumeBackup(t *testing.T) {
	for _, dc := range nodeDataCases() {
		t.Run(dc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			kube := kubeClient(t)
			admin := mydbClient(t, restConfig(t)).ExampleV1()
			ns := newNamespace(t)
			src := dc.createSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
				Backup: &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{Volume: &examplev1.VolumeDestination{
					StorageSize: ptrQuantity("2Gi")}}}}, 200, nil)
			spec, want := src.db.Spec, src.sums
			dc.waitSums(t, src.h, 2, want)

			start := time.Now()
			if r := backupRaw(t, ns, "src", `{"metadata":{"name":"snap"}}`); r.err != nil {
				t.Fatal(r)
			}
			snap := waitBackup(t, ns, "snap", 5*time.Minute)
			s := snap.Status
			if s.Phase != examplev1.BackupPhaseSucceeded || s.Location == nil || s.Location.Volume == nil || s.Location.Volume.ClaimName != "snap-dump" || s.SizeBytes <= 0 {
				t.Fatalf("backup %s: %s, status %+v", s.Phase, s.Message, s)
			}
			t.Logf("%s: volume backup of %s (%s) through the dump-server pod: %d bytes in %s", dc.engine.name, s.Instance, s.Role,
				s.SizeBytes, time.Since(start).Round(100*time.Millisecond))
			podGone(t, ns, "snap-dump")

			start = time.Now()
			// One instance: the node's 2 CPUs hold eight database pods'
			// default requests (250m), and the restore's dump-server pod
			// needs room beside both engines' sources and copies.
			copySpec := examplev1.MyDatabaseSpec{Engine: spec.Engine, Version: spec.Version, Replicas: int32Ptr(1), StorageSize: quantity("1Gi"),
				RestoreFrom: &examplev1.RestoreSource{BackupName: "snap"}}
			if _, err := admin.MyDatabases(ns).Create(ctx, &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "copy"}, Spec: copySpec}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			loaded := restored(t, ns, "copy", 5*time.Minute)
			dc.waitSums(t, &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "copy"}, 1, want)
			t.Logf("%s: restored %d bytes from the volume into copy: Restored after %s, its instance holding the rows after %s", dc.engine.name,
				s.SizeBytes, loaded.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
			podGone(t, ns, "copy-restore")

			mustKubectl(t, "", "delete", "mdbb/snap", "-n", ns, "--timeout=1m")
			eventually(t, 2*time.Minute, func() error {
				if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "snap-dump", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("the claim snap-dump is still there: %v", err)
				}
				return nil
			})
		})
	}
}
