package backupschedule

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/names"

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

func database(retention int32, mods ...func(*examplev1.MyDatabase)) *examplev1.MyDatabase {
	db := &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql", Namespace: "default", UID: "uid-1", CreationTimestamp: metav1.NewTime(created)},
		Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, Version: "8.4", Replicas: ptr.To[int32](1),
			StorageSize: resource.MustParse("1Gi"), Backup: &examplev1.BackupPolicy{Schedule: "0 * * * *", Retention: ptr.To(retention)}},
	}
	for _, mod := range mods {
		mod(db)
	}
	return db
}

// lastScheduled says the schedule last took the backup due at hhmm.
func lastScheduled(hhmm string) func(*examplev1.MyDatabase) {
	return func(d *examplev1.MyDatabase) { d.Status.LastScheduleTime = &metav1.Time{Time: at(hhmm)} }
}

// scheduled is a backup the controller took of the database for due, which
// started a minute later unless it is pending.
func scheduled(due time.Time, phase examplev1.BackupPhase, mods ...func(*examplev1.MyDatabaseBackup)) *examplev1.MyDatabaseBackup {
	b := &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-" + strconv.FormatInt(due.Unix(), 36), Namespace: "default",
			UID:         types.UID("uid-" + due.Format("1504")),
			Labels:      map[string]string{names.ScheduleLabel: "prod-mysql"},
			Annotations: map[string]string{names.ScheduledForAnnotation: due.Format(time.RFC3339)}},
		Spec:   examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"},
		Status: examplev1.MyDatabaseBackupStatus{Phase: phase, DatabaseUID: "uid-1"},
	}
	if phase != examplev1.BackupPhasePending {
		b.Status.StartTime = &metav1.Time{Time: due.Add(time.Minute)}
	}
	for _, mod := range mods {
		mod(b)
	}
	return b
}

// ended makes a started backup end a minute after it started.
func ended(b *examplev1.MyDatabaseBackup) {
	b.Status.CompletionTime = &metav1.Time{Time: b.Status.StartTime.Add(time.Minute)}
}

func manual(name string) *examplev1.MyDatabaseBackup {
	return &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"},
		Status: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded, DatabaseUID: "uid-1",
			StartTime: &metav1.Time{Time: created}}}
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
	c, err := NewController(client, inf.Example().V1().MyDatabases(), inf.Example().V1().MyDatabaseBackups(), nil, clocktesting.NewFakeClock(now))
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
		case "update":
			db := a.(core.UpdateAction).GetObject().(*examplev1.MyDatabase)
			writes = append(writes, "last scheduled "+db.Status.LastScheduleTime.UTC().Format("15:04"))
		case "delete":
			writes = append(writes, "delete "+a.(core.DeleteAction).GetName())
		}
	}
	return writes, next
}

