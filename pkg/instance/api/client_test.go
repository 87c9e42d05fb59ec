package api

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// manager answers like an instance manager: its status, the operation it
// knows, 404, 409 or 422, and 401 without the replication user's password.
func manager(t *testing.T) (*Client, string) {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if user, pass, ok := r.BasicAuth(); !ok || user != ReplicationUser || pass != "repl-pw" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("GET "+PathStatus, func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(Status{Name: "db-0", Role: RolePrimary, Position: &Position{Timeline: 1, LSN: "0/3000148"}})
	})
	mux.HandleFunc("POST "+PathBackups, auth(func(w http.ResponseWriter, r *http.Request) {
		var req BackupRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Destination.S3 == nil {
			http.Error(w, "destination.s3: Required value", http.StatusUnprocessableEntity)
			return
		}
		if req.ID == "busy" {
			http.Error(w, "a backup runs", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(Operation{ID: req.ID, Phase: OperationRunning})
	}))
	mux.HandleFunc("GET "+PathBackup, auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "known" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(Operation{ID: "known", Phase: OperationSucceeded, Size: 42})
	}))
	mux.HandleFunc("GET "+PathRestore, auth(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(Operation{ID: "r1", Phase: OperationFailed, Message: "sha256 mismatch"})
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return &Client{HTTP: srv.Client(), Port: p}, host
}

func TestClientStatus(t *testing.T) {
	c, host := manager(t)
	s, err := c.Status(context.Background(), host)
	if err != nil || s.Name != "db-0" || s.Role != RolePrimary || s.Position == nil || s.Position.LSN != "0/3000148" {
		t.Fatalf("Status: %+v %v", s, err)
	}
	// Whatever else answers at the address is not a status.
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	other := &Client{HTTP: srv.Client(), Port: p}
	if _, err := other.Status(context.Background(), host); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Status of something else: %v, want the 404", err)
	}
}

func TestClientOperations(t *testing.T) {
	c, host := manager(t)
	ctx := context.Background()
	auth := Auth{Password: "repl-pw"}
	dest := Destination{S3: &S3Object{Bucket: "b", Key: "k"}}

	op, err := c.StartBackup(ctx, host, auth, BackupRequest{ID: "new", Destination: dest})
	if err != nil || op.ID != "new" || op.Phase != OperationRunning {
		t.Errorf("StartBackup: %+v %v", op, err)
	}
	if _, err := c.StartBackup(ctx, host, auth, BackupRequest{ID: "busy", Destination: dest}); !errors.Is(err, ErrBusy) {
		t.Errorf("StartBackup while another runs: %v, want ErrBusy", err)
	}
	if _, err := c.StartBackup(ctx, host, auth, BackupRequest{ID: "bad"}); !errors.Is(err, ErrRefused) {
		t.Errorf("StartBackup without a destination: %v, want ErrRefused", err)
	}
	if op, err := c.Backup(ctx, host, auth, "known"); err != nil || op.Size != 42 {
		t.Errorf("Backup: %+v %v", op, err)
	}
	if _, err := c.Backup(ctx, host, auth, "forgotten"); !errors.Is(err, ErrUnknownOperation) {
		t.Errorf("Backup of an operation the manager forgot: %v, want ErrUnknownOperation", err)
	}
	if op, err := c.Restore(ctx, host, auth); err != nil || op.Phase != OperationFailed || op.Message != "sha256 mismatch" {
		t.Errorf("Restore: %+v %v", op, err)
	}
	_, err = c.Backup(ctx, host, Auth{Password: "wrong"}, "known")
	if err == nil || errors.Is(err, ErrUnknownOperation) || errors.Is(err, ErrBusy) || errors.Is(err, ErrRefused) {
		t.Errorf("with a wrong password: %v, want a plain error", err)
	}
}
