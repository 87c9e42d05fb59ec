package mydatabase

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/names"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// rolloutState is a converged three-instance database whose StatefulSet
// has a new template (update revision r2); the pods named in updated run
// it.
func rolloutState(t *testing.T, updated ...string) (*examplev1.MyDatabase, []runtime.Object, fakeStatuses) {
	t.Helper()
	return rolloutStateOf(t, myDatabase(), nil, updated...)
}

// rolloutStateOf is rolloutState of db, with label, when set, labelling
// each pod as one that runs the new template or not.
func rolloutStateOf(t *testing.T, db *examplev1.MyDatabase, label func(labels map[string]string, updated bool), updated ...string) (*examplev1.MyDatabase, []runtime.Object, fakeStatuses) {
	t.Helper()
	db, children, statuses := convergedState(t, db)
	var objects []runtime.Object
	for _, obj := range children {
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			o = o.DeepCopy()
			o.Status.UpdateRevision, o.Status.UpdatedReplicas = "r2", int32(len(updated))
			obj = o
		case *corev1.Pod:
			o = o.DeepCopy()
			o.UID = types.UID(o.Name + "-uid")
			isUpdated := slices.Contains(updated, o.Name)
			if isUpdated {
				o.Labels[appsv1.StatefulSetRevisionLabel] = "r2"
			}
			if label != nil {
				label(o.Labels, isUpdated)
			}
			obj = o
		}
		objects = append(objects, obj)
	}
	return db, objects, statuses
}

func TestRollingUpdateReplacesTheReplicasFirst(t *testing.T) {
	for _, tc := range []struct {
		updated    []string
		wantDelete string
	}{
		{nil, "prod-mysql-2"},
		{[]string{"prod-mysql-2"}, "prod-mysql-1"},
	} {
		db, children, statuses := rolloutState(t, tc.updated...)
		f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
		f.statuses = statuses
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		f.expectWrites([]string{"delete pods " + tc.wantDelete}, []string{"update mydatabases/status prod-mysql"})
		expectEvent(t, f.recorder, "Normal RollingUpdate Replacing replica "+tc.wantDelete)
		status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
		p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing)
		if p == nil || p.Reason != ReasonRollingOut || !strings.Contains(p.Message, "replacing "+tc.wantDelete) {
			t.Errorf("Progressing %+v", p)
		}
		if status.UpdateRevision != "r2" || int(status.UpdatedReplicas) != len(tc.updated) {
			t.Errorf("updateRevision %q updatedReplicas %d", status.UpdateRevision, status.UpdatedReplicas)
		}
		// The pod is deleted with its UID as a precondition: a pod made
		// anew under its name since the cache saw it is not deleted.
		for _, a := range f.kubeClient.Actions() {
			if d, ok := a.(core.DeleteAction); ok {
				if uid := d.GetDeleteOptions().Preconditions.UID; uid == nil || string(*uid) != tc.wantDelete+"-uid" {
					t.Errorf("delete of %s with preconditions %+v", d.GetName(), d.GetDeleteOptions().Preconditions)
				}
			}
		}
	}
}

func TestRollingUpdateDoesNotReplaceTwoPodsFromAStaleCache(t *testing.T) {
	db, children, statuses := rolloutState(t)
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	c := f.newController()
	key := cache.ObjectName{Namespace: db.Namespace, Name: db.Name}
	for range 2 {
		if err := c.sync(context.Background(), key); err != nil && !strings.Contains(err.Error(), "stale") {
			t.Fatal(err)
		}
	}
	if d := deletes(f); len(d) != 1 {
		t.Errorf("two syncs from one cache deleted %v, want one pod", d)
	}
}

func TestRollingUpdateSwitchesOverBeforeReplacingThePrimary(t *testing.T) {
	db, children, statuses := rolloutState(t, "prod-mysql-1", "prod-mysql-2")
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// The switchover is written on its own; no pod is touched.
	f.expectWrites(nil, []string{"update mydatabases/status prod-mysql"})
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if status.CurrentPrimary != "prod-mysql-0" || status.TargetPrimary != "prod-mysql-1" ||
		status.TargetPrimaryReason != examplev1.TargetPrimaryReasonRollingUpdate || status.TargetPrimaryTime == nil {
		t.Errorf("primary %q target %q (%s at %v)", status.CurrentPrimary, status.TargetPrimary, status.TargetPrimaryReason, status.TargetPrimaryTime)
	}
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionPrimaryChange)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != failover.ReasonSwitchoverInProgress {
		t.Errorf("PrimaryChange %+v", c)
	}
	expectEvent(t, f.recorder, "Normal RollingUpdate switchover from prod-mysql-0 to prod-mysql-1")

	// While it is under way, nothing else happens.
	db.Status = status
	f = newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if d := deletes(f); len(d) > 0 {
		t.Errorf("during the switchover: %v", d)
	}
}

