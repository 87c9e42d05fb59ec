package backup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/internal/fixtures"
	"github.com/mydb-dev/mydb/pkg/controller/internal/s3location"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

var now = fixtures.Now

// myDatabase is the fixture's database, backed up to S3, with a ready
// primary and two ready replicas, prod-mysql-2 the furthest along.
func myDatabase(mods ...func(*examplev1.MyDatabase)) *examplev1.MyDatabase {
	return fixtures.MyDatabase(append([]func(*examplev1.MyDatabase){func(d *examplev1.MyDatabase) {
		d.Spec.Backup = &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
			Endpoint: "http://127.0.0.1:9000", Bucket: "backups", Prefix: "mydb",
			CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3", AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"},
		}}}
		d.Status.CurrentPrimary = "prod-mysql-0"
		d.Status.Instances = []examplev1.InstanceStatus{
			{Name: "prod-mysql-0", Address: "10.244.0.10", Role: examplev1.InstanceRolePrimary, Ready: true, Position: &examplev1.InstancePosition{GTID: "0-1-50"}},
			{Name: "prod-mysql-1", Address: "10.244.0.11", Role: examplev1.InstanceRoleReplica, Ready: true, Position: &examplev1.InstancePosition{GTID: "0-1-40"}},
			{Name: "prod-mysql-2", Address: "10.244.0.12", Role: examplev1.InstanceRoleReplica, Ready: true, Position: &examplev1.InstancePosition{GTID: "0-1-49"}},
		}
	}}, mods...)...)
}

// backup is a manual backup of the fixture's database, a minute old.
func backup(mods ...func(*examplev1.MyDatabaseBackup)) *examplev1.MyDatabaseBackup {
	return fixtures.Backup("prod-mysql-x7k2p", append([]func(*examplev1.MyDatabaseBackup){func(b *examplev1.MyDatabaseBackup) {
		b.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute))
		b.Spec.Target = examplev1.BackupTargetPreferReplica
		b.Finalizers = []string{examplev1.BackupFinalizer}
	}}, mods...)...)
}

// assigned is a backup given to prod-mysql-2, not yet asked of it.
func assigned(b *examplev1.MyDatabaseBackup) {
	b.Status = examplev1.MyDatabaseBackupStatus{
		Phase: examplev1.BackupPhasePending, Instance: "prod-mysql-2", Role: examplev1.InstanceRoleReplica, DatabaseUID: "uid-1",
		Location: s3location.Of(myDatabase().Spec.Backup.Destination.S3, myDatabase(), backup()),
	}
}

// running is a backup prod-mysql-2 took.
func running(b *examplev1.MyDatabaseBackup) {
	assigned(b)
	b.Status.Phase = examplev1.BackupPhaseRunning
	b.Status.StartTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
}

func credentials() []runtime.Object {
	return []runtime.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: "default"},
			Data: map[string][]byte{"accessKeyID": []byte("AKID"), "secretAccessKey": []byte("s3cret")}},
		fixtures.CASecret("default", "prod-mysql"),
	}
}

// who is the manager auth reaches, when it carries credentials of the
// database's CA.
func who(auth api.Auth) string {
	if auth.Credentials == nil || auth.Credentials.Roots == nil {
		return "without-credentials"
	}
	return auth.Name
}

// fakeManagers answer the backup endpoints.
type fakeManagers struct {
	started []string // "address password id key accessKeyID"
	answer  *api.Operation
	err     error
}

func (f *fakeManagers) StartBackup(_ context.Context, address string, auth api.Auth, req api.BackupRequest) (*api.Operation, error) {
	if v := req.Destination.Volume; v != nil {
		f.started = append(f.started, fmt.Sprintf("%s %s %s volume %s %s", address, who(auth), req.ID, v.Claim, v.Address))
	} else {
		f.started = append(f.started, fmt.Sprintf("%s %s %s %s %s", address, who(auth), req.ID, req.Destination.S3.Key, req.Destination.S3.AccessKeyID))
	}
	if f.err != nil {
		return nil, f.err
	}
	if f.answer != nil {
		return f.answer, nil
	}
	return &api.Operation{ID: req.ID, Phase: api.OperationRunning, StartTime: now}, nil
}

