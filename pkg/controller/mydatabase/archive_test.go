package mydatabase

import (
	"context"
	"encoding/json"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	"github.com/mydb-dev/mydb/test/s3server"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakeArchives records PUT /v1/archive and answers configured: with
// counts of kept, if set, as a manager keeps its counts.
type fakeArchives struct {
	requests []api.ArchiveRequest
	to       []string
	kept     *api.ArchiveStatus
}

func (f *fakeArchives) SetArchive(_ context.Context, address string, auth api.Auth, req api.ArchiveRequest) (*api.ArchiveStatus, error) {
	f.requests = append(f.requests, req)
	f.to = append(f.to, address+" "+auth.Name)
	st := &api.ArchiveStatus{}
	if f.kept != nil {
		*st = *f.kept
	}
	st.Configured, st.Prefix, st.Credentials = true, instance.ArchiveURL(req.Destination), instance.ArchiveCredentials(req.Destination)
	return st, nil
}

// A key rotated in the user's Secret reaches the managers within
// archiveCredentialsCheck, at the cost of one read of the Secret per
// database per check, not per sync.
func TestRotatedArchiveCredentialsAreSentWithinACheck(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase(withPointInTimeRecovery))
	archived := now.Add(-30 * time.Second).UTC()
	primary := statuses["10.244.0.10"]
	primary.Archive = &api.ArchiveStatus{Archived: 1, LastArchived: "000000010000000000000001", LastArchivedTime: &archived}
	statuses["10.244.0.10"] = primary
	f := newFixture(t, []*examplev1.MyDatabase{db}, append(children, runtime.Object(s3Secret()))...)
	f.statuses = statuses
	archives := &fakeArchives{}
	f.archives = archives
	c := f.newController()
	clk := clocktesting.NewFakePassiveClock(now)
	c.clock = clk
	key := cache.ObjectName{Namespace: db.Namespace, Name: db.Name}
	secretReads := func() int {
		n := 0
		for _, a := range f.kubeClient.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
				n++
			}
		}
		return n
	}
	// The manager answers with what it was last sent.
	syncAnswering := func() {
		t.Helper()
		if n := len(archives.requests); n > 0 {
			primary.Archive.Configured, primary.Archive.Prefix = true, instance.ArchiveURL(archives.requests[n-1].Destination)
			primary.Archive.Credentials = instance.ArchiveCredentials(archives.requests[n-1].Destination)
			statuses["10.244.0.10"] = primary
		}
		if err := c.sync(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}
	syncAnswering()
	if len(archives.requests) != 1 || secretReads() != 1 {
		t.Fatalf("first sync: %d archive requests, %d Secret reads; want 1, 1", len(archives.requests), secretReads())
	}
	rotated := s3Secret()
	rotated.Data["key"] = []byte("n3w")
	if _, err := f.kubeClient.CoreV1().Secrets("default").Update(context.Background(), rotated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(now.Add(archiveCredentialsCheck / 2))
	syncAnswering()
	if len(archives.requests) != 1 || secretReads() != 1 {
		t.Fatalf("within the check interval: %d archive requests, %d Secret reads; want 1, 1 (no read per sync)", len(archives.requests), secretReads())
	}
	clk.SetTime(now.Add(archiveCredentialsCheck))
	syncAnswering()
	if len(archives.requests) != 2 || archives.requests[1].Destination.SecretAccessKey != "n3w" {
		t.Fatalf("after the check interval: requests %+v, want the rotated key sent", archives.requests)
	}
	expectEvent(t, f.recorder, "Normal ArchiveCredentialsChanged")
	clk.SetTime(now.Add(2 * archiveCredentialsCheck))
	syncAnswering()
	if len(archives.requests) != 2 {
		t.Fatalf("a manager holding the Secret's key was sent it again: %d requests", len(archives.requests))
	}
}

func withPointInTimeRecovery(d *examplev1.MyDatabase) {
	d.Spec.Engine, d.Spec.Version = examplev1.EnginePostgres, "17"
	d.Spec.Replicas = ptr.To[int32](1)
	d.Spec.Backup = &examplev1.BackupPolicy{Retention: ptr.To[int32](7), Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
		Endpoint: "http://127.0.0.1:9000", Bucket: "backups", Prefix: "prod",
		CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "key"},
	}}, PointInTimeRecovery: &examplev1.PointInTimeRecovery{ArchiveTimeout: &metav1.Duration{Duration: time.Minute}}}
}

