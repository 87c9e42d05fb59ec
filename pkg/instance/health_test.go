package instance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// The health stream sends a line every api.HealthInterval, says a change
// within one, admits only the controller, and ends when the manager does.
func TestHealthStreamSaysChangesAndEndsWithTheManager(t *testing.T) {
	h := startManager(t, &fakeDriver{}, "db-0")
	client := &api.Client{}
	if err := client.WatchHealth(context.Background(), h.addr, api.Auth{Credentials: testDatabase.Instance("db-1"), Name: "db-0"}, func(api.Health) {}); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("an instance's certificate: %v, want 403", err)
	}
	lines := make(chan api.Health, 1000)
	ended := make(chan error, 1)
	go func() {
		ended <- client.WatchHealth(context.Background(), h.addr, api.Auth{Credentials: testDatabase.Controller(), Name: "db-0"}, func(x api.Health) { lines <- x })
	}()
	next := func(what string, cond func(api.Health) bool) time.Time {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case x := <-lines:
				if cond(x) {
					return time.Now()
				}
			case err := <-ended:
				t.Fatalf("waiting for %s, the stream ended: %v", what, err)
			case <-deadline:
				t.Fatalf("no line with %s within 5s", what)
			}
		}
	}
	next("a waiting instance", func(x api.Health) bool { return !x.Ready && x.Role == api.RoleWaiting })
	asked := time.Now()
	h.src <- Topology{Primary: "db-0", PrimaryHost: "127.0.0.1", PrimaryPort: 5432}
	if said := next("a ready primary", func(x api.Health) bool { return x.Ready && x.Role == api.RolePrimary && x.EngineRunning }); said.Sub(asked) > 2*api.HealthInterval+time.Second {
		t.Errorf("the change was said %s after it was asked", said.Sub(asked))
	}
	// Nothing changes, and lines still come: the controller tells a
	// quiet instance from a lost one.
	start := time.Now()
	for range 4 {
		next("a heartbeat", func(api.Health) bool { return true })
	}
	if took := time.Since(start); took > 4*api.HealthInterval+time.Second {
		t.Errorf("4 lines took %s", took)
	}
	h.stop()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the stream ended without an error")
		}
	case <-time.After(api.HealthDeadline + 2*time.Second):
		t.Error("the stream outlived its manager")
	}
}
