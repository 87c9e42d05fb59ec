package backup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/internal/fixtures"
	"github.com/mydb-dev/mydb/pkg/engine"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var now = fixtures.Now

var writes = fixtures.Writes

// myDatabase is the fixture's database with one replica.
func myDatabase(mods ...func(*examplev1.MyDatabase)) *examplev1.MyDatabase {
	return fixtures.MyDatabase(append([]func(*examplev1.MyDatabase){func(d *examplev1.MyDatabase) { d.Spec.Replicas = ptr.To[int32](1) }}, mods...)...)
}

// backup is a manual backup of the fixture's database, a minute old.
func backup(mods ...func(*examplev1.MyDatabaseBackup)) *examplev1.MyDatabaseBackup {
	return fixtures.Backup("prod-mysql-x7k2p", append([]func(*examplev1.MyDatabaseBackup){
		func(b *examplev1.MyDatabaseBackup) { b.CreationTimestamp = metav1.NewTime(now.Add(-time.Minute)) }}, mods...)...)
}

func job(conditions ...batchv1.JobCondition) *batchv1.Job {
	j := newJob(backup(), myDatabase(), engineFor(myDatabase()))
	j.Status.StartTime = &metav1.Time{Time: now.Add(-30 * time.Second)}
	j.Status.Conditions = conditions
	for _, c := range conditions {
		if c.Type == batchv1.JobComplete {
			j.Status.CompletionTime = &metav1.Time{Time: now}
		}
	}
	return j
}

type fixture struct {
	t          *testing.T
	kubeClient *k8sfake.Clientset
	mydbClient *mydbfake.Clientset
	recorder   *record.FakeRecorder
}

// sync runs one reconcile of the backup with the given objects cached.
func sync(t *testing.T, b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, kubeObjects ...runtime.Object) (*fixture, error) {
	t.Helper()
	mydbObjects := []runtime.Object{b}
	if db != nil {
		mydbObjects = append(mydbObjects, db)
	}
	f := &fixture{t: t, kubeClient: k8sfake.NewClientset(kubeObjects...), mydbClient: mydbfake.NewClientset(mydbObjects...),
		recorder: record.NewFakeRecorder(100)}
	kubeInf := kubeinformers.NewSharedInformerFactory(f.kubeClient, 0)
	mydbInf := mydbinformers.NewSharedInformerFactory(f.mydbClient, 0)
	informers := NewInformers(kubeInf, mydbInf)
	c, err := NewController(f.kubeClient, f.mydbClient, informers, f.recorder, clocktesting.NewFakePassiveClock(now))
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
		case *batchv1.Job:
			add(informers.Jobs.Informer(), o)
		case *corev1.PersistentVolumeClaim:
			add(informers.PersistentVolumeClaims.Informer(), o)
		}
	}
	return f, c.sync(context.Background(), cache.ObjectName{Namespace: b.Namespace, Name: b.Name})
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

func volume() *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-backups", Namespace: "default"}}
}

func TestNewBackupStartsAJob(t *testing.T) {
	f, err := sync(t, backup(), myDatabase())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"create persistentvolumeclaims prod-mysql-backups", "create jobs backup-prod-mysql-x7k2p"}, writes(f.kubeClient.Actions())); diff != "" {
		t.Errorf("writes to the cluster (-want +got):\n%s", diff)
	}
	var created *batchv1.Job
	for _, a := range f.kubeClient.Actions() {
		if c, ok := a.(core.CreateAction); ok && a.GetResource().Resource == "jobs" {
			created = c.GetObject().(*batchv1.Job)
		}
	}
	if created.Name != "backup-prod-mysql-x7k2p" || metav1.GetControllerOf(created).UID != "uid-prod-mysql-x7k2p" {
		t.Errorf("job %s controlled by %v", created.Name, metav1.GetControllerOf(created))
	}
	cmd := strings.Join(created.Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.HasPrefix(cmd, "mysqldump --host=prod-mysql.default.svc") || !strings.Contains(cmd, "--result-file=/backups/prod-mysql-x7k2p.sql") {
		t.Errorf("dump command %q", cmd)
	}
	env := created.Spec.Template.Spec.Containers[0].Env[0]
	if env.Name != "MYSQL_PWD" || env.ValueFrom.SecretKeyRef.Name != "prod-mysql-credentials" {
		t.Errorf("password env %+v", env)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhasePending {
		t.Errorf("status %+v, want Pending", s)
	}
}

func TestPostgresBackupUsesPgDumpall(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Engine, d.Spec.Version = examplev1.EnginePostgres, "17" })
	f, err := sync(t, backup(), db, volume())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range f.kubeClient.Actions() {
		if c, ok := a.(core.CreateAction); ok && a.GetResource().Resource == "jobs" {
			container := c.GetObject().(*batchv1.Job).Spec.Template.Spec.Containers[0]
			if container.Command[0] != "pg_dumpall" || !strings.HasPrefix(container.Image, "docker.io/library/postgres:17.") {
				t.Errorf("postgres dump: %v in %s", container.Command, container.Image)
			}
		}
	}
}