func TestPointInTimeRecoveryMakesTheInstancesArchive(t *testing.T) {
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase(withPointInTimeRecovery)})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
	args := sts.Spec.Template.Spec.Containers[0].Args
	if !slices.Contains(args, "--wal-archive") || !slices.Contains(args, "--archive-timeout=1m0s") {
		t.Errorf("instance manager args %v: want --wal-archive --archive-timeout=1m0s", args)
	}
}

func TestArchiveIsSentAndItsWindowReported(t *testing.T) {
	recoverable := now.Add(-time.Minute).UTC()
	archived := now.Add(-30 * time.Second).UTC()
	failed := now.Add(-10 * time.Second).UTC()
	for _, tc := range []struct {
		name       string
		archive    *api.ArchiveStatus
		wantSent   bool
		wantStatus metav1.ConditionStatus
		wantReason string
		wantEvent  string
	}{
		{name: "a manager that does not know where", archive: &api.ArchiveStatus{}, wantSent: true,
			wantStatus: metav1.ConditionFalse, wantReason: ReasonArchiveStarting},
		{name: "a manager told another archive", archive: &api.ArchiveStatus{Configured: true, Prefix: "http://127.0.0.1:9000/backups/elsewhere"}, wantSent: true,
			wantStatus: metav1.ConditionFalse, wantReason: ReasonArchiveStarting},
		{name: "archiving", archive: &api.ArchiveStatus{Configured: true, Prefix: "http://127.0.0.1:9000/backups/prod/default/prod-mysql/uid-1",
			Archived: 12, LastArchived: "000000010000000000000009", LastArchivedTime: &archived, LastRecoverableTime: &recoverable},
			wantStatus: metav1.ConditionTrue, wantReason: ReasonArchiving},
		{name: "failing", archive: &api.ArchiveStatus{Configured: true, Prefix: "http://127.0.0.1:9000/backups/prod/default/prod-mysql/uid-1",
			Archived: 12, LastArchived: "000000010000000000000009", LastArchivedTime: &archived, LastRecoverableTime: &recoverable,
			Failed: 3, LastFailure: "000000010000000000000010: AccessDenied", LastFailureTime: &failed, Pending: 4},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonArchiveFailing, wantEvent: "Warning ArchiveFailing"},
		{name: "lagging", archive: &api.ArchiveStatus{Configured: true, Prefix: "http://127.0.0.1:9000/backups/prod/default/prod-mysql/uid-1",
			Archived: 12, LastArchived: "000000010000000000000009", LastArchivedTime: ptr.To(now.Add(-10 * time.Minute).UTC()), LastRecoverableTime: &recoverable, Pending: 9},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonArchiveLagging, wantEvent: "Warning ArchiveLagging"},
		{name: "a manager uploading with a rotated-out key", archive: &api.ArchiveStatus{Configured: true, Prefix: "http://127.0.0.1:9000/backups/prod/default/prod-mysql/uid-1",
			Credentials: instance.ArchiveCredentials(api.S3Object{AccessKeyID: "AKID", SecretAccessKey: "old"}),
			Archived:    12, LastArchived: "000000010000000000000009", LastArchivedTime: &archived, LastRecoverableTime: &recoverable}, wantSent: true,
			wantStatus: metav1.ConditionTrue, wantReason: ReasonArchiving, wantEvent: "Normal ArchiveCredentialsChanged"},
		{name: "a manager uploading with the Secret's key", archive: &api.ArchiveStatus{Configured: true, Prefix: "http://127.0.0.1:9000/backups/prod/default/prod-mysql/uid-1",
			Credentials: instance.ArchiveCredentials(api.S3Object{Endpoint: "http://127.0.0.1:9000", Bucket: "backups", Key: "prod/default/prod-mysql/uid-1", AccessKeyID: "AKID", SecretAccessKey: "s3cret"}),
			Archived:    12, LastArchived: "000000010000000000000009", LastArchivedTime: &archived, LastRecoverableTime: &recoverable},
			wantStatus: metav1.ConditionTrue, wantReason: ReasonArchiving},
		{name: "a primary without --wal-archive yet", wantStatus: metav1.ConditionFalse, wantReason: ReasonArchiveNotConfigured},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase(withPointInTimeRecovery))
			primary := statuses["10.244.0.10"]
			primary.Archive = tc.archive
			statuses["10.244.0.10"] = primary
			f := newFixture(t, []*examplev1.MyDatabase{db}, append(children, runtime.Object(s3Secret()))...)
			f.statuses = statuses
			archives := &fakeArchives{kept: tc.archive}
			f.archives = archives
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			if sent := len(archives.requests) > 0; sent != tc.wantSent {
				t.Fatalf("archive requests %+v, want sent %v", archives.requests, tc.wantSent)
			}
			if tc.wantSent {
				d := archives.requests[0].Destination
				if d.Key != "prod/default/prod-mysql/uid-1" || d.AccessKeyID != "AKID" || d.SecretAccessKey != "s3cret" || archives.to[0] != "10.244.0.10 prod-mysql-0" {
					t.Errorf("sent %+v to %v", d, archives.to)
				}
			}
			// Converged already, a database whose archive stands still
			// costs no status write.
			status := db.Status
			if tc.archive != nil {
				status = updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			}
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionContinuousArchiving)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason {
				t.Fatalf("ContinuousArchiving = %+v, want %s/%s", c, tc.wantStatus, tc.wantReason)
			}
			if tc.wantReason == ReasonArchiveFailing && !strings.Contains(c.Message, "AccessDenied") {
				t.Errorf("message %q does not say why", c.Message)
			}
			if tc.archive != nil && tc.archive.LastRecoverableTime != nil {
				r := status.Recoverability
				if r == nil || !r.LastRecoverableTime.Time.Equal(recoverable.Truncate(time.Second)) || r.LastArchivedWAL != "000000010000000000000009" || r.ArchivingSince == nil {
					t.Errorf("recoverability %+v", r)
				}
			}
			if tc.archive != nil && status.Recoverability != nil && status.Recoverability.PendingWALFiles != int32(tc.archive.Pending) {
				t.Errorf("pendingWALFiles %d, want %d", status.Recoverability.PendingWALFiles, tc.archive.Pending)
			}
			if tc.wantEvent != "" {
				expectEvent(t, f.recorder, tc.wantEvent)
			}
		})
	}
}

