package instance

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// objectsDriver is the fake driver that keeps databases and roles: it
// records each request and holds each reconciliation until released.
type objectsDriver struct {
	*fakeDriver
	mu      sync.Mutex
	asked   []api.ObjectsRequest
	release chan struct{}
}

func (d *objectsDriver) ReconcileObjects(_ context.Context, req api.ObjectsRequest) []api.ObjectResult {
	d.mu.Lock()
	d.asked = append(d.asked, req)
	d.mu.Unlock()
	<-d.release
	results := NewObjectResults(req)
	for _, r := range req.Roles {
		if r.Name == "refused" {
			results.Fail(api.ObjectRole, r.Name, errors.New("the engine said no"))
		}
	}
	return results.List()
}

func TestDatabasesAndRolesAreReconciledOnTheReadyPrimaryForTheController(t *testing.T) {
	driver := &objectsDriver{fakeDriver: &fakeDriver{}, release: make(chan struct{})}
	h := startManagerWith(t, driver, driver.fakeDriver, "db-0", nil)
	h.src <- Topology{Primary: "db-1", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	h.wait("a running replica", func(s api.Status) bool { return s.EngineRunning })

	req := api.ObjectsRequest{Hash: "h1",
		Databases: []api.DatabaseObject{{Name: "orders", Owner: "alice"}},
		Roles:     []api.RoleObject{{Name: "alice", Password: "secret"}, {Name: "refused", Password: "x"}}}
	client := &api.Client{}
	auth := api.Auth{Credentials: testDatabase.Controller(), Name: "db-0"}
	if _, err := client.ReconcileObjects(context.Background(), h.addr, auth, req); !errors.Is(err, api.ErrBusy) {
		t.Errorf("a replica took databases and roles: %v, want ErrBusy (409)", err)
	}
	h.src <- Topology{Primary: "db-0"}
	h.wait("a ready primary", func(s api.Status) bool { return s.Ready && s.Role == api.RolePrimary })

	// Only the controller's certificate (the API server's) may ask: the
	// request holds passwords.
	if code, _ := h.callAs(testDatabase.Instance("db-1"), "POST", api.PathObjects, req); code != http.StatusForbidden {
		t.Errorf("an instance asked: %d, want 403", code)
	}
	for name, bad := range map[string]api.ObjectsRequest{
		"a role name with a quote":     {Hash: "x", Roles: []api.RoleObject{{Name: "a'b", Password: "p"}}},
		"a role without a password":    {Hash: "x", Roles: []api.RoleObject{{Name: "a"}}},
		"a password of no ASCII":       {Hash: "x", Roles: []api.RoleObject{{Name: "a", Password: "pässword"}}},
		"an unknown level of access":   {Hash: "x", Roles: []api.RoleObject{{Name: "a", Password: "p", Privileges: map[string]api.Access{"app": "Admin"}}}},
		"a database name with a space": {Hash: "x", Databases: []api.DatabaseObject{{Name: "a b"}}},
	} {
		if code, _ := h.callAs(testDatabase.Controller(), "POST", api.PathObjects, bad); code != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422", name, code)
		}
	}

	report, err := client.ReconcileObjects(context.Background(), h.addr, auth, req)
	if err != nil || !report.Running || report.Hash != "h1" {
		t.Fatalf("asked: %+v, %v; want it running h1", report, err)
	}
	// The same request again while it runs joins it; another waits.
	if again, err := client.ReconcileObjects(context.Background(), h.addr, auth, req); err != nil || !again.Running {
		t.Errorf("the same request again: %+v, %v", again, err)
	}
	other := req
	other.Hash = "h2"
	if _, err := client.ReconcileObjects(context.Background(), h.addr, auth, other); !errors.Is(err, api.ErrBusy) {
		t.Errorf("another request while one runs: %v, want ErrBusy", err)
	}
	if s := h.m.Status(context.Background()); s.Objects == nil || !s.Objects.Running {
		t.Errorf("the status while it runs: %+v", s.Objects)
	}
	close(driver.release)
	s := h.wait("the reconciliation's end", func(s api.Status) bool { return s.Objects != nil && !s.Objects.Running })
	want := []api.ObjectResult{{Kind: api.ObjectDatabase, Name: "orders"}, {Kind: api.ObjectRole, Name: "alice"},
		{Kind: api.ObjectRole, Name: "refused", Error: "the engine said no"}}
	if diff := cmp.Diff(want, s.Objects.Results); diff != "" || s.Objects.ResultsHash != "h1" || s.Objects.FinishTime == nil || !s.Objects.Failed() {
		t.Errorf("the report: %+v (-want +got results:\n%s)", s.Objects, diff)
	}
	driver.mu.Lock()
	defer driver.mu.Unlock()
	if len(driver.asked) != 1 || driver.asked[0].Roles[0].Password != "secret" {
		t.Errorf("the driver was asked %d times: %+v", len(driver.asked), driver.asked)
	}
}
