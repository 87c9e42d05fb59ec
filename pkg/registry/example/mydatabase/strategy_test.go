package mydatabase

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/livelag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

func newStrategy(t *testing.T) strategy {
	t.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	return NewStrategy(scheme)
}

func myDatabase(mods ...func(*example.MyDatabase)) *example.MyDatabase {
	db := &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql", Namespace: "default", Generation: 4, ResourceVersion: "10"},
		Spec: example.MyDatabaseSpec{
			Engine: example.EngineMySQL, Version: "8.4", Replicas: 3,
			StorageSize: resource.MustParse("50Gi"), DeletionPolicy: example.DeletionPolicyRetain,
			// Stored databases have their resources defaulted.
			Resources: *examplev1.DefaultResources.DeepCopy(),
		},
		Status: example.MyDatabaseStatus{
			ObservedGeneration: 4, Replicas: 3, ReadyReplicas: 3, Selector: "app=x", Endpoint: "prod-mysql.default.svc:3306",
			Conditions: []metav1.Condition{{Type: example.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllReplicasReady",
				LastTransitionTime: metav1.Unix(1e9, 0)}},
		},
	}
	for _, mod := range mods {
		mod(db)
	}
	return db
}

func TestPrepareForCreate(t *testing.T) {
	db := myDatabase()
	newStrategy(t).PrepareForCreate(context.Background(), db)
	if diff := cmp.Diff(example.MyDatabaseStatus{}, db.Status); diff != "" {
		t.Errorf("status not cleared (-want +got):\n%s", diff)
	}
	if db.Generation != 1 {
		t.Errorf("generation = %d, want 1", db.Generation)
	}
}

// Resources are defaulted when the server prepares the object, after the
// mutating admission plugins (the namespace's LimitRange) had their turn.
func TestPrepareDefaultsResources(t *testing.T) {
	s := newStrategy(t)
	limited := func(d *example.MyDatabase) {
		d.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	}
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	created := myDatabase(limited)
	s.PrepareForCreate(context.Background(), created)
	if diff := cmp.Diff(want, created.Spec.Resources); diff != "" {
		t.Errorf("create (-want +got):\n%s", diff)
	}
	updated := myDatabase(limited)
	s.PrepareForUpdate(context.Background(), updated, myDatabase())
	if diff := cmp.Diff(want, updated.Spec.Resources); diff != "" {
		t.Errorf("update (-want +got):\n%s", diff)
	}
}

func TestPrepareForUpdate(t *testing.T) {
	tests := []struct {
		name           string
		update         func(*example.MyDatabase)
		wantGeneration int64
	}{
		{name: "spec change bumps generation", update: func(d *example.MyDatabase) { d.Spec.Replicas = 5 }, wantGeneration: 5},
		{name: "label change keeps generation", update: func(d *example.MyDatabase) { d.Labels = map[string]string{"team": "a"} }, wantGeneration: 4},
		{name: "equal quantity in other units keeps generation",
			update: func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("51200Mi") }, wantGeneration: 4},
		{name: "status written through the main resource is dropped",
			update: func(d *example.MyDatabase) { d.Status = example.MyDatabaseStatus{ReadyReplicas: 9} }, wantGeneration: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := myDatabase()
			db := myDatabase(tc.update)
			newStrategy(t).PrepareForUpdate(context.Background(), db, old)
			if db.Generation != tc.wantGeneration {
				t.Errorf("generation = %d, want %d", db.Generation, tc.wantGeneration)
			}
			if diff := cmp.Diff(old.Status, db.Status); diff != "" {
				t.Errorf("status changed through the main resource (-old +new):\n%s", diff)
			}
		})
	}
}

func TestStatusPrepareForUpdate(t *testing.T) {
	old := myDatabase()
	db := myDatabase(func(d *example.MyDatabase) {
		d.Spec.Replicas = 7
		d.Status.ReadyReplicas = 2
		d.Labels = map[string]string{"via": "status"}
		d.Finalizers = []string{"example.com/block"}
	})
	NewStatusStrategy(newStrategy(t)).PrepareForUpdate(context.Background(), db, old)
	if diff := cmp.Diff(old.Spec, db.Spec); diff != "" {
		t.Errorf("spec changed through /status (-old +new):\n%s", diff)
	}
	if diff := cmp.Diff(old.ObjectMeta, db.ObjectMeta); diff != "" {
		t.Errorf("metadata changed through /status (-old +new):\n%s", diff)
	}
	if db.Status.ReadyReplicas != 2 {
		t.Errorf("status.readyReplicas = %d, want 2", db.Status.ReadyReplicas)
	}
	if db.Generation != old.Generation {
		t.Errorf("generation = %d, want %d", db.Generation, old.Generation)
	}
}

