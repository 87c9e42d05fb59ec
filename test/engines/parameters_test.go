//go:build engines

package engines

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/parameters"
)

// parameterCase is how one engine's parameters are checked: a live one
// (taken without a restart) with a value other than its default, the query
// that reads it and what it reads before and after; a start one (read only
// when the engine starts) likewise.
type parameterCase struct {
	live, liveValue, liveQuery, liveDefault, liveRead string
	start, startValue, startQuery, startRead          string
}

var parameterCases = map[string]parameterCase{
	"postgres": {live: "work_mem", liveValue: "12MB", liveQuery: "SHOW work_mem", liveDefault: "4MB", liveRead: "12MB",
		start: "max_connections", startValue: "123", startQuery: "SHOW max_connections", startRead: "123"},
	"mariadb": {live: "max_connections", liveValue: "321", liveQuery: "SELECT @@GLOBAL.max_connections", liveDefault: "151", liveRead: "321",
		start: "performance_schema", startValue: "ON", startQuery: "SELECT @@GLOBAL.performance_schema", startRead: "1"},
	"mysql": {live: "max_connections", liveValue: "321", liveQuery: "SELECT @@GLOBAL.max_connections", liveDefault: "151", liveRead: "321",
		start: "performance_schema", startValue: "OFF", startQuery: "SELECT @@GLOBAL.performance_schema", startRead: "0"},
}

// testParameters: a live parameter in the topology reaches the primary and
// a replica without an engine restart (the same engine pid), and the
// managers report its hash; a replica restarted with --engine-parameter
// reads the start one and gets the live one again; a value off the catalog
// (as a topology could carry only by a bug) is refused by the manager and
// reported, and the instance serves on with what it had; dropping the live
// parameter brings the engine's default back.
func testParameters(t *testing.T, c *cluster, p, r *node, fig *figures) {
	pc := parameterCases[c.spec.name]
	read := func(n *node, query string) string {
		t.Helper()
		var v string
		if err := n.app().QueryRowContext(context.Background(), query).Scan(&v); err != nil {
			t.Fatalf("%s on %s: %v", query, n.name, err)
		}
		return v
	}
	waitReported := func(n *node, want string) api.Status {
		t.Helper()
		return n.waitStatus(time.Minute, "parameters "+want, func(s api.Status) bool { return s.Parameters == want && s.ParametersError == "" })
	}
	before := map[*node]int{}
	for _, n := range []*node{p, r} {
		s, err := n.status()
		if err != nil {
			t.Fatal(err)
		}
		before[n] = s.EnginePID
		if got := read(n, pc.liveQuery); got != pc.liveDefault {
			t.Fatalf("%s on %s reads %s before any parameter, want the default %s", pc.liveQuery, n.name, got, pc.liveDefault)
		}
	}
	// A session opened before the change (PostgreSQL: a reload reaches
	// open sessions too).
	held, err := p.app().Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	live := parameters.Encode(map[string]string{pc.live: pc.liveValue})
	start := time.Now()
	c.parameters = live
	c.setPrimary(p)
	for _, n := range []*node{p, r} {
		s := waitReported(n, parameters.Hash(live))
		if s.EnginePID != before[n] {
			t.Errorf("%s: the engine restarted (pid %d, was %d) for a live parameter", n.name, s.EnginePID, before[n])
		}
		if got := read(n, pc.liveQuery); got != pc.liveRead {
			t.Errorf("%s on %s reads %s, want %s", pc.liveQuery, n.name, got, pc.liveRead)
		}
	}
	fig.add("a live parameter (%s) on the primary and a replica, no restart: %.2fs", pc.live, time.Since(start).Seconds())
	if c.spec.name == "postgres" {
		var v string
		if err := held.QueryRowContext(context.Background(), pc.liveQuery).Scan(&v); err != nil || v != pc.liveRead {
			t.Errorf("a session opened before the reload reads %q (%v), want %s", v, err, pc.liveRead)
		}
	}

	// A start parameter: the replica restarted with it (as a new pod of
	// the new template), taking the live one again too.
	r.extraArgs = []string{fmt.Sprintf("--engine-parameter=%s=%s", pc.start, pc.startValue)}
	r.stop()
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)
	waitReported(r, parameters.Hash(live))
	if got := read(r, pc.startQuery); got != pc.startRead {
		t.Errorf("%s on the restarted replica reads %s, want %s", pc.startQuery, got, pc.startRead)
	}
	if got := read(r, pc.liveQuery); got != pc.liveRead {
		t.Errorf("%s on the restarted replica reads %s, want %s again", pc.liveQuery, got, pc.liveRead)
	}
	// A live parameter passed as a start one is refused at once.
	r.extraArgs = []string{fmt.Sprintf("--engine-parameter=%s=%s", pc.live, pc.liveValue)}
	r.stop()
	r.start()
	select {
	case <-r.doneChan():
	case <-time.After(30 * time.Second):
		t.Errorf("the manager started with a live parameter as --engine-parameter")
	}
	r.extraArgs = nil
	r.start()
	r.waitReady(2*time.Minute, api.RoleReplica)

	// Off the catalog: refused by the manager, reported, nothing changed.
	c.parameters = parameters.Encode(map[string]string{pc.live: "lots"})
	c.setPrimary(p)
	s := p.waitStatus(time.Minute, "a parameters error", func(s api.Status) bool { return s.ParametersError != "" })
	if !strings.Contains(s.ParametersError, pc.live) || !s.Ready {
		t.Errorf("status with a refused parameter: ready %v, error %q", s.Ready, s.ParametersError)
	}
	if got := read(p, pc.liveQuery); got != pc.liveRead {
		t.Errorf("after a refused value %s reads %s, want %s kept", pc.liveQuery, got, pc.liveRead)
	}

	// None: the engine's default again, everywhere.
	c.parameters = ""
	c.setPrimary(p)
	for _, n := range []*node{p, r} {
		waitReported(n, "")
		if got := read(n, pc.liveQuery); got != pc.liveDefault {
			t.Errorf("%s on %s reads %s after the parameter was dropped, want the default %s", pc.liveQuery, n.name, got, pc.liveDefault)
		}
	}
}
