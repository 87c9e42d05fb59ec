//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"github.com/mydb-dev/mydb/pkg/names"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestScheduledBackups: a schedule of every minute with a retention of two
// takes backups on time, and deletes the oldest beyond two.
func TestScheduledBackups(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	admin := mydbClient(t, restConfig(t)).ExampleV1()
	db := newDB("nightly", examplev1.EngineMySQL, nil)
	if _, err := admin.MyDatabases(ns).Create(ctx, db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Three old scheduled backups, finished, as if the schedule had run for
	// hours (written as the controller writes them).
	for i := 3; i >= 1; i-- {
		due := time.Now().UTC().Truncate(time.Minute).Add(-time.Duration(i) * time.Hour)
		b := &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nightly-old-%d", i),
				Labels:      map[string]string{names.ScheduleLabel: "nightly"},
				Annotations: map[string]string{names.ScheduledForAnnotation: due.Format(time.RFC3339)}},
			Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "nightly"},
		}
		created, err := admin.MyDatabaseBackups(ns).Create(ctx, b, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, reconcileTimeout, func() error {
			got, err := admin.MyDatabaseBackups(ns).Get(ctx, created.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Status.Phase != examplev1.BackupPhaseSucceeded {
				return fmt.Errorf("%s is %q", got.Name, got.Status.Phase)
			}
			return nil
		})
	}

	start := time.Now()
	mustKubectl(t, "", "patch", "mdb/nightly", "-n", ns, "--type=merge", "-p", `{"spec":{"backup":{"schedule":"* * * * *","retention":2}}}`)

	scheduled := labels.Set{names.ScheduleLabel: "nightly"}.String()
	eventually(t, 3*time.Minute, func() error {
		list, err := admin.MyDatabaseBackups(ns).List(ctx, metav1.ListOptions{LabelSelector: scheduled})
		if err != nil {
			return err
		}
		var fresh, backups []string
		for _, b := range list.Items {
			backups = append(backups, b.Name)
			due, _ := time.Parse(time.RFC3339, b.Annotations[names.ScheduledForAnnotation])
			if due.After(start.Add(-time.Minute)) {
				fresh = append(fresh, b.Name)
			}
		}
		if len(fresh) == 0 || len(list.Items) > 2 {
			return fmt.Errorf("scheduled backups %v: want a new one and at most two in all", backups)
		}
		return nil
	})
	t.Logf("a scheduled backup was taken and the oldest pruned %s after the schedule was set", time.Since(start).Round(time.Second))
	if _, err := admin.MyDatabaseBackups(ns).Get(ctx, "nightly-old-3", metav1.GetOptions{}); err == nil {
		t.Error("the oldest scheduled backup was kept")
	}
}