func TestRestoreToAPointSendsTheSourcesArchive(t *testing.T) {
	target := metav1.NewTime(now.Add(-time.Hour))
	for _, tc := range []struct {
		name        string
		completion  *metav1.Time
		wantRefusal string
	}{
		{name: "a target after the backup"},
		{name: "a target before the backup ended", completion: ptr.To(metav1.NewTime(now.Add(-30 * time.Minute))), wantRefusal: "is not after MyDatabaseBackup"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, ops := restoringState(t, api.Status{AwaitingRestore: true}, nil)
			f.dbs[0].Spec.RestoreFrom.PointInTime = &examplev1.RecoveryTarget{Time: &target}
			for _, obj := range f.kubeObjects {
				if b, ok := obj.(*examplev1.MyDatabaseBackup); ok {
					b.Status.CompletionTime = tc.completion
				}
			}
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored)
			if tc.wantRefusal != "" {
				if len(ops.restores) != 0 || c == nil || c.Reason != ReasonRestoreFailed || !strings.Contains(c.Message, tc.wantRefusal) {
					t.Errorf("restores %+v, Restored %+v: want a refusal saying %q", ops.restores, c, tc.wantRefusal)
				}
				return
			}
			if len(ops.restores) != 1 {
				t.Fatalf("restore requests %+v", ops.restores)
			}
			req := ops.restores[0]
			if req.Archive == nil || req.Archive.Key != "default/prod-mysql/uid-1" || req.Archive.AccessKeyID != "AKID" ||
				req.Target == nil || req.Target.Time == nil || !req.Target.Time.Equal(target.Time) {
				t.Errorf("archive %+v, target %+v", req.Archive, req.Target)
			}
		})
	}
}

// fakePruner records the prunes asked for.
type fakePruner struct {
	archives []api.S3Object
	cuts     []pitrwindow.Cut
	deleted  int
}