func TestResetFields(t *testing.T) {
	s := newStrategy(t)
	if got := s.GetResetFields()["example.com/v1"].String(); got != ".status" {
		t.Errorf("main resource resets %q, want .status", got)
	}
	if got := NewStatusStrategy(s).GetResetFields()["example.com/v1"].String(); got != ".spec\n.metadata.annotations\n.metadata.finalizers\n.metadata.labels\n.metadata.ownerReferences" {
		t.Errorf("/status resets %q, want spec and the metadata it restores", got)
	}
}

func TestValidateGoesThroughStrategy(t *testing.T) {
	s := newStrategy(t)
	if errs := s.Validate(context.Background(), myDatabase(func(d *example.MyDatabase) { d.Spec.Replicas = 0 })); len(errs) != 1 {
		t.Errorf("create validation: got %v, want one error", errs)
	}
	shrunk := myDatabase(func(d *example.MyDatabase) { d.Spec.StorageSize = resource.MustParse("1Gi") })
	if errs := s.ValidateUpdate(context.Background(), shrunk, myDatabase()); len(errs) != 1 {
		t.Errorf("update validation: got %v, want one error", errs)
	}
	bad := myDatabase(func(d *example.MyDatabase) { d.Status.ReadyReplicas = 4 })
	if errs := NewStatusStrategy(s).ValidateUpdate(context.Background(), bad, myDatabase()); len(errs) != 1 {
		t.Errorf("status validation: got %v, want one error", errs)
	}
}

func TestSelectableFields(t *testing.T) {
	tests := []struct {
		name     string
		db       *example.MyDatabase
		selector string
		want     bool
	}{
		{name: "engine matches", db: myDatabase(), selector: "spec.engine=mysql", want: true},
		{name: "engine differs", db: myDatabase(), selector: "spec.engine=postgres", want: false},
		{name: "version", db: myDatabase(), selector: "spec.version=8.4", want: true},
		{name: "ready", db: myDatabase(), selector: "status.ready=True", want: true},
		{name: "no condition yet is Unknown", db: myDatabase(func(d *example.MyDatabase) { d.Status = example.MyDatabaseStatus{} }),
			selector: "status.ready=Unknown", want: true},
		{name: "name and namespace", db: myDatabase(), selector: "metadata.name=prod-mysql,metadata.namespace=default", want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := fields.ParseSelector(tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			if got := sel.Matches(SelectableFields(tc.db)); got != tc.want {
				t.Errorf("%s matches = %v, want %v", tc.selector, got, tc.want)
			}
		})
	}
}