func (f *fakeManagers) Backup(_ context.Context, _ string, _ api.Auth, id string) (*api.Operation, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.answer, nil
}

// fakeBuckets records deletes.
type fakeBuckets struct{ deleted []string }

func (f *fakeBuckets) Delete(_ context.Context, cfg objectstore.Config, key string) error {
	f.deleted = append(f.deleted, fmt.Sprintf("%s %s/%s %s", cfg.Endpoint, cfg.Bucket, key, cfg.AccessKeyID))
	return nil
}

type fixture struct {
	kubeClient *k8sfake.Clientset
	mydbClient *mydbfake.Clientset
	recorder   *record.FakeRecorder
	managers   *fakeManagers
	buckets    *fakeBuckets
	requeue    time.Duration
}

// sync runs one reconcile of the backup with the given objects cached.
func sync(t *testing.T, managers *fakeManagers, b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, kubeObjects ...runtime.Object) (*fixture, error) {
	t.Helper()
	mydbObjects := []runtime.Object{b}
	if db != nil {
		mydbObjects = append(mydbObjects, db)
	}
	if managers == nil {
		managers = &fakeManagers{}
	}
	f := &fixture{kubeClient: k8sfake.NewClientset(kubeObjects...), mydbClient: mydbfake.NewClientset(mydbObjects...),
		recorder: record.NewFakeRecorder(100), managers: managers, buckets: &fakeBuckets{}}
	kubeInf := kubeinformers.NewSharedInformerFactory(f.kubeClient, 0)
	mydbInf := mydbinformers.NewSharedInformerFactory(f.mydbClient, 0)
	informers := NewInformers(kubeInf, mydbInf)
	c, err := NewController(f.kubeClient, f.mydbClient, informers, f.recorder, clocktesting.NewFakePassiveClock(now),
		Options{Managers: managers, Stores: f.buckets, InstanceImage: "mydb-instance:test"})
	if err != nil {
		t.Fatal(err)
	}
	add := func(inf cache.SharedIndexInformer, obj interface{}) {
		if err := inf.GetIndexer().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	add(informers.Backups.Informer(), b)
	if db != nil {
		add(informers.MyDatabases.Informer(), db)
	}
	for _, obj := range kubeObjects {
		switch o := obj.(type) {
		case *corev1.Secret:
			if o.Labels[names.LabelManagedBy] == names.ManagedBy {
				add(informers.Secrets.Informers()[0], o)
			}
		case *corev1.Pod:
			add(informers.Pods.Informer(), o)
		case *corev1.PersistentVolumeClaim:
			add(informers.PersistentVolumeClaims.Informer(), o)
		}
	}
	f.requeue, err = c.sync(context.Background(), cache.ObjectName{Namespace: b.Namespace, Name: b.Name})
	return f, err
}

func writtenStatus(t *testing.T, f *fixture) examplev1.MyDatabaseBackupStatus {
	t.Helper()
	for _, a := range f.mydbClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
			return u.GetObject().(*examplev1.MyDatabaseBackup).Status
		}
	}
	t.Fatal("no status was written")
	return examplev1.MyDatabaseBackupStatus{}
}