func (f *fakePruner) PruneArchive(_ context.Context, archive api.S3Object, cut pitrwindow.Cut) (int, error) {
	f.archives, f.cuts = append(f.archives, archive), append(f.cuts, cut)
	return f.deleted, nil
}

func TestArchiveIsPrunedBelowTheWindowsBase(t *testing.T) {
	backupOf := func(name string, endedAgo time.Duration, lsn string, mods ...func(*examplev1.MyDatabaseBackup)) *examplev1.MyDatabaseBackup {
		end := metav1.NewTime(now.Add(-endedAgo))
		b := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"},
			Status: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded, DatabaseUID: "uid-1", CompletionTime: &end,
				Position: &examplev1.InstancePosition{LSN: lsn},
				Location: &examplev1.BackupLocation{S3: &examplev1.S3Location{Key: "prod/default/prod-mysql/uid-1/" + name}}}}
		for _, mod := range mods {
			mod(b)
		}
		return b
	}
	withWindow := func(d *examplev1.MyDatabase) {
		withPointInTimeRecovery(d)
		d.Spec.Backup.PointInTimeRecovery.RetentionWindow = &metav1.Duration{Duration: 2 * time.Hour}
	}
	for _, tc := range []struct {
		name    string
		backups []runtime.Object
		wantCut []pitrwindow.Cut
	}{
		{"below the newest backup that ended before the window", []runtime.Object{
			backupOf("old", 5*time.Hour, "0/3000028"), backupOf("base", 3*time.Hour, "0/5000100"), backupOf("recent", time.Hour, "0/9000028"),
		}, []pitrwindow.Cut{{Segment: 5}}},
		{"a MariaDB base: what its GTID position holds, closed before it began", []runtime.Object{
			backupOf("base", 3*time.Hour, "", func(b *examplev1.MyDatabaseBackup) {
				b.Status.Position = &examplev1.InstancePosition{GTID: "0-1-42"}
				b.Status.StartTime = ptr.To(metav1.NewTime(now.Add(-4 * time.Hour)))
			}),
		}, []pitrwindow.Cut{{GTID: "0-1-42", Began: now.Add(-4 * time.Hour).Truncate(time.Second)}}},
		{"nothing when every backup is within the window", []runtime.Object{backupOf("recent", time.Hour, "0/9000028")}, nil},
		{"nothing when the base's position is unknown", []runtime.Object{
			backupOf("base", 3*time.Hour, "", func(b *examplev1.MyDatabaseBackup) { b.Status.Position = nil }),
		}, nil},
		{"another database's backups are no base", []runtime.Object{
			backupOf("earlier-db", 3*time.Hour, "0/5000100", func(b *examplev1.MyDatabaseBackup) { b.Status.DatabaseUID = "uid-0" }),
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase(withWindow))
			f := newFixture(t, []*examplev1.MyDatabase{db}, append(append(children, runtime.Object(s3Secret())), tc.backups...)...)
			f.statuses = statuses
			pruner := &fakePruner{deleted: 7}
			f.pruner = pruner
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantCut, pruner.cuts); diff != "" {
				t.Fatalf("cuts (-want +got):\n%s", diff)
			}
			if len(tc.wantCut) > 0 {
				if a := pruner.archives[0]; a.Key != "prod/default/prod-mysql/uid-1" || a.AccessKeyID != "AKID" {
					t.Errorf("pruned %+v", a)
				}
				expectEvent(t, f.recorder, "Normal ArchivePruned")
			}
		})
	}
}