func TestConvertToTable(t *testing.T) {
	db := myDatabase(func(d *example.MyDatabase) {
		d.Status.ReadyReplicas, d.Status.UpdatedReplicas = 2, 1
		d.Status.CurrentPrimary, d.Status.TargetPrimary = "prod-mysql-0", "prod-mysql-2"
	})
	table, err := (&tableConvertor{}).ConvertToTable(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			headers = append(headers, c.Name)
		}
	}
	wantHeaders := []string{"Name", "Engine", "Version", "Replicas", "Ready", "Up-to-date", "Primary", "Storage", "Status", "Age"}
	if diff := cmp.Diff(wantHeaders, headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("got %d rows, want 1", len(table.Rows))
	}
	want := []interface{}{"prod-mysql", "mysql", "8.4", int64(3), "2/3", int64(1), "prod-mysql-0->prod-mysql-2", "50Gi", "Ready", "<unknown>",
		"prod-mysql.default.svc:3306", "<default>", "Retain", "<none>", "<unknown>"}
	if diff := cmp.Diff(want, table.Rows[0].Cells); diff != "" {
		t.Errorf("cells (-want +got):\n%s", diff)
	}

	// With the managers' answers: each replica's lag, read at the time.
	lag := 0.25
	convertor := &tableConvertor{}
	convertor.lag.Store(&livelag.Reader{
		Credentials: func(string, string) (*api.Credentials, error) { return &api.Credentials{}, nil },
		Managers: statusFunc(func(host string) (*api.Status, error) {
			return &api.Status{Name: map[string]string{"10.0.0.2": "prod-mysql-1", "10.0.0.3": "prod-mysql-2"}[host], Streaming: true, LagSeconds: &lag}, nil
		}),
	})
	db.Status.Instances = []example.InstanceStatus{
		{Name: "prod-mysql-0", Role: example.InstanceRolePrimary, Address: "10.0.0.1"},
		{Name: "prod-mysql-1", Role: example.InstanceRoleReplica, Address: "10.0.0.2"},
		{Name: "prod-mysql-2", Role: example.InstanceRoleReplica, Address: "10.0.0.3"},
	}
	table, err = convertor.ConvertToTable(context.Background(), &example.MyDatabaseList{Items: []example.MyDatabase{*db}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := table.Rows[0].Cells[len(table.Rows[0].Cells)-1]; got != "prod-mysql-1=0.25s prod-mysql-2=0.25s" {
		t.Errorf("Replica Lag = %q", got)
	}
}

type statusFunc func(host string) (*api.Status, error)

func (f statusFunc) Status(_ context.Context, host string, _ api.Auth) (*api.Status, error) {
	return f(host)
}

func TestRecoverableTo(t *testing.T) {
	to := metav1.NewTime(time.Date(2026, 12, 5, 14, 7, 0, 0, time.UTC))
	for want, db := range map[string]*example.MyDatabase{
		"<none>": myDatabase(),
		"2026-12-05T14:07:00Z": myDatabase(func(d *example.MyDatabase) {
			d.Status.Recoverability = &example.Recoverability{LastRecoverableTime: &to}
		}),
		"2026-12-05T14:07:00Z (ArchiveFailing)": myDatabase(func(d *example.MyDatabase) {
			d.Status.Recoverability = &example.Recoverability{LastRecoverableTime: &to}
			d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: example.ConditionContinuousArchiving, Status: metav1.ConditionFalse, Reason: "ArchiveFailing"})
		}),
	} {
		if got := recoverableTo(db); got != want {
			t.Errorf("recoverableTo = %q, want %q", got, want)
		}
	}
}

