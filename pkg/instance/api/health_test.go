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

// The digest stays while only what moves by itself moves (a position, lag,
// bytes of a backup in flight, files waiting) and changes with anything
// the controller would act on or write.
func TestStatusDigestIgnoresWhatMovesByItself(t *testing.T) {
	lag := int64(10)
	base := Status{Name: "db-1", Role: RoleReplica, Primary: "db-0", Ready: true, EngineRunning: true, Streaming: true,
		Position: &Position{Timeline: 1, LSN: "0/3000000"}, LagBytes: &lag,
		Backup:  &Operation{ID: "b1", Phase: OperationRunning, Bytes: 10},
		Archive: &ArchiveStatus{Configured: true, Archived: 3, LastArchived: "000000010000000000000003", Pending: 1}}
	moved := base
	moved.Reason = "catching up"
	moved.Position = &Position{Timeline: 1, LSN: "0/4000000"}
	more := int64(99)
	moved.LagBytes = &more
	moved.Backup = &Operation{ID: "b1", Phase: OperationRunning, Bytes: 1 << 20}
	moved.Archive = &ArchiveStatus{Configured: true, Archived: 3, LastArchived: "000000010000000000000003", Pending: 7}
	if StatusDigest(base) != StatusDigest(moved) {
		t.Error("positions, lag, bytes in flight or files waiting changed the digest")
	}
	if base.Backup.Bytes != 10 || base.Archive.Pending != 1 || base.Position == nil {
		t.Error("StatusDigest changed the status it was given")
	}
	for name, change := range map[string]func(*Status){
		"a backup that finished": func(s *Status) { s.Backup = &Operation{ID: "b1", Phase: OperationSucceeded, Bytes: 10} },
		"a file archived": func(s *Status) {
			s.Archive = &ArchiveStatus{Configured: true, Archived: 4, LastArchived: "000000010000000000000004", Pending: 1}
		},
		"a replica that stops streaming": func(s *Status) { s.Streaming = false },
		"an engine restart":              func(s *Status) { s.Restarts = 1 },
		"new parameters":                 func(s *Status) { s.Parameters = "p2" },
	} {
		changed := base
		change(&changed)
		if StatusDigest(changed) == StatusDigest(base) {
			t.Errorf("%s did not change the digest", name)
		}
	}
}

func TestHealthCarriesThePositionAndTheDigest(t *testing.T) {
	lag := 2.5
	s := Status{Name: "db-1", Role: RoleReplica, Ready: true, Position: &Position{Timeline: 1, LSN: "0/5000000"}, LagSeconds: &lag}
	h := HealthOf(s)
	if h.Position == nil || h.Position.LSN != "0/5000000" || h.LagSeconds == nil || *h.LagSeconds != 2.5 || h.Digest != StatusDigest(s) || h.Digest == "" {
		t.Errorf("HealthOf: %+v", h)
	}
	moved := h
	moved.Position, moved.Digest = &Position{Timeline: 1, LSN: "0/6000000"}, "other"
	if h.Changed(moved) {
		t.Error("a position or digest is a change to act on at once")
	}
}
