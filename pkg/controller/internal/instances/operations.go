// Package instances is the controllers' client of the instance managers'
// backup and restore endpoints (POST/GET /v1/backups, /v1/restore), at
// their pods' IPs, authenticated as the replication user.
package instances

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Errors the managers answer with.
var (
	// ErrUnknownOperation is a 404: the manager knows no such operation,
	// which for one it was seen running means it restarted since.
	ErrUnknownOperation = errors.New("the instance manager knows no such operation")
	// ErrBusy is a 409: the manager runs another backup or restore.
	ErrBusy = errors.New("the instance manager runs another operation")
	// ErrRefused is a 422 or a 501: the manager will never take this
	// request (a destination it cannot use, another engine's format, an
	// engine it cannot back up); asking again changes nothing.
	ErrRefused = errors.New("the instance manager refused the request")
)

// Auth is the basic credentials of the endpoints: the replication user.
type Auth struct {
	Password string
}

// Operations starts and reads backups and restores on instance managers.
type Operations interface {
	// StartBackup is POST /v1/backups.
	StartBackup(ctx context.Context, address string, auth Auth, req api.BackupRequest) (*api.Operation, error)
	// Backup is GET /v1/backups/{id}.
	Backup(ctx context.Context, address string, auth Auth, id string) (*api.Operation, error)
	// StartRestore is POST /v1/restore.
	StartRestore(ctx context.Context, address string, auth Auth, req api.RestoreRequest) (*api.Operation, error)
	// Restore is GET /v1/restore.
	Restore(ctx context.Context, address string, auth Auth) (*api.Operation, error)
}

// Timeout bounds one request: the operations run in the background, so
// each answers at once.
const Timeout = 10 * time.Second

// HTTP talks to the managers over HTTP on their status port.
type HTTP struct {
	Client *http.Client
	// Port is the managers' port; 0 is api.Port.
	Port int
}

// NewHTTP returns a client whose requests time out after Timeout.
func NewHTTP() HTTP { return HTTP{Client: &http.Client{Timeout: Timeout}} }

func (h HTTP) StartBackup(ctx context.Context, address string, auth Auth, req api.BackupRequest) (*api.Operation, error) {
	return h.do(ctx, http.MethodPost, address, api.PathBackups, auth, req)
}

func (h HTTP) Backup(ctx context.Context, address string, auth Auth, id string) (*api.Operation, error) {
	return h.do(ctx, http.MethodGet, address, api.PathBackups+"/"+id, auth, nil)
}

func (h HTTP) StartRestore(ctx context.Context, address string, auth Auth, req api.RestoreRequest) (*api.Operation, error) {
	return h.do(ctx, http.MethodPost, address, api.PathRestore, auth, req)
}

func (h HTTP) Restore(ctx context.Context, address string, auth Auth) (*api.Operation, error) {
	return h.do(ctx, http.MethodGet, address, api.PathRestore, auth, nil)
}

func (h HTTP) do(ctx context.Context, method, address, path string, auth Auth, body any) (*api.Operation, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	port := h.Port
	if port == 0 {
		port = api.Port
	}
	url := "http://" + net.JoinHostPort(address, strconv.Itoa(port)) + path
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(api.ReplicationUser, auth.Password)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limited := http.MaxBytesReader(nil, resp.Body, 1<<20)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusAccepted:
	case http.StatusNotFound:
		return nil, ErrUnknownOperation
	case http.StatusConflict:
		return nil, fmt.Errorf("%w: %s", ErrBusy, readMessage(limited))
	case http.StatusUnprocessableEntity, http.StatusNotImplemented:
		return nil, fmt.Errorf("%w: %s", ErrRefused, readMessage(limited))
	default:
		return nil, fmt.Errorf("%s %s answered %s: %s", method, path, resp.Status, readMessage(limited))
	}
	var op api.Operation
	if err := json.NewDecoder(limited).Decode(&op); err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	return &op, nil
}

// readMessage is the start of an error answer's body.
func readMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return string(bytes.TrimSpace(b))
}