func TestRollingUpdateWaitsForAReplacedReplicaToStream(t *testing.T) {
	db, children, statuses := rolloutState(t, "prod-mysql-2")
	behind := statuses["10.244.0.12"]
	behind.Ready, behind.Reason = false, "replaying WAL"
	statuses["10.244.0.12"] = behind
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if d := deletes(f); len(d) > 0 {
		t.Errorf("while the replaced replica does not stream: %v", d)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing)
	if p == nil || !strings.Contains(p.Message, "waiting: prod-mysql-2 runs the new template but does not serve yet") {
		t.Errorf("Progressing %+v", p)
	}
}

func TestStatefulSetOfAnEarlierVersionIsSwitchedToOnDelete(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	var objects []runtime.Object
	for _, obj := range children {
		if sts, ok := obj.(*appsv1.StatefulSet); ok {
			sts = sts.DeepCopy()
			sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{}}
			obj = sts
		}
		objects = append(objects, obj)
	}
	f := newFixture(t, []*examplev1.MyDatabase{db}, objects...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	// The strategy alone changes, by a merge patch that unsets the
	// defaulted rollingUpdate, before any apply.
	f.expectWrites([]string{"patch statefulsets prod-mysql"}, nil)
	for _, a := range f.kubeClient.Actions() {
		if p, ok := a.(core.PatchAction); ok && p.GetPatchType() == types.MergePatchType {
			if got := string(p.GetPatch()); got != `{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}` {
				t.Errorf("patch %s", got)
			}
		}
	}
}

func TestRollingUpdateWaitsForASlot(t *testing.T) {
	db, children, statuses := rolloutState(t)
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	c := f.newController()
	c.rolloutSlots.Max = 1
	key := cache.ObjectName{Namespace: db.Namespace, Name: db.Name}
	if ok, _ := c.rolloutSlots.Take("default/other", now); !ok {
		t.Fatal("no slot for the other database")
	}
	if err := c.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if d := deletes(f); len(d) > 0 {
		t.Errorf("with every slot taken: %v", d)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing); p == nil ||
		!strings.Contains(p.Message, "1 other databases are rolling out, at most 1 at once") {
		t.Errorf("Progressing %+v", p)
	}

	c.rolloutSlots.Release("default/other")
	if err := c.sync(context.Background(), key); err != nil && !strings.Contains(err.Error(), "stale") {
		t.Fatal(err)
	}
	if d := deletes(f); len(d) != 1 {
		t.Errorf("once the slot is free: deleted %v, want one pod", d)
	}
}

// Each switchover keeps writes down until it completes or times out: after
// one was given up, the rollout waits before it asks for the next.
func TestRollingUpdateBacksOffAfterAnAbortedSwitchover(t *testing.T) {
	for _, tc := range []struct {
		ago            time.Duration
		wantSwitchover bool
	}{{time.Minute, false}, {6 * time.Minute, true}} {
		db, children, statuses := rolloutState(t, "prod-mysql-1", "prod-mysql-2")
		meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: examplev1.ConditionPrimaryChange, Status: metav1.ConditionFalse,
			Reason: failover.ReasonSwitchoverAborted, LastTransitionTime: metav1.NewTime(now.Add(-tc.ago))})
		f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
		f.statuses = statuses
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
		if got := status.TargetPrimary == "prod-mysql-1"; got != tc.wantSwitchover {
			t.Errorf("%s after an aborted switchover: target %q, want a switchover %v", tc.ago, status.TargetPrimary, tc.wantSwitchover)
		}
		if p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing); !tc.wantSwitchover &&
			(p == nil || !strings.Contains(p.Message, "a switchover was given up at")) {
			t.Errorf("Progressing %+v", p)
		}
	}
}

// kubectl mydb restart sets the annotation; the template carries it, so a
// new value is a new revision, rolled out like any other.
func TestRestartAnnotationReachesThePodTemplate(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) {
		d.Annotations = map[string]string{names.RestartedAtAnnotation: "2026-12-05T11:00:00Z"}
	})
	f := newFixture(t, []*examplev1.MyDatabase{db})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
	if got := sts.Spec.Template.Annotations[names.RestartedAtAnnotation]; got != "2026-12-05T11:00:00Z" {
		t.Errorf("template annotation %q", got)
	}
}