func TestJobOutcomeBecomesStatus(t *testing.T) {
	tests := []struct {
		name        string
		job         *batchv1.Job
		wantPhase   examplev1.BackupPhase
		wantMessage string
	}{
		{name: "running", job: job(), wantPhase: examplev1.BackupPhaseRunning},
		{name: "complete", job: job(batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}),
			wantPhase: examplev1.BackupPhaseSucceeded},
		{name: "failed", job: job(batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}),
			wantPhase: examplev1.BackupPhaseFailed, wantMessage: "Job backup-prod-mysql-x7k2p failed: BackoffLimitExceeded: Job has reached the specified backoff limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := sync(t, backup(), myDatabase(), volume(), tc.job)
			if err != nil {
				t.Fatal(err)
			}
			if w := writes(f.kubeClient.Actions()); len(w) != 0 {
				t.Errorf("wrote %v to the cluster", w)
			}
			s := writtenStatus(t, f)
			if s.Phase != tc.wantPhase || s.Message != tc.wantMessage || s.StartTime == nil {
				t.Errorf("status %+v, want phase %s message %q", s, tc.wantPhase, tc.wantMessage)
			}
			if tc.wantPhase == examplev1.BackupPhaseSucceeded && (s.Location == nil || s.Location.Volume == nil || *s.Location.Volume != examplev1.VolumeLocation{ClaimName: "prod-mysql-backups", Path: "prod-mysql-x7k2p.sql"} || s.CompletionTime == nil) {
				t.Errorf("succeeded status %+v", s)
			}
		})
	}
}

func TestFinishedBackupCostsNoWrites(t *testing.T) {
	done := backup(func(b *examplev1.MyDatabaseBackup) { b.Status.Phase = examplev1.BackupPhaseSucceeded })
	f, err := sync(t, done, myDatabase(), volume())
	if err != nil {
		t.Fatal(err)
	}
	if w := append(writes(f.kubeClient.Actions()), writes(f.mydbClient.Actions())...); len(w) != 0 {
		t.Errorf("wrote %v for a finished backup", w)
	}
}

func TestMissingDatabase(t *testing.T) {
	f, err := sync(t, backup(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || s.Message != `MyDatabase "prod-mysql" does not exist` {
		t.Errorf("status %+v", s)
	}

	fresh := backup(func(b *examplev1.MyDatabaseBackup) { b.CreationTimestamp = metav1.NewTime(now) })
	f, err = sync(t, fresh, nil)
	if err == nil {
		t.Error("a backup created a moment ago failed at once instead of waiting for the cache")
	}
	if w := writes(f.mydbClient.Actions()); len(w) != 0 {
		t.Errorf("wrote %v", w)
	}
}

func TestDeletionPolicyDeleteTiesBackupsToTheDatabase(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) { d.Spec.DeletionPolicy = examplev1.DeletionPolicyDelete })
	f, err := sync(t, backup(), db, volume(), job())
	if err != nil {
		t.Fatal(err)
	}
	var owners []metav1.OwnerReference
	for _, a := range f.mydbClient.Actions() {
		if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "" {
			owners = u.GetObject().(*examplev1.MyDatabaseBackup).OwnerReferences
		}
	}
	if len(owners) != 1 || owners[0].UID != "uid-1" || owners[0].Controller != nil {
		t.Errorf("owner references %+v, want the database as a non-controlling owner", owners)
	}
}

func TestForeignJobFailsTheBackup(t *testing.T) {
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "backup-prod-mysql-x7k2p", Namespace: "default"}}
	f, err := sync(t, backup(), myDatabase(), volume(), foreign)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "not managed by this backup") {
		t.Errorf("status %+v", s)
	}
	if w := writes(f.kubeClient.Actions()); len(w) != 0 {
		t.Errorf("touched the cluster: %v", w)
	}
}

func engineFor(db *examplev1.MyDatabase) engine.Engine {
	eng, _ := engine.Lookup(string(db.Spec.Engine))
	return eng
}