func TestS3ArchivePrunerDeletesOnlyBelowTheCut(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	store := srv.Store(t)
	ctx := context.Background()
	names := []string{"000000010000000000000003", "000000010000000000000004", "000000010000000000000004.partial",
		"000000010000000000000004.00000028.backup", "00000002.history", "000000010000000000000005", "000000020000000000000005",
		"000000020000000000000006"}
	for _, n := range names {
		if _, err := store.Put(ctx, "shop/uid/wal/"+n, strings.NewReader(n)); err != nil {
			t.Fatal(err)
		}
	}
	// Another database's archive under a longer prefix is not this one's.
	if _, err := store.Put(ctx, "shop/uid-2/wal/000000010000000000000001", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	deleted, err := S3ArchivePruner{}.PruneArchive(ctx, api.S3Object{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket,
		Key: "shop/uid", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}, pitrwindow.Cut{Segment: 5})
	if err != nil || deleted != 4 {
		t.Fatalf("deleted %d, %v; want 4", deleted, err)
	}
	got := keysUnder(t, store, "shop/")
	want := []string{"shop/uid-2/wal/000000010000000000000001", "shop/uid/wal/000000010000000000000005", "shop/uid/wal/00000002.history",
		"shop/uid/wal/000000020000000000000005", "shop/uid/wal/000000020000000000000006"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("left in the bucket (-want +got):\n%s", diff)
	}
}

func TestRestoreToAPointPicksTheBackup(t *testing.T) {
	target := metav1.NewTime(now.Add(-time.Hour))
	f, ops := restoringState(t, api.Status{AwaitingRestore: true}, nil)
	f.dbs[0].Spec.RestoreFrom = &examplev1.RestoreSource{DatabaseName: "prod-mysql", PointInTime: &examplev1.RecoveryTarget{Time: &target}}
	f.dbs[0].CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
	for _, obj := range f.kubeObjects {
		if b, ok := obj.(*examplev1.MyDatabaseBackup); ok {
			b.Status.CompletionTime = ptr.To(metav1.NewTime(now.Add(-2 * time.Hour)))
		}
	}
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(ops.restores) != 1 || ops.restores[0].ID != "uid-1-uid-nightly" || ops.restores[0].Archive == nil {
		t.Fatalf("restore requests %+v, want nightly's with its archive", ops.restores)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored); c == nil || !strings.Contains(c.Message, `"nightly"`) {
		t.Errorf("Restored = %+v, want it to name the backup picked", c)
	}
}

// TestS3ArchivePrunerDeletesTheBinlogsTheBaseHolds: of a MariaDB archive,
// the files (and their manifests) the base's GTID position holds that
// closed before it began go; the ones closed after, another prefix's and
// the WAL stay.
func TestS3ArchivePrunerDeletesTheBinlogsTheBaseHolds(t *testing.T) {
	srv := s3server.Start(t, s3server.Options{})
	store := srv.Store(t)
	ctx := context.Background()
	began := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	put := func(key string, end string, closed time.Duration) {
		t.Helper()
		p, err := binlog.ParsePosition(end)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(instance.BinlogManifest{File: path.Base(key), Size: 1, Summary: binlog.Summary{End: p, LastEvent: began.Add(closed)}})
		if err != nil {
			t.Fatal(err)
		}
		for k, body := range map[string]string{key: "x", key + ".json": string(b)} {
			if _, err := store.Put(ctx, k, strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("shop/uid/binlog/e1/mydb-bin.000001", "0-1-10", -time.Hour)
	put("shop/uid/binlog/e1/mydb-bin.000002", "0-1-42", -time.Second)
	put("shop/uid/binlog/e1/mydb-bin.000003", "0-1-42", time.Second)
	put("shop/uid-2/binlog/e1/mydb-bin.000001", "0-1-10", -time.Hour)
	if _, err := store.Put(ctx, "shop/uid/wal/000000010000000000000001", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	deleted, err := S3ArchivePruner{}.PruneArchive(ctx, api.S3Object{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket,
		Key: "shop/uid", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}, pitrwindow.Cut{GTID: "0-1-42", Began: began})
	if err != nil || deleted != 2 {
		t.Fatalf("deleted %d, %v; want 2", deleted, err)
	}
	got := keysUnder(t, store, "shop/")
	want := []string{"shop/uid-2/binlog/e1/mydb-bin.000001", "shop/uid-2/binlog/e1/mydb-bin.000001.json",
		"shop/uid/binlog/e1/mydb-bin.000003", "shop/uid/binlog/e1/mydb-bin.000003.json", "shop/uid/wal/000000010000000000000001"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("left in the bucket (-want +got):\n%s", diff)
	}
}

// keysUnder lists the keys under prefix of store, sorted.
func keysUnder(t *testing.T, store *objectstore.Store, prefix string) []string {
	t.Helper()
	objects, err := store.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objects {
		keys = append(keys, o.Key)
	}
	slices.Sort(keys)
	return keys
}
