package mydatabase

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

// fakeObjects is the primaries' managers' POST /v1/objects: it records
// each request and answers it is running.
type fakeObjects struct {
	mu    sync.Mutex
	asked []api.ObjectsRequest
	hosts []string
}

func (f *fakeObjects) ReconcileObjects(_ context.Context, host string, auth api.Auth, req api.ObjectsRequest) (*api.ObjectsReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked, f.hosts = append(f.asked, req), append(f.hosts, host+"/"+auth.Name)
	return &api.ObjectsReport{Hash: req.Hash, Running: true}, nil
}

func withObjects(d *examplev1.MyDatabase) {
	d.Spec.Roles = []examplev1.RoleSpec{
		{Name: "alice", Ensure: examplev1.EnsurePresent, PasswordSecret: &examplev1.SecretKeySelector{Name: "alice-password", Key: "password"},
			Privileges: []examplev1.DatabasePrivilege{{Database: "app", Access: examplev1.DatabaseAccessReadOnly}}, ConnectionLimit: ptrTo[int32](5)},
		{Name: "bob", Ensure: examplev1.EnsurePresent, PasswordSecret: &examplev1.SecretKeySelector{Name: "bob-password", Key: "password"}},
		{Name: "gone", Ensure: examplev1.EnsureAbsent},
	}
	d.Spec.Databases = []examplev1.DatabaseSpec{
		{Name: "orders", Owner: "alice", Ensure: examplev1.EnsurePresent},
		{Name: "stock", Owner: "bob", Ensure: examplev1.EnsurePresent},
	}
}

func ptrTo[T any](v T) *T { return &v }

func passwordSecret(db *examplev1.MyDatabase, name, password, rv string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: db.Namespace, UID: types.UID("uid-" + name), ResourceVersion: rv},
		Data: map[string][]byte{"password": []byte(password + "\n")}}
}

