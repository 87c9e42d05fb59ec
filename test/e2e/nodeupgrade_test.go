//go:build e2e && node

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/test/s3server"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeLineUpgrades: on the real node, through the aggregation layer, a
// database of two instances with rows of tricky types moves to a newer line
// when its spec.version changes, every row kept on both instances:
//   - PostgreSQL 15 -> 17 (a major): the replica's pod first, then the
//     primary's, with no switchover and no failover (no replica of 17 can
//     stream from 15); the primary's manager runs pg_upgrade --link before
//     its server starts, and the replica clones the upgraded primary;
//   - MariaDB 10.11 -> 11.8: primary last with one switchover; each
//     instance's manager runs mariadb-upgrade on its data.
//
// Each database has a backup destination: the primary is backed up before
// the first pod is replaced.
func TestNodeLineUpgrades(t *testing.T) {
	for _, c := range []struct {
		engine, from, to, versionQuery string
		switchovers                    int
	}{
		{engine: "postgres", from: "15", to: "17", versionQuery: "SHOW server_version", switchovers: 0},
		{engine: "mariadb", from: "10.11", to: "11.8", versionQuery: "SELECT VERSION()", switchovers: 1},
	} {
		t.Run(c.engine, func(t *testing.T) {
			t.Parallel()
			var dc dataCase
			for _, d := range dataCases {
				if d.engine.name == c.engine {
					dc = d
				}
			}
			for _, tc := range replicationCases {
				if tc.engine.name == c.engine {
					dc.replicationCase = tc
				}
			}
			dc.version = c.from
			ns := newNamespace(t)
			_, dest := startS3With(t, ns, "upgrade/"+c.engine, s3server.Options{Host: nodeAddress(t)})
			src := dc.createSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
				DeletionPolicy: examplev1.DeletionPolicyDelete, Backup: &examplev1.BackupPolicy{Destination: dest}}, 200, nil)
			dc.waitSums(t, src.h, 2, src.sums)
			serverVersions := func(status examplev1.MyDatabaseStatus, want string) {
				t.Helper()
				for _, in := range status.Instances {
					var v string
					if err := src.h.connect(in.Name).QueryRow(c.versionQuery).Scan(&v); err != nil {
						t.Fatalf("%s: %v", in.Name, err)
					}
					if !strings.HasPrefix(v, want+".") {
						t.Errorf("%s (%s) runs %s, want %s", in.Name, in.Role, v, want)
					}
				}
			}
			serverVersions(src.status, c.from)
			before := src.status.CurrentPrimary

			status := rollOut(t, ns, "src", src.h, 2, fmt.Sprintf(`{"spec":{"version":%q}}`, c.to), c.switchovers)
			dc.waitSums(t, src.h, 2, src.sums)
			serverVersions(status, c.to)
			if c.switchovers == 0 && status.CurrentPrimary != before {
				t.Errorf("the primary moved from %s to %s in an upgrade that has no switchover", before, status.CurrentPrimary)
			}
			// The backup of the old line, taken before the first pod went.
			name := fmt.Sprintf("src-before-%s-%s", c.engine, strings.ReplaceAll(c.to, ".", "-"))
			backup, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabaseBackups(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("the backup before the upgrade: %v", err)
			}
			if backup.Status.Phase != examplev1.BackupPhaseSucceeded || backup.Status.CompletionTime == nil {
				t.Fatalf("the backup before the upgrade: %+v", backup.Status)
			}
			pods, err := kubeClient(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=src"})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.CreationTimestamp.Before(backup.Status.CompletionTime) {
					t.Errorf("pod %s was made at %s, before the backup before the upgrade completed (%s)", p.Name, p.CreationTimestamp, backup.Status.CompletionTime)
				}
			}
			t.Logf("%s: the backup %s of %s %s (%d bytes) completed before the first pod was replaced", c.engine, name, c.engine, c.from, backup.Status.SizeBytes)
			// The upgraded primary takes writes, and its replica gets them.
			primary := src.h.connect(status.CurrentPrimary)
			dc.write(t, primary, 200, 20)
			want, err := dc.sums(t, primary)
			if err != nil {
				t.Fatal(err)
			}
			dc.waitSums(t, src.h, 2, want)
		})
	}
}