func TestSchedule(t *testing.T) {
	succeeded, failed := examplev1.BackupPhaseSucceeded, examplev1.BackupPhaseFailed
	tests := []struct {
		name       string
		now        time.Time
		db         *examplev1.MyDatabase
		backups    []*examplev1.MyDatabaseBackup
		wantWrites []string
		wantNext   time.Time
	}{
		{name: "first backup an hour after creation", now: at("11:05"), db: database(7),
			wantWrites: []string{"create for 11:00", "last scheduled 11:00"}, wantNext: at("12:00")},
		{name: "a hibernated database is not backed up", now: at("14:10"), db: database(7, lastScheduled("11:00"), func(d *examplev1.MyDatabase) { d.Spec.Hibernate = true })},
		{name: "nothing due before the first time", now: at("10:30"), db: database(7), wantNext: at("11:00")},
		{name: "nothing due after a backup", now: at("11:30"), db: database(7, lastScheduled("11:00")),
			backups: []*examplev1.MyDatabaseBackup{scheduled(at("11:00"), examplev1.BackupPhaseRunning)}, wantNext: at("12:00")},
		{name: "missed times: only the latest is taken", now: at("14:10"), db: database(7, lastScheduled("11:00")),
			backups:    []*examplev1.MyDatabaseBackup{scheduled(at("11:00"), succeeded)},
			wantWrites: []string{"create for 14:00", "last scheduled 14:00"}, wantNext: at("15:00")},
		{name: "a backup labelled and annotated by a user does not move the schedule", now: at("12:05"), db: database(7, lastScheduled("11:00")),
			backups: []*examplev1.MyDatabaseBackup{scheduled(at("23:00").Add(365*24*time.Hour), examplev1.BackupPhasePending, func(b *examplev1.MyDatabaseBackup) {
				b.Name, b.Status.DatabaseUID = "forged", ""
			})},
			wantWrites: []string{"create for 12:00", "last scheduled 12:00"}, wantNext: at("13:00")},
		{name: "retention keeps the newest succeeded and prunes older ones, failed ones included", now: at("14:30"), db: database(2, lastScheduled("14:00")),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), succeeded), scheduled(at("12:00"), failed),
				scheduled(at("13:00"), succeeded), scheduled(at("14:00"), succeeded), manual("by-hand"),
			},
			wantWrites: []string{"delete " + scheduled(at("11:00"), "").Name, "delete " + scheduled(at("12:00"), "").Name},
			wantNext:   at("15:00")},
		{name: "a recovery window keeps the backups it needs beyond the count", now: at("14:30"),
			db: database(1, lastScheduled("14:00"), func(d *examplev1.MyDatabase) {
				d.Spec.Backup.PointInTimeRecovery = &examplev1.PointInTimeRecovery{RetentionWindow: &metav1.Duration{Duration: 2 * time.Hour}}
			}),
			// The window starts at 12:30: 12:00's backup (ended 12:01) is its
			// base, 11:00's is needed by nothing.
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), succeeded, ended), scheduled(at("12:00"), succeeded, ended),
				scheduled(at("13:00"), succeeded, ended), scheduled(at("14:00"), succeeded, ended),
			},
			wantWrites: []string{"delete " + scheduled(at("11:00"), "").Name},
			wantNext:   at("15:00")},
		{name: "a recovery window older than every backup keeps them all", now: at("14:30"),
			db: database(1, lastScheduled("14:00"), func(d *examplev1.MyDatabase) {
				d.Spec.Backup.PointInTimeRecovery = &examplev1.PointInTimeRecovery{RetentionWindow: &metav1.Duration{Duration: 24 * time.Hour}}
			}),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), succeeded, ended), scheduled(at("12:00"), succeeded, ended), scheduled(at("14:00"), succeeded, ended),
			},
			wantNext: at("15:00")},
		{name: "failures never push a good backup out", now: at("14:30"), db: database(2, lastScheduled("14:00")),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), succeeded), scheduled(at("12:00"), failed), scheduled(at("13:00"), failed), scheduled(at("14:00"), succeeded),
			},
			wantNext: at("15:00")},
		{name: "a schedule that keeps failing keeps only the newest failures", now: at("14:30"), db: database(2, lastScheduled("14:00")),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), failed), scheduled(at("12:00"), failed), scheduled(at("13:00"), failed), scheduled(at("14:00"), failed),
			},
			wantWrites: []string{"delete " + scheduled(at("12:00"), "").Name, "delete " + scheduled(at("11:00"), "").Name},
			wantNext:   at("15:00")},
		{name: "a running backup is not cut short", now: at("13:30"), db: database(1, lastScheduled("13:00")),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("12:00"), examplev1.BackupPhaseRunning), scheduled(at("13:00"), succeeded),
			},
			wantNext: at("14:00")},
		{name: "an earlier database's backups are not this one's", now: at("13:30"), db: database(1, lastScheduled("13:00")),
			backups: []*examplev1.MyDatabaseBackup{
				scheduled(at("11:00"), succeeded, func(b *examplev1.MyDatabaseBackup) { b.Status.DatabaseUID = "uid-0" }),
				scheduled(at("12:00"), succeeded), scheduled(at("13:00"), succeeded),
			},
			wantWrites: []string{"delete " + scheduled(at("12:00"), "").Name}, wantNext: at("14:00")},
		// Walking the schedule from year 1, or from 1970 every minute,
		// would hold a worker for minutes to hours.
		{name: "a last schedule time before the database counts from its creation", now: at("11:05"),
			db: database(7, func(d *examplev1.MyDatabase) {
				d.Spec.Backup.Schedule = "* * * * *"
				d.Status.LastScheduleTime = &metav1.Time{}
			}),
			wantWrites: []string{"create for 11:05", "last scheduled 11:05"}, wantNext: at("11:06")},
		{name: "a last schedule time decades before the database counts from its creation", now: at("10:30"),
			db: database(7, func(d *examplev1.MyDatabase) {
				d.Spec.Backup.Schedule = "* * * * *"
				d.Status.LastScheduleTime = ptr.To(metav1.Unix(0, 0))
			}),
			wantWrites: []string{"create for 10:30", "last scheduled 10:30"}, wantNext: at("10:31")},
		{name: "a last schedule time years ahead counts from the creation", now: at("11:05"),
			db: database(7, func(d *examplev1.MyDatabase) {
				d.Status.LastScheduleTime = ptr.To(metav1.NewTime(created.AddDate(10, 0, 0)))
			}),
			wantWrites: []string{"create for 11:00", "last scheduled 11:00"}, wantNext: at("12:00")},
		{name: "a last schedule time a little ahead is another replica's clock", now: at("11:05"),
			db:       database(7, lastScheduled("11:08")),
			wantNext: at("12:00")},
		{name: "no schedule", now: at("13:30"), db: database(1, func(d *examplev1.MyDatabase) { d.Spec.Backup = nil })},
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
	c, err := NewController(client, inf.Example().V1().MyDatabases(), inf.Example().V1().MyDatabaseBackups(), nil, clocktesting.NewFakeClock(at("11:05")))
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
	deletedAt := at("12:00")
	deleting := func(annotations map[string]string) *examplev1.MyDatabase {
		return database(7, func(db *examplev1.MyDatabase) {
			db.Spec.Backup = &examplev1.BackupPolicy{FinalBackup: true, Retention: ptr.To[int32](7)}
			db.Finalizers = []string{examplev1.FinalBackupFinalizer}
			db.DeletionTimestamp = &metav1.Time{Time: deletedAt}
			db.Annotations = annotations
		})
	}
	ours := "prod-mysql-final-" + strconv.FormatInt(deletedAt.Unix(), 36)
	// final is a final backup of the database named name, started at start.
	final := func(name string, phase examplev1.BackupPhase, start time.Time, mods ...func(*examplev1.MyDatabaseBackup)) *examplev1.MyDatabaseBackup {
		b := &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{names.FinalBackupLabel: "prod-mysql"}},
			Spec:       examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql", Target: examplev1.BackupTargetPrimary},
			Status:     examplev1.MyDatabaseBackupStatus{Phase: phase, DatabaseUID: "uid-1", StartTime: &metav1.Time{Time: start}},
		}
		for _, mod := range mods {
			mod(b)
		}
		return b
	}
	after, before := deletedAt.Add(30*time.Second), deletedAt.Add(-time.Hour)
	release := []string{"patch prod-mysql finalizers []"}
	take := []string{"create " + ours + " target Primary owners 0"}
	tests := []struct {
		name    string
		db      *examplev1.MyDatabase
		backups []*examplev1.MyDatabaseBackup
		want    []string
	}{
		{name: "takes the final backup of the primary, owned by nothing", db: deleting(nil), want: take},
		{name: "waits for it", db: deleting(nil), backups: []*examplev1.MyDatabaseBackup{final(ours, examplev1.BackupPhaseRunning, after)}},
		{name: "a failed one holds the database", db: deleting(nil), backups: []*examplev1.MyDatabaseBackup{final(ours, examplev1.BackupPhaseFailed, after)}},
		{name: "releases it once it succeeded", db: deleting(nil), backups: []*examplev1.MyDatabaseBackup{final(ours, examplev1.BackupPhaseSucceeded, after)},
			want: release},
		{name: "an earlier database's final backup does not release it", db: deleting(nil),
			backups: []*examplev1.MyDatabaseBackup{final("prod-mysql-final", examplev1.BackupPhaseSucceeded, after, func(b *examplev1.MyDatabaseBackup) {
				b.Status.DatabaseUID = "uid-0"
			})},
			want: take},
		{name: "a backup of this database from before the deletion does not release it", db: deleting(nil),
			backups: []*examplev1.MyDatabaseBackup{final("prod-mysql-final", examplev1.BackupPhaseSucceeded, before)},
			want:    take},
		{name: "a user's lookalike the controller never ran does not release it", db: deleting(nil),
			backups: []*examplev1.MyDatabaseBackup{final("prod-mysql-final", examplev1.BackupPhaseSucceeded, after, func(b *examplev1.MyDatabaseBackup) {
				b.Status.DatabaseUID = ""
			})},
			want: take},
		{name: "a backup the database owns does not release it: it would go with it", db: deleting(nil),
			backups: []*examplev1.MyDatabaseBackup{final("prod-mysql-nightly", examplev1.BackupPhaseSucceeded, after, func(b *examplev1.MyDatabaseBackup) {
				b.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "MyDatabase", Name: "prod-mysql", UID: "uid-1"}}
			})},
			want: take},
		{name: "the user skips it", db: deleting(map[string]string{examplev1.SkipFinalBackupAnnotation: "true"}), want: release},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objects := []runtime.Object{tc.db}
			for _, b := range tc.backups {
				objects = append(objects, b)
			}
			client := mydbfake.NewClientset(objects...)
			inf := mydbinformers.NewSharedInformerFactory(client, 0)
			c, err := NewController(client, inf.Example().V1().MyDatabases(), inf.Example().V1().MyDatabaseBackups(), nil, clocktesting.NewFakeClock(at("12:01")))
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
					b := a.(core.CreateAction).GetObject().(*examplev1.MyDatabaseBackup)
					got = append(got, fmt.Sprintf("create %s target %s owners %d", b.Name, b.Spec.Target, len(b.OwnerReferences)))
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