// TestRolesAndDatabasesReachTheReadyPrimary: the primary's manager is given
// the roles whose passwords can be read (bob's Secret does not exist: he
// and the database he owns wait), then its report becomes the status, and
// the same request is not sent again until it is due.
func TestRolesAndDatabasesReachTheReadyPrimary(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase(withObjects))
	children = append(children, passwordSecret(db, "alice-password", "s3cret", "7"))
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(f.objects.asked) != 1 || f.objects.hosts[0] != "10.244.0.10/"+db.Name+"-0" {
		t.Fatalf("asked %d times (%v), want once of the primary", len(f.objects.asked), f.objects.hosts)
	}
	req := f.objects.asked[0]
	wantRoles := []api.RoleObject{
		{Name: "alice", Password: "s3cret", ConnectionLimit: 5, Privileges: map[string]api.Access{"app": api.AccessReadOnly}},
		{Name: "gone", Absent: true},
	}
	if diff := cmp.Diff(wantRoles, req.Roles); diff != "" {
		t.Errorf("roles (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]api.DatabaseObject{{Name: "orders", Owner: "alice"}}, req.Databases); diff != "" {
		t.Errorf("databases (-want +got):\n%s", diff)
	}
	if strings.Contains(req.Hash, "s3cret") || req.Hash == "" {
		t.Errorf("hash %q", req.Hash)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRolesAndDatabasesApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonApplyingObjects || !strings.Contains(c.Message, `Secret "bob-password" does not exist`) {
		t.Errorf("condition while it runs: %+v", c)
	}

	// The manager reports: alice and gone as asked, orders refused.
	finished := now.Add(time.Second)
	p := statuses["10.244.0.10"]
	p.Objects = &api.ObjectsReport{Hash: req.Hash, ResultsHash: req.Hash, FinishTime: &finished, Results: []api.ObjectResult{
		{Kind: api.ObjectDatabase, Name: "orders", Error: `invalid locale name: "xx"`},
		{Kind: api.ObjectRole, Name: "alice"}, {Kind: api.ObjectRole, Name: "gone"}}}
	statuses["10.244.0.10"] = p
	db.Status = status
	f = newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(f.objects.asked) != 0 {
		t.Errorf("the same request was sent again a second after it failed")
	}
	status = updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	wantRolesStatus := []examplev1.ManagedObjectStatus{
		{Name: "alice", State: examplev1.ManagedObjectPresent, PasswordSecretVersion: "7"},
		{Name: "bob", State: examplev1.ManagedObjectPending, Message: `Secret "bob-password" does not exist`},
		{Name: "gone", State: examplev1.ManagedObjectAbsent},
	}
	if diff := cmp.Diff(wantRolesStatus, status.Roles); diff != "" {
		t.Errorf("status.roles (-want +got):\n%s", diff)
	}
	wantDatabasesStatus := []examplev1.ManagedObjectStatus{
		{Name: "orders", State: examplev1.ManagedObjectFailed, Message: `invalid locale name: "xx"`},
		{Name: "stock", State: examplev1.ManagedObjectPending, Message: `waits for its owner "bob": Secret "bob-password" does not exist`},
	}
	if diff := cmp.Diff(wantDatabasesStatus, status.Databases); diff != "" {
		t.Errorf("status.databases (-want +got):\n%s", diff)
	}
	c = meta.FindStatusCondition(status.Conditions, examplev1.ConditionRolesAndDatabasesApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonObjectsFailed || !strings.Contains(c.Message, "database orders: invalid locale") {
		t.Errorf("condition after a refusal: %+v", c)
	}
	select {
	case e := <-f.recorder.Events:
		if !strings.HasPrefix(e, "Warning RolesAndDatabasesFailed") || !strings.Contains(e, "invalid locale") {
			t.Errorf("event %q, want a Warning RolesAndDatabasesFailed with the engine's words", e)
		}
	default:
		t.Errorf("no event for the refusal")
	}
}

func TestObjectsDue(t *testing.T) {
	at := now
	later := func(d time.Duration) *time.Time { t := at.Add(-d); return &t }
	for _, tc := range []struct {
		name string
		r    *api.ObjectsReport
		want bool
	}{
		{"never asked (a new or restarted manager)", nil, true},
		{"running the same", &api.ObjectsReport{Hash: "h", Running: true}, false},
		{"running another", &api.ObjectsReport{Hash: "old", Running: true}, false},
		{"done with another", &api.ObjectsReport{Hash: "old", ResultsHash: "old", FinishTime: later(time.Second)}, true},
		{"done with the same just now", &api.ObjectsReport{Hash: "h", ResultsHash: "h", FinishTime: later(time.Second)}, false},
		{"done with the same long ago: put back what was changed by hand", &api.ObjectsReport{Hash: "h", ResultsHash: "h", FinishTime: later(objectsResend)}, true},
		{"failed just now", &api.ObjectsReport{Hash: "h", ResultsHash: "h", FinishTime: later(time.Second), Results: []api.ObjectResult{{Error: "x"}}}, false},
		{"failed a minute ago", &api.ObjectsReport{Hash: "h", ResultsHash: "h", FinishTime: later(objectsRetry), Results: []api.ObjectResult{{Error: "x"}}}, true},
	} {
		if got := objectsDue(tc.r, "h", at); got != tc.want {
			t.Errorf("%s: due = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestObjectsHashFollowsTheSecretNotThePassword: a new version of a
// password Secret is a new request; the password itself is in no hash.
func TestObjectsHashFollowsTheSecretNotThePassword(t *testing.T) {
	req := api.ObjectsRequest{Roles: []api.RoleObject{{Name: "alice", Password: "one"}}}
	a := objectsHash(req, map[string]string{"alice": "uid/1"})
	req.Roles[0].Password = "two"
	if b := objectsHash(req, map[string]string{"alice": "uid/1"}); b != a {
		t.Errorf("the password changed the hash")
	}
	if c := objectsHash(req, map[string]string{"alice": "uid/2"}); c == a {
		t.Errorf("a new version of the Secret did not")
	}
}

// TestASecretThatCannotBeReadStopsNothingElse: a failed read of a password
// Secret leaves the role waiting with why, and the sync (the primary's
// health, a failover) goes on.
func TestASecretThatCannotBeReadStopsNothingElse(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase(withObjects))
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	c := f.newController()
	f.kubeClient.PrependReactor("get", "secrets", func(a core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is away")
	})
	if err := c.sync(context.Background(), cache.ObjectName{Namespace: db.Namespace, Name: db.Name}); err != nil {
		t.Fatalf("the sync failed for a Secret: %v", err)
	}
	status := db.Status
	if len(writes(f.mydbClient.Actions())) > 0 {
		status = updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	}
	if len(status.Roles) == 0 || status.Roles[0].State != examplev1.ManagedObjectPending || !strings.Contains(status.Roles[0].Message, "etcd is away") {
		t.Errorf("status.roles %+v, want alice Pending with the read's error", status.Roles)
	}
}