func TestInstanceIsChosenPerTarget(t *testing.T) {
	notReady := func(name string) func(*examplev1.MyDatabase) {
		return func(d *examplev1.MyDatabase) {
			for i := range d.Status.Instances {
				if d.Status.Instances[i].Name == name {
					d.Status.Instances[i].Ready = false
				}
			}
		}
	}
	for _, tc := range []struct {
		name   string
		target examplev1.BackupTarget
		db     *examplev1.MyDatabase
		want   string
	}{
		{name: "the furthest ready replica", target: examplev1.BackupTargetPreferReplica, db: myDatabase(), want: "prod-mysql-2"},
		{name: "a ready replica over a lagging one", target: examplev1.BackupTargetPreferReplica, db: myDatabase(notReady("prod-mysql-2")), want: "prod-mysql-1"},
		{name: "the primary when no replica is ready", target: examplev1.BackupTargetPreferReplica,
			db: myDatabase(notReady("prod-mysql-1"), notReady("prod-mysql-2")), want: "prod-mysql-0"},
		{name: "the primary when asked", target: examplev1.BackupTargetPrimary, db: myDatabase(), want: "prod-mysql-0"},
		{name: "no fenced primary", target: examplev1.BackupTargetPrimary,
			db: myDatabase(func(d *examplev1.MyDatabase) { d.Status.Instances[0].Fenced = true })},
		{name: "nothing ready", target: examplev1.BackupTargetPreferReplica,
			db: myDatabase(notReady("prod-mysql-0"), notReady("prod-mysql-1"), notReady("prod-mysql-2"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := sync(t, nil, backup(func(b *examplev1.MyDatabaseBackup) { b.Spec.Target = tc.target }), tc.db, credentials()...)
			if err != nil {
				t.Fatal(err)
			}
			s := writtenStatus(t, f)
			if s.Instance != tc.want || s.Phase != examplev1.BackupPhasePending {
				t.Errorf("status %+v, want Pending on %q", s, tc.want)
			}
			if len(f.managers.started) != 0 {
				t.Errorf("asked %v before the choice was recorded", f.managers.started)
			}
			if tc.want == "" {
				if s.Message != "waiting for a ready instance to back up" || f.requeue == 0 {
					t.Errorf("status %+v requeue %s, want a wait for an instance", s, f.requeue)
				}
				return
			}
			wantKey := "mydb/default/prod-mysql/uid-1/prod-mysql-x7k2p-uid-prod-mysql-x7k2p"
			if s.Location.URI() != "s3://backups/"+wantKey || s.Location.S3.CredentialsSecret.Name != "s3" || s.DatabaseUID != "uid-1" {
				t.Errorf("location %+v uid %q", s.Location.S3, s.DatabaseUID)
			}
		})
	}
}

func TestAssignedBackupIsAskedOfItsInstance(t *testing.T) {
	f, err := sync(t, nil, backup(assigned), myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.244.0.12 prod-mysql-2 uid-prod-mysql-x7k2p mydb/default/prod-mysql/uid-1/prod-mysql-x7k2p-uid-prod-mysql-x7k2p AKID"}
	if diff := cmp.Diff(want, f.managers.started); diff != "" {
		t.Errorf("backup requests (-want +got):\n%s", diff)
	}
	s := writtenStatus(t, f)
	if s.Phase != examplev1.BackupPhaseRunning || s.StartTime == nil || !s.StartTime.Time.Equal(now) || f.requeue == 0 {
		t.Errorf("status %+v requeue %s, want Running since the manager's start, polled", s, f.requeue)
	}
}

func TestBusyInstanceIsAskedAgainLater(t *testing.T) {
	f, err := sync(t, &fakeManagers{err: fmt.Errorf("%w: a backup runs", api.ErrBusy)}, backup(assigned), myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	s := writtenStatus(t, f)
	if s.Phase != examplev1.BackupPhasePending || s.Instance != "prod-mysql-2" || !strings.Contains(s.Message, "runs another operation") || f.requeue == 0 {
		t.Errorf("status %+v requeue %s, want Pending on the same instance, asked again", s, f.requeue)
	}
}

func TestRefusedBackupFailsAtOnce(t *testing.T) {
	f, err := sync(t, &fakeManagers{err: fmt.Errorf("%w: 501 mysql backups are not supported", api.ErrRefused)}, backup(assigned), myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "not supported") {
		t.Errorf("status %+v, want Failed with the manager's reason", s)
	}
}

func TestPendingTooLongFails(t *testing.T) {
	old := backup(assigned, func(b *examplev1.MyDatabaseBackup) {
		b.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
		b.Status.Message = "instance prod-mysql-2 did not take the backup: connection refused"
	})
	f, err := sync(t, nil, old, myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "connection refused") {
		t.Errorf("status %+v, want Failed with the last reason", s)
	}
}

func TestBackupWithoutDestinationFails(t *testing.T) {
	f, err := sync(t, nil, backup(), myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Backup = nil }), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "spec.backup.destination") {
		t.Errorf("status %+v", s)
	}
}

func TestBackupOfAHibernatedDatabaseFailsAtOnce(t *testing.T) {
	f, err := sync(t, nil, backup(), myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Hibernate = true }), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "hibernates") {
		t.Errorf("status %+v, want Failed saying the database hibernates", s)
	}
}

