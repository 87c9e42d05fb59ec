//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestScheduledBackupsAndRetention, on postgres with a real S3 server: a
// database has four earlier scheduled backups that succeeded and two that
// failed in between (a wrong secret key, refused by the bucket; a missing
// Secret); then a schedule of every minute with a retention of 3 takes a
// backup, and only the newest 3 that succeeded remain, with their dumps:
// the others are deleted, and their dumps are gone from the bucket.
func TestScheduledBackupsAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	srv, dest := startS3(t, ns, "retention")
	store := srv.Store(t)
	admin := mydbClient(t, restConfig(t)).ExampleV1()
	kube := kubeClient(t)
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.EnginePostgres, Version: "15", Replicas: int32Ptr(1), StorageSize: quantity("1Gi"),
		Backup: &examplev1.BackupPolicy{Destination: dest}}}
	if _, err := admin.MyDatabases(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startRig(t, ns, "nightly", rigPostgres)
	(&replicationHarness{t: t, tc: replicationCases[0], ns: ns, db: "nightly"}).waitStreaming(1)

	// Earlier scheduled backups, as the schedule takes them (an admin may
	// label a backup so; a backup-only user may not).
	scheduled := func(name string) *examplev1.MyDatabaseBackup {
		b := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{names.ScheduleLabel: "nightly"}},
			Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "nightly"}}
		if _, err := admin.MyDatabaseBackups(ns).Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		b = waitBackup(t, ns, name, 3*time.Minute)
		t.Logf("%s: %s %s", name, b.Status.Phase, b.Status.Message)
		time.Sleep(time.Second) // start times a second apart at least
		return b
	}
	secret, err := kube.CoreV1().Secrets(ns).Get(ctx, "s3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ok []*examplev1.MyDatabaseBackup
	ok = append(ok, scheduled("old-1"), scheduled("old-2"))

	wrong := secret.DeepCopy()
	wrong.Data["secretAccessKey"] = []byte("not-the-key")
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, wrong, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := scheduled("refused")
	if err := kube.CoreV1().Secrets(ns).Delete(ctx, "s3", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	missing := scheduled("no-secret")
	secret.ResourceVersion = ""
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ok = append(ok, scheduled("old-3"), scheduled("old-4"))
	for _, b := range ok {
		if b.Status.Phase != examplev1.BackupPhaseSucceeded {
			t.Fatalf("%s: %s %s", b.Name, b.Status.Phase, b.Status.Message)
		}
	}
	if refused.Status.Phase != examplev1.BackupPhaseFailed || missing.Status.Phase != examplev1.BackupPhaseFailed || !strings.Contains(missing.Status.Message, `"s3"`) {
		t.Fatalf("forced failures: %s %q, %s %q", refused.Status.Phase, refused.Status.Message, missing.Status.Phase, missing.Status.Message)
	}

	start := time.Now()
	mustKubectl(t, "", "patch", "mdb/nightly", "-n", ns, "--type=merge", "-p", `{"spec":{"backup":{"schedule":"* * * * *","retention":3}}}`)
	selector := labels.Set{names.ScheduleLabel: "nightly"}.String()
	var kept []examplev1.MyDatabaseBackup
	eventually(t, 4*time.Minute, func() error {
		list, err := admin.MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		var all []string
		fresh := false
		for _, b := range list.Items {
			all = append(all, b.Name+"="+string(b.Status.Phase))
			if b.Annotations[names.ScheduledForAnnotation] != "" && b.Status.Phase == examplev1.BackupPhaseSucceeded {
				fresh = true
			}
		}
		if !fresh || len(list.Items) != 3 {
			return fmt.Errorf("scheduled backups %v: want a new one succeeded and 3 in all", all)
		}
		kept = list.Items
		return nil
	})
	t.Logf("a scheduled backup was taken and the others pruned %s after the schedule was set", time.Since(start).Round(time.Second))
	var keptNames []string
	for _, b := range kept {
		if b.Status.Phase != examplev1.BackupPhaseSucceeded {
			t.Errorf("kept %s, %s: want only succeeded backups", b.Name, b.Status.Phase)
		}
		keptNames = append(keptNames, b.Name)
	}
	for _, want := range []string{"old-3", "old-4"} {
		if !slices.Contains(keptNames, want) {
			t.Errorf("kept %v, want old-3, old-4 and the new one", keptNames)
		}
	}
	if got, err := admin.MyDatabases(ns).Get(ctx, "nightly", metav1.GetOptions{}); err != nil || got.Status.LastScheduleTime == nil {
		t.Errorf("status.lastScheduleTime: %v %v", got.Status.LastScheduleTime, err)
	}

	// The bucket holds the kept backups' dumps and no other.
	eventually(t, time.Minute, func() error {
		objects, err := store.List(ctx, "retention/"+ns+"/nightly/")
		if err != nil {
			return err
		}
		var keys, wantKeys []string
		for _, o := range objects {
			keys = append(keys, o.Key)
		}
		for _, b := range kept {
			wantKeys = append(wantKeys, b.Status.Location.S3.Key)
		}
		slices.Sort(keys)
		slices.Sort(wantKeys)
		if !slices.Equal(keys, wantKeys) {
			return fmt.Errorf("the bucket holds %v, want %v", keys, wantKeys)
		}
		return nil
	})
	for _, b := range []*examplev1.MyDatabaseBackup{ok[0], ok[1], refused, missing} {
		if _, err := admin.MyDatabaseBackups(ns).Get(ctx, b.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("%s was kept", b.Name)
		}
	}
}
