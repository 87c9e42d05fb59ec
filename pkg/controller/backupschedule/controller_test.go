package backupschedule

import (
	"context"
	"fmt"
	"github.com/mydb-dev/mydb/pkg/names"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var created = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func at(hhmm string) time.Time {
	t, err := time.Parse("15:04", hhmm)
	if err != nil {
		panic(err)
	}
	return created.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute - 10*time.Hour)
}

func database(retention int32) *examplev1.MyDatabase {
	return &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql", Namespace: "default", CreationTimestamp: metav1.NewTime(created)},
		Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, Version: "8.4", Replicas: ptr.To[int32](1),
			StorageSize: resource.MustParse("1Gi"), Backup: &examplev1.BackupPolicy{Schedule: "0 * * * *", Retention: ptr.To(retention)}},
	}
}

// scheduled is a backup the controller took for due.
func scheduled(due time.Time, phase examplev1.BackupPhase) *examplev1.MyDatabaseBackup {
	return &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-" + strconv.FormatInt(due.Unix(), 36), Namespace: "default",
			UID:         types.UID("uid-" + due.Format("1504")),
			Labels:      map[string]string{names.ScheduleLabel: "prod-mysql"},
			Annotations: map[string]string{names.ScheduledForAnnotation: due.Format(time.RFC3339)}},
		Spec:   examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"},
		Status: examplev1.MyDatabaseBackupStatus{Phase: phase},
	}
}

func manual(name string) *examplev1.MyDatabaseBackup {
	return &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"}, Status: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded}}
}

// run syncs the database at now and returns the writes and the next due time.
func run(t *testing.T, now time.Time, db *examplev1.MyDatabase, backups ...*examplev1.MyDatabaseBackup) ([]string, time.Time) {
	t.Helper()
	objects := []runtime.Object{db}
	for _, b := range backups {
		objects = append(objects, b)
	}
	client := mydbfake.NewClientset(objects...)
	inf := mydbinformers.NewSharedInformerFactory(client, 0)
	c, err := NewController(client, inf.Example().V1().MyDatabases(), inf.Example().V1().MyDatabaseBackups(), clocktesting.NewFakeClock(now))
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Example().V1().MyDatabases().Informer().GetIndexer().Add(db); err != nil {
		t.Fatal(err)
	}
	for _, b := range backups {
		if err := inf.Example().V1().MyDatabaseBackups().Informer().GetIndexer().Add(b); err != nil {
			t.Fatal(err)
		}
	}
	next, err := c.sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "prod-mysql"})
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, a := range client.Actions() {
		switch a.GetVerb() {
		case "create":
			b := a.(core.CreateAction).GetObject().(*examplev1.MyDatabaseBackup)
			writes = append(writes, "create for "+b.Annotations[names.ScheduledForAnnotation][11:16])
		case "delete":
			writes = append(writes, "delete "+a.(core.DeleteAction).GetName())
		}
	}
	return writes, next
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name       string
		now        time.Time
		db         *examplev1.MyDatabase
		backups    []*examplev1.MyDatabaseBackup
		wantWrites []string
		wantNext   time.Time
	}{
		{name: "first backup an hour after creation", now: at("11:05"), db: database(7),
			wantWrites: []string{"create for 11:00"}, wantNext: at("12:00")},
		{name: "nothing due before the first time", now: at("10:30"), db: database(7), wantNext: at("11:00")},
		{name: "nothing due after a backup", now: at("11:30"), db: database(7),
			backups: []*examplev1.MyDatabaseBackup{scheduled(at("11:00"), examplev1.BackupPhaseRunning)}, wantNext: at("12:00")},
		{name: "missed times: only the latest is taken", now: at("14:10"), db: database(7),
			backups:    []*examplev1.MyDatabaseBackup{scheduled(at("11:00"), examplev1.BackupPhaseSucceeded)},
			wantWrites: []string{"create for 14:00"}, wantNext: at("15:00")},
		{name: "retention prunes the oldest finished", now: at("14:01"), db: database(2),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), examplev1.BackupPhaseSucceeded), scheduled(at("12:00"), examplev1.BackupPhaseFailed),
				scheduled(at("13:00"), examplev1.BackupPhaseSucceeded), manual("by-hand"),
			},
			wantWrites: []string{"create for 14:00", "delete " + scheduled(at("11:00"), "").Name, "delete " + scheduled(at("12:00"), "").Name},
			wantNext:   at("15:00")},
		{name: "a running backup is not cut short", now: at("13:30"), db: database(1),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("12:00"), examplev1.BackupPhaseRunning), scheduled(at("13:00"), examplev1.BackupPhaseSucceeded),
			},
			wantWrites: nil, wantNext: at("14:00")},
		{name: "no schedule", now: at("13:30"), db: func() *examplev1.MyDatabase { d := database(1); d.Spec.Backup = nil; return d }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			writes, next := run(t, tc.now, tc.db, tc.backups...)
			if diff := cmp.Diff(tc.wantWrites, writes); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if !next.Equal(tc.wantNext) {
				t.Errorf("next due %v, want %v", next, tc.wantNext)
			}
		})
	}
}

