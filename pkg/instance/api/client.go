package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Errors the managers answer the backup and restore endpoints with.
var (
	// ErrUnknownOperation is a 404: the manager knows no such operation,
	// which for one it was seen running means it restarted since.
	ErrUnknownOperation = errors.New("the instance manager knows no such operation")
	// ErrBusy is a 409: the manager runs another backup or restore, or
	// cannot take this one now.
	ErrBusy = errors.New("the instance manager runs another operation")
	// ErrRefused is a 422 or a 501: the manager will never take this
	// request (a destination it cannot use, another engine's format, an
	// engine it cannot back up); asking again changes nothing.
	ErrRefused = errors.New("the instance manager refused the request")
)

// Timeout bounds each request of a Client without an HTTP client of its
// own: a manager answers every request at once, as backups and restores
// run in the background.
const Timeout = 10 * time.Second

// maxAnswer bounds what is read of an answer: a manager's are small, and
// whatever answers at a pod's address is not trusted to be one.
const maxAnswer = 1 << 20

// defaultHTTP sends the requests of a Client without an HTTP client.
var defaultHTTP = &http.Client{Timeout: Timeout}

// Auth is the credentials of the endpoints that need them: ReplicationUser
// and the database's replication password.
type Auth struct {
	Password string
}

// Client calls the instance managers' endpoints, over plain HTTP at their
// hosts (pod IPs in a cluster). The zero value is ready to use.
type Client struct {
	// HTTP sends the requests; nil is a client whose requests time out
	// after Timeout.
	HTTP *http.Client
	// Port is where the managers serve; 0 is Port. Only tests and test
	// rigs run managers elsewhere.
	Port int
}

// Status is GET /v1/status of the manager at host.
func (c *Client) Status(ctx context.Context, host string) (*Status, error) {
	resp, err := c.send(ctx, http.MethodGet, host, PathStatus, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s answered %s", PathStatus, resp.Status)
	}
	var s Status
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, maxAnswer)).Decode(&s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", PathStatus, err)
	}
	return &s, nil
}

// StartBackup is POST /v1/backups.
func (c *Client) StartBackup(ctx context.Context, host string, auth Auth, req BackupRequest) (*Operation, error) {
	return c.operation(ctx, http.MethodPost, host, PathBackups, auth, req)
}

// Backup is GET /v1/backups/{id}.
func (c *Client) Backup(ctx context.Context, host string, auth Auth, id string) (*Operation, error) {
	return c.operation(ctx, http.MethodGet, host, PathBackups+"/"+url.PathEscape(id), auth, nil)
}

// StartRestore is POST /v1/restore.
func (c *Client) StartRestore(ctx context.Context, host string, auth Auth, req RestoreRequest) (*Operation, error) {
	return c.operation(ctx, http.MethodPost, host, PathRestore, auth, req)
}

// Restore is GET /v1/restore.
func (c *Client) Restore(ctx context.Context, host string, auth Auth) (*Operation, error) {
	return c.operation(ctx, http.MethodGet, host, PathRestore, auth, nil)
}

// operation calls one of the backup and restore endpoints, which answer an
// Operation, and turns the answers that mean something into the errors
// above.
func (c *Client) operation(ctx context.Context, method, host, path string, auth Auth, body any) (*Operation, error) {
	resp, err := c.send(ctx, method, host, path, &auth, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limited := http.MaxBytesReader(nil, resp.Body, maxAnswer)
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
	var op Operation
	if err := json.NewDecoder(limited).Decode(&op); err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	return &op, nil
}

// send sends a request with body as JSON, authenticated when auth is set.
func (c *Client) send(ctx context.Context, method, host, path string, auth *Auth, body any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	port := c.Port
	if port == 0 {
		port = Port
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+net.JoinHostPort(host, strconv.Itoa(port))+path, r)
	if err != nil {
		return nil, err
	}
	if auth != nil {
		req.SetBasicAuth(ReplicationUser, auth.Password)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	h := c.HTTP
	if h == nil {
		h = defaultHTTP
	}
	return h.Do(req)
}

// readMessage is the start of an error answer's body.
func readMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return string(bytes.TrimSpace(b))
}