func TestBackupWithoutItsCredentialsFails(t *testing.T) {
	f, err := sync(t, nil, backup(assigned), myDatabase(), credentials()[1])
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, `Secret "s3"`) {
		t.Errorf("status %+v, want Failed naming the Secret", s)
	}
	if len(f.managers.started) != 0 {
		t.Errorf("asked %v without credentials", f.managers.started)
	}
}

func TestOperationBecomesStatus(t *testing.T) {
	finish := now.Add(-time.Second)
	tests := []struct {
		name     string
		managers *fakeManagers
		want     examplev1.MyDatabaseBackupStatus
		event    string
	}{
		{name: "running", managers: &fakeManagers{answer: &api.Operation{Phase: api.OperationRunning, Bytes: 1 << 20, StartTime: now.Add(-30 * time.Second)}},
			want: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseRunning, Bytes: 1 << 20}},
		{name: "succeeded", managers: &fakeManagers{answer: &api.Operation{Phase: api.OperationSucceeded, StartTime: now.Add(-30 * time.Second), FinishTime: &finish,
			Bytes: 4096, Size: 4096, SHA256: "abc", Format: "mariadb-backup-xbstream", Position: &api.Position{GTID: "0-1-49"}}},
			want: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded, Bytes: 4096, SizeBytes: 4096, Checksum: "abc",
				Format: "mariadb-backup-xbstream", Position: &examplev1.InstancePosition{GTID: "0-1-49"}, CompletionTime: &metav1.Time{Time: finish}},
			event: "Normal BackupSucceeded"},
		{name: "failed", managers: &fakeManagers{answer: &api.Operation{Phase: api.OperationFailed, StartTime: now.Add(-30 * time.Second), FinishTime: &finish, Message: "disk full"}},
			want:  examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseFailed, Message: "the instance manager reported: disk full", CompletionTime: &metav1.Time{Time: finish}},
			event: "Warning BackupFailed"},
		{name: "the instance restarted", managers: &fakeManagers{err: api.ErrUnknownOperation},
			want:  examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseFailed, Message: "the instance prod-mysql-2 restarted during the backup", CompletionTime: &metav1.Time{Time: now}},
			event: "Warning BackupFailed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := sync(t, tc.managers, backup(running), myDatabase(), credentials()...)
			if err != nil {
				t.Fatal(err)
			}
			want := backup(running).Status
			want.Phase, want.Message, want.Bytes, want.SizeBytes, want.Checksum, want.Format, want.Position, want.CompletionTime =
				tc.want.Phase, tc.want.Message, tc.want.Bytes, tc.want.SizeBytes, tc.want.Checksum, tc.want.Format, tc.want.Position, tc.want.CompletionTime
			if diff := cmp.Diff(want, writtenStatus(t, f)); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if tc.event != "" {
				if e := <-f.recorder.Events; !strings.HasPrefix(e, tc.event) {
					t.Errorf("event %q, want %s", e, tc.event)
				}
			}
		})
	}
}

