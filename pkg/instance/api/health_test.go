package api_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pki/pkitest"
)

// A stream whose manager stops sending (its process frozen, its node gone
// quiet) is lost after HealthDeadline, though its connection stays open.
func TestWatchHealthEndsWhenLinesStop(t *testing.T) {
	database := pkitest.New()
	sent := make(chan struct{})
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(Health{Ready: true, Role: RolePrimary})
		w.(http.Flusher).Flush()
		close(sent)
		select { // silent, the connection open
		case <-release:
		case <-r.Context().Done():
		}
	}))
	srv.TLS = serverTLS(t, database, "db-0")
	srv.StartTLS()
	t.Cleanup(func() { close(release); srv.Close() })
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	c := &Client{Port: p}
	var lines []Health
	start := time.Now()
	err := c.WatchHealth(context.Background(), host, Auth{Credentials: database.Controller(), Name: "db-0"}, func(h Health) { lines = append(lines, h) })
	took := time.Since(start)
	<-sent
	if err == nil || !strings.Contains(err.Error(), "no health line") || len(lines) != 1 || !lines[0].Ready {
		t.Errorf("WatchHealth: %v after lines %+v; want the line, then no health line", err, lines)
	}
	if took < HealthDeadline || took > HealthDeadline+time.Second {
		t.Errorf("lost after %s, want about %s", took, HealthDeadline)
	}
}

func TestHealthChangedIgnoresTheReasonsWords(t *testing.T) {
	a := Health{Ready: false, Reason: "replication lag 3s", Role: RoleReplica, Primary: "db-0", EngineRunning: true}
	b := a
	b.Reason = "replication lag 4s"
	if a.Changed(b) {
		t.Error("a new reason's words are a change")
	}
	b.Ready = true
	if !a.Changed(b) {
		t.Error("readiness is not a change")
	}
}