// A replaced pod's process may still answer at the IP of the pod made anew
// under its name: its report is not the new instance's.
func TestAReportOfAnEarlierPodIsNotTheInstances(t *testing.T) {
	db, children, statuses := rolloutState(t, "prod-mysql-2")
	old := statuses["10.244.0.12"]
	old.PodUID = "an-earlier-pod"
	statuses["10.244.0.12"] = old
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if d := deletes(f); len(d) > 0 {
		t.Errorf("the next replica was replaced on the word of an earlier pod: %v", d)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	for _, in := range status.Instances {
		if in.Name == "prod-mysql-2" && (in.Ready || !strings.Contains(in.Message, "runs for an earlier pod prod-mysql-2 (uid an-earlier-pod)")) {
			t.Errorf("instance %+v", in)
		}
	}
}

// deletes are the deletions f's sync sent to the main cluster.
func deletes(f *fixture) []string {
	var out []string
	for _, w := range writes(f.kubeClient.Actions()) {
		if strings.HasPrefix(w, "delete ") {
			out = append(out, w)
		}
	}
	return out
}

// majorUpgradeState is a converged three-instance PostgreSQL 15 database
// with a backup destination whose spec.version is now 17: the
// StatefulSet's update revision r2 runs 17, the pods named in updated run
// it, the others 15.
func majorUpgradeState(t *testing.T, updated ...string) (*examplev1.MyDatabase, []runtime.Object, fakeStatuses) {
	t.Helper()
	db, objects, statuses := rolloutStateOf(t, myDatabase(func(d *examplev1.MyDatabase) {
		d.Spec.Engine, d.Spec.Version = examplev1.EnginePostgres, "15"
		d.Spec.Backup = &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
			Endpoint: "http://127.0.0.1:9000", Bucket: "backups",
			CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "key"},
		}}}
	}), func(labels map[string]string, updated bool) {
		labels[names.LabelVersion] = map[bool]string{false: "15", true: "17"}[updated]
	}, updated...)
	db.Spec.Version = "17"
	return db, objects, statuses
}

// TestAMajorUpgradeBacksUpFirstThenReplacesReplicasThenThePrimary: the
// primary is backed up before anything is replaced; then the replicas go
// first without waiting for them to serve (they cannot stream from the old
// major), then the primary, with no switchover.
func TestAMajorUpgradeBacksUpFirstThenReplacesReplicasThenThePrimary(t *testing.T) {
	db, children, statuses := majorUpgradeState(t)
	backupName := db.Name + "-before-postgres-17"
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	created := created[*examplev1.MyDatabaseBackup](t, f.mydbClient.Actions(), "mydatabasebackups")
	if created.Name != backupName || created.Spec.DatabaseName != db.Name || created.Spec.Target != examplev1.BackupTargetPrimary {
		t.Errorf("backup before the upgrade: %s %+v", created.Name, created.Spec)
	}
	for _, a := range f.kubeClient.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("a pod was replaced before the backup succeeded: %v", a)
		}
	}
	expectEvent(t, f.recorder, "Normal RollingUpdate Backing the primary up ("+backupName+")")

	for _, tc := range []struct {
		phase      examplev1.BackupPhase
		updated    []string
		wantDelete string
	}{
		{examplev1.BackupPhaseRunning, nil, ""},
		{examplev1.BackupPhaseFailed, nil, ""},
		// The replicas first; the one replaced does not serve yet.
		{examplev1.BackupPhaseSucceeded, nil, db.Name + "-2"},
		{examplev1.BackupPhaseSucceeded, []string{db.Name + "-2"}, db.Name + "-1"},
		// Then the primary, with no switchover.
		{examplev1.BackupPhaseSucceeded, []string{db.Name + "-1", db.Name + "-2"}, db.Name + "-0"},
	} {
		db, children, statuses := majorUpgradeState(t, tc.updated...)
		for _, name := range tc.updated {
			delete(statuses, podIP(t, children, name)) // replaced: its manager waits for the primary's upgrade
		}
		backup := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: backupName, Namespace: db.Namespace},
			Spec:   examplev1.MyDatabaseBackupSpec{DatabaseName: db.Name, Target: examplev1.BackupTargetPrimary},
			Status: examplev1.MyDatabaseBackupStatus{Phase: tc.phase, DatabaseUID: db.UID, Message: "the S3 server refused"}}
		f := newFixture(t, []*examplev1.MyDatabase{db}, append(children, backup)...)
		f.statuses = statuses
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		var deleted []string
		for _, a := range f.kubeClient.Actions() {
			if d, ok := a.(core.DeleteAction); ok && d.GetResource().Resource == "pods" {
				deleted = append(deleted, d.GetName())
			}
		}
		if want := tc.wantDelete; (want == "" && len(deleted) != 0) || (want != "" && (len(deleted) != 1 || deleted[0] != want)) {
			t.Errorf("backup %s, updated %v: deleted %v, want %q", tc.phase, tc.updated, deleted, want)
		}
		status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
		if status.TargetPrimary != "" && status.TargetPrimary != status.CurrentPrimary {
			t.Errorf("backup %s, updated %v: a switchover to %s", tc.phase, tc.updated, status.TargetPrimary)
		}
		if tc.phase == examplev1.BackupPhaseFailed {
			p := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing)
			if p == nil || !strings.Contains(p.Message, "the S3 server refused") {
				t.Errorf("a failed backup before the upgrade: Progressing %+v", p)
			}
		}
	}
}

// podIP is the IP of the pod named name among objects.
func podIP(t *testing.T, objects []runtime.Object, name string) string {
	t.Helper()
	for _, obj := range objects {
		if p, ok := obj.(*corev1.Pod); ok && p.Name == name {
			return p.Status.PodIP
		}
	}
	t.Fatalf("no pod %s", name)
	return ""
}