func TestPhase(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	now := metav1.Now()
	tests := []struct {
		name string
		db   *example.MyDatabase
		want string
	}{
		{name: "new", db: myDatabase(func(d *example.MyDatabase) { d.Status = example.MyDatabaseStatus{} }), want: "Pending"},
		{name: "ready", db: myDatabase(), want: "Ready"},
		{name: "hibernated", db: myDatabase(func(d *example.MyDatabase) {
			d.Status.Conditions = append(d.Status.Conditions, cond(example.ConditionHibernated, metav1.ConditionTrue))
			d.Status.Conditions[len(d.Status.Conditions)-1].Reason = "Hibernated"
		}), want: "Hibernated"},
		{name: "ready for an older generation", db: myDatabase(func(d *example.MyDatabase) { d.Generation = 5 }), want: "Pending"},
		{name: "progressing", db: myDatabase(func(d *example.MyDatabase) {
			d.Status.Conditions = []metav1.Condition{cond(example.ConditionProgressing, metav1.ConditionTrue)}
		}), want: "Progressing"},
		{name: "rolled out, primary not serving", db: myDatabase(func(d *example.MyDatabase) {
			d.Status.Conditions = []metav1.Condition{cond(example.ConditionReady, metav1.ConditionFalse), cond(example.ConditionProgressing, metav1.ConditionFalse)}
		}), want: "NotReady"},
		{name: "degraded wins over ready", db: myDatabase(func(d *example.MyDatabase) {
			d.Status.Conditions = append(d.Status.Conditions, cond(example.ConditionDegraded, metav1.ConditionTrue))
		}), want: "Degraded"},
		{name: "deleting", db: myDatabase(func(d *example.MyDatabase) { d.DeletionTimestamp = &now }), want: "Terminating"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Phase(tc.db); got != tc.want {
				t.Errorf("Phase = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFinalBackupFinalizer(t *testing.T) {
	s := newStrategy(t)
	withFinal := func(d *example.MyDatabase) { d.Spec.Backup = &example.BackupPolicy{FinalBackup: true, Retention: 7} }

	db := myDatabase(withFinal)
	s.PrepareForCreate(context.Background(), db)
	if fmt.Sprint(db.Finalizers) != "[example.com/final-backup]" {
		t.Errorf("finalizers on create %v", db.Finalizers)
	}

	off := myDatabase(func(d *example.MyDatabase) { d.Finalizers = []string{"other", example.FinalBackupFinalizer} })
	s.PrepareForUpdate(context.Background(), off, myDatabase(withFinal))
	if fmt.Sprint(off.Finalizers) != "[other]" {
		t.Errorf("turning finalBackup off left finalizers %v", off.Finalizers)
	}

	now := metav1.Now()
	removedByHand := myDatabase(withFinal, func(d *example.MyDatabase) { d.DeletionTimestamp = &now })
	s.PrepareForUpdate(context.Background(), removedByHand, myDatabase(withFinal))
	if len(removedByHand.Finalizers) != 0 {
		t.Errorf("the finalizer came back during deletion: %v", removedByHand.Finalizers)
	}
}

func TestDeleteDataFinalizer(t *testing.T) {
	s := newStrategy(t)
	withDelete := func(d *example.MyDatabase) { d.Spec.DeletionPolicy = example.DeletionPolicyDelete }

	db := myDatabase(withDelete)
	s.PrepareForCreate(context.Background(), db)
	if fmt.Sprint(db.Finalizers) != "[example.com/delete-data]" {
		t.Errorf("finalizers on create %v", db.Finalizers)
	}
	retain := myDatabase()
	s.PrepareForCreate(context.Background(), retain)
	if len(retain.Finalizers) != 0 {
		t.Errorf("a database that keeps its data got finalizers %v", retain.Finalizers)
	}

	kept := myDatabase(func(d *example.MyDatabase) { d.Finalizers = []string{"other", example.DeleteDataFinalizer} })
	s.PrepareForUpdate(context.Background(), kept, myDatabase(withDelete))
	if fmt.Sprint(kept.Finalizers) != "[other]" {
		t.Errorf("turning to Retain left finalizers %v", kept.Finalizers)
	}

	// While the deletion waits, the controller removes the finalizer once
	// the data is gone; a user may still switch to Retain and keep it.
	now := metav1.Now()
	deleting := func(d *example.MyDatabase) { d.DeletionTimestamp = &now }
	done := myDatabase(withDelete, deleting)
	s.PrepareForUpdate(context.Background(), done, myDatabase(withDelete, deleting))
	if len(done.Finalizers) != 0 {
		t.Errorf("the finalizer came back during deletion: %v", done.Finalizers)
	}
	changedMind := myDatabase(deleting, func(d *example.MyDatabase) { d.Finalizers = []string{example.DeleteDataFinalizer} })
	s.PrepareForUpdate(context.Background(), changedMind, myDatabase(withDelete, deleting))
	if len(changedMind.Finalizers) != 0 {
		t.Errorf("switching to Retain during deletion left finalizers %v", changedMind.Finalizers)
	}
}

// TestZeroManagedFieldsTimesAreDropped: a managedFields entry with the zero
// time (protobuf can carry one) is stored without a time, as JSON reads it
// back; a real time is kept.
func TestZeroManagedFieldsTimesAreDropped(t *testing.T) {
	now := metav1.Now()
	db := myDatabase(func(d *example.MyDatabase) {
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "zero", Time: &metav1.Time{}}, {Manager: "real", Time: &now}}
	})
	newStrategy(t).PrepareForCreate(context.Background(), db)
	if db.ManagedFields[0].Time != nil || db.ManagedFields[1].Time == nil {
		t.Errorf("times after create: %v, %v; want none and the real one", db.ManagedFields[0].Time, db.ManagedFields[1].Time)
	}
	update := myDatabase(func(d *example.MyDatabase) {
		d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "zero", Time: &metav1.Time{}}}
	})
	NewStatusStrategy(newStrategy(t)).PrepareForUpdate(context.Background(), update, myDatabase())
	if update.ManagedFields[0].Time != nil {
		t.Errorf("a /status write keeps the zero time")
	}
}
