package instances

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// manager answers like an instance manager: the operation it knows, 404,
// 409 or 422, and 401 without the replication user's password.
func manager(t *testing.T) (HTTP, string) {
	t.Helper()
	mux := http.NewServeMux()
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if user, pass, ok := r.BasicAuth(); !ok || user != api.ReplicationUser || pass != "repl-pw" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("POST /v1/backups", auth(func(w http.ResponseWriter, r *http.Request) {
		var req api.BackupRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Destination.S3 == nil {
			http.Error(w, "destination.s3: Required value", http.StatusUnprocessableEntity)
			return
		}
		if req.ID == "busy" {
			http.Error(w, "a backup runs", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(api.Operation{ID: req.ID, Phase: api.OperationRunning})
	}))
	mux.HandleFunc("GET /v1/backups/{id}", auth(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "known" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(api.Operation{ID: "known", Phase: api.OperationSucceeded, Size: 42})
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return HTTP{Client: srv.Client(), Port: p}, host
}

func TestOperationsAnswers(t *testing.T) {
	h, host := manager(t)
	ctx := context.Background()
	auth := Auth{Password: "repl-pw"}
	dest := api.Destination{S3: &api.S3Object{Bucket: "b", Key: "k"}}

	op, err := h.StartBackup(ctx, host, auth, api.BackupRequest{ID: "new", Destination: dest})
	if err != nil || op.ID != "new" || op.Phase != api.OperationRunning {
		t.Errorf("StartBackup: %+v %v", op, err)
	}
	if _, err := h.StartBackup(ctx, host, auth, api.BackupRequest{ID: "busy", Destination: dest}); !errors.Is(err, ErrBusy) {
		t.Errorf("StartBackup while another runs: %v, want ErrBusy", err)
	}
	if _, err := h.StartBackup(ctx, host, auth, api.BackupRequest{ID: "bad"}); !errors.Is(err, ErrRefused) {
		t.Errorf("StartBackup without a destination: %v, want ErrRefused", err)
	}
	if op, err := h.Backup(ctx, host, auth, "known"); err != nil || op.Size != 42 {
		t.Errorf("Backup: %+v %v", op, err)
	}
	if _, err := h.Backup(ctx, host, auth, "forgotten"); !errors.Is(err, ErrUnknownOperation) {
		t.Errorf("Backup of an operation the manager forgot: %v, want ErrUnknownOperation", err)
	}
	_, err = h.Backup(ctx, host, Auth{Password: "wrong"}, "known")
	if err == nil || errors.Is(err, ErrUnknownOperation) || errors.Is(err, ErrBusy) || errors.Is(err, ErrRefused) {
		t.Errorf("with a wrong password: %v, want a plain error", err)
	}
}