func TestFinishedBackupCostsNoWrites(t *testing.T) {
	done := backup(running, func(b *examplev1.MyDatabaseBackup) { b.Status.Phase = examplev1.BackupPhaseSucceeded })
	f, err := sync(t, nil, done, myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if w := append(fixtures.Writes(f.kubeClient.Actions()), fixtures.Writes(f.mydbClient.Actions())...); len(w) != 0 {
		t.Errorf("wrote %v for a finished backup", w)
	}
}

func TestMissingOrReplacedDatabase(t *testing.T) {
	f, err := sync(t, nil, backup(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || s.Message != `MyDatabase "prod-mysql" does not exist` {
		t.Errorf("status %+v", s)
	}

	fresh := backup(func(b *examplev1.MyDatabaseBackup) { b.CreationTimestamp = metav1.NewTime(now) })
	f, err = sync(t, nil, fresh, nil)
	if err == nil {
		t.Error("a backup created a moment ago failed at once instead of waiting for the cache")
	}
	if w := fixtures.Writes(f.mydbClient.Actions()); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}

	// The database was deleted and created again under its name mid-backup.
	f, err = sync(t, nil, backup(running), myDatabase(func(d *examplev1.MyDatabase) { d.UID = "uid-2" }), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "deleted and created again") {
		t.Errorf("status %+v", s)
	}
}

func TestDeletionPolicyDeleteTiesBackupsToTheDatabase(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) { d.Spec.DeletionPolicy = examplev1.DeletionPolicyDelete })
	for _, tc := range []struct {
		name      string
		b         *examplev1.MyDatabaseBackup
		wantOwner bool
	}{
		{name: "an ordinary backup", b: backup(running), wantOwner: true},
		{name: "a final backup", b: backup(running, func(b *examplev1.MyDatabaseBackup) {
			b.Labels = map[string]string{names.FinalBackupLabel: "prod-mysql"}
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := sync(t, &fakeManagers{answer: &api.Operation{Phase: api.OperationRunning}}, tc.b, db, credentials()...)
			if err != nil {
				t.Fatal(err)
			}
			var owners []metav1.OwnerReference
			for _, a := range f.mydbClient.Actions() {
				if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "" {
					owners = u.GetObject().(*examplev1.MyDatabaseBackup).OwnerReferences
				}
			}
			if tc.wantOwner && (len(owners) != 1 || owners[0].UID != "uid-1" || owners[0].Controller != nil) {
				t.Errorf("owner references %+v, want the database as a non-controlling owner", owners)
			}
			if !tc.wantOwner && len(owners) != 0 {
				t.Errorf("owner references %+v, want none: a final backup outlives its database", owners)
			}
		})
	}
}

func TestDeletingABackupDeletesItsDump(t *testing.T) {
	deleted := func(b *examplev1.MyDatabaseBackup) {
		b.DeletionTimestamp = &metav1.Time{Time: now}
		b.Status.Phase = examplev1.BackupPhaseSucceeded
	}
	f, err := sync(t, nil, backup(running, deleted), myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://127.0.0.1:9000 backups/mydb/default/prod-mysql/uid-1/prod-mysql-x7k2p-uid-prod-mysql-x7k2p AKID"}
	if diff := cmp.Diff(want, f.buckets.deleted); diff != "" {
		t.Errorf("deletes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"update mydatabasebackups prod-mysql-x7k2p"}, fixtures.Writes(f.mydbClient.Actions())); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	for _, a := range f.mydbClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && slices.Contains(u.GetObject().(*examplev1.MyDatabaseBackup).Finalizers, examplev1.BackupFinalizer) {
			t.Error("the finalizer stays after the dump was deleted")
		}
	}

	// Without the Secret that reads the bucket, the backup goes and says
	// its dump stays.
	f, err = sync(t, nil, backup(running, deleted), myDatabase(), credentials()[1])
	if err != nil {
		t.Fatal(err)
	}
	if len(f.buckets.deleted) != 0 || len(fixtures.Writes(f.mydbClient.Actions())) != 1 {
		t.Errorf("deletes %v writes %v, want the finalizer removed and nothing deleted", f.buckets.deleted, fixtures.Writes(f.mydbClient.Actions()))
	}
	if e := <-f.recorder.Events; !strings.HasPrefix(e, "Warning "+ReasonDumpKept) {
		t.Errorf("event %q", e)
	}

	// A running backup is left to end first, so its upload cannot land after the delete.
	f, err = sync(t, &fakeManagers{answer: &api.Operation{Phase: api.OperationRunning}},
		backup(running, func(b *examplev1.MyDatabaseBackup) { b.DeletionTimestamp = &metav1.Time{Time: now} }), myDatabase(), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.buckets.deleted) != 0 || len(fixtures.Writes(f.mydbClient.Actions())) != 0 || f.requeue == 0 {
		t.Errorf("deletes %v writes %v requeue %s, want a wait for the upload to end", f.buckets.deleted, fixtures.Writes(f.mydbClient.Actions()), f.requeue)
	}
}