func TestTakingTheSameBackupTwiceIsHarmless(t *testing.T) {
	// Another leader took it already; this cache has not seen it yet.
	db := database(7)
	existing := scheduled(at("11:00"), examplev1.BackupPhasePending)
	client := mydbfake.NewClientset(db, existing)
	inf := mydbinformers.NewSharedInformerFactory(client, 0)
	c, err := NewController(client, inf.Example().V1().MyDatabases(), inf.Example().V1().MyDatabaseBackups(), clocktesting.NewFakeClock(at("11:05")))
	if err != nil {
		t.Fatal(err)
	}
	if err := inf.Example().V1().MyDatabases().Informer().GetIndexer().Add(db); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "prod-mysql"}); err != nil {
		t.Fatalf("a backup that already exists: %v", err)
	}
	list, _ := client.ExampleV1().MyDatabaseBackups("default").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Errorf("%d backups, want 1", len(list.Items))
	}
}

func TestFinalBackup(t *testing.T) {
	deleting := func(annotations map[string]string) *examplev1.MyDatabase {
		db := database(7)
		db.Spec.Backup = &examplev1.BackupPolicy{FinalBackup: true, Retention: ptr.To[int32](7)}
		db.Finalizers = []string{examplev1.FinalBackupFinalizer}
		db.DeletionTimestamp = &metav1.Time{Time: at("12:00")}
		db.Annotations = annotations
		return db
	}
	final := func(phase examplev1.BackupPhase) *examplev1.MyDatabaseBackup {
		return &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-final", Namespace: "default", Labels: map[string]string{names.FinalBackupLabel: "prod-mysql"}},
			Spec:       examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"}, Status: examplev1.MyDatabaseBackupStatus{Phase: phase},
		}
	}
	tests := []struct {
		name    string
		db      *examplev1.MyDatabase
		backups []*examplev1.MyDatabaseBackup
		want    []string
	}{
		{name: "takes the final backup", db: deleting(nil), want: []string{"create prod-mysql-final"}},
		{name: "waits for it", db: deleting(nil), backups: []*examplev1.MyDatabaseBackup{final(examplev1.BackupPhaseRunning)}},
		{name: "a failed one holds the database", db: deleting(nil), backups: []*examplev1.MyDatabaseBackup{final(examplev1.BackupPhaseFailed)}},
		{name: "releases it once it succeeded", db: deleting(nil), backups: []*examplev1.MyDatabaseBackup{final(examplev1.BackupPhaseSucceeded)},
			want: []string{"patch prod-mysql finalizers []"}},
		{name: "the user skips it", db: deleting(map[string]string{examplev1.SkipFinalBackupAnnotation: "true"}),
			want: []string{"patch prod-mysql finalizers []"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objects := []runtime.Object{tc.db}
			for _, b := range tc.backups {
				objects = append(objects, b)
			}
			client := mydbfake.NewClientset(objects...)
			inf := mydbinformers.NewSharedInformerFactory(client, 0)
			c, err := NewController(client, inf.Example().V1().MyDatabases(), inf.Example().V1().MyDatabaseBackups(), clocktesting.NewFakeClock(at("12:01")))
			if err != nil {
				t.Fatal(err)
			}
			if err := inf.Example().V1().MyDatabases().Informer().GetIndexer().Add(tc.db); err != nil {
				t.Fatal(err)
			}
			for _, b := range tc.backups {
				if err := inf.Example().V1().MyDatabaseBackups().Informer().GetIndexer().Add(b); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := c.sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "prod-mysql"}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range client.Actions() {
				switch a.GetVerb() {
				case "create":
					got = append(got, "create "+a.(core.CreateAction).GetObject().(*examplev1.MyDatabaseBackup).Name)
				case "patch":
					db, err := client.Tracker().Get(a.GetResource(), "default", a.(core.PatchAction).GetName())
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, fmt.Sprintf("patch %s finalizers %v", db.(*examplev1.MyDatabase).Name, db.(*examplev1.MyDatabase).Finalizers))
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}
