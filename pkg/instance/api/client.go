package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
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

// Credentials are what a caller of a database's managers holds: the
// database's root CA, which every manager's certificate chains to, and the
// caller's own client certificate (the controller's, or an instance's).
type Credentials struct {
	// ID tells credentials apart for connection reuse: the same ID, the
	// same roots and the same identity.
	ID string
	// Roots verify the managers' certificates.
	Roots *x509.CertPool
	// Certificate is the client certificate presented, asked for at every
	// handshake so a renewed one applies at once.
	Certificate func() (*tls.Certificate, error)
}

// TLSConfig is the client side of mutual TLS with the manager whose
// certificate must name serverName (its instance's name).
func (c *Credentials) TLSConfig(serverName string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    c.Roots,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.Certificate()
		},
	}
}

// Auth is how a request reaches one manager: over mutual TLS with
// Credentials, to a manager whose certificate names Name. A manager at the
// expected address that cannot prove it is Name (a recycled pod IP,
// another database's pod) is refused before a byte of the request is sent.
type Auth struct {
	Credentials *Credentials
	Name        string
}

// Client calls the instance managers' endpoints over HTTPS with mutual
// TLS, at their hosts (pod IPs in a cluster). The zero value is ready to
// use.
type Client struct {
	// Timeout bounds each request; 0 is Timeout.
	Timeout time.Duration
	// Wrap, when set, wraps the transport of every request (the
	// controller's write fence).
	Wrap func(http.RoundTripper) http.RoundTripper
	// Port is where the managers serve; 0 is Port. Only tests and test
	// rigs run managers elsewhere.
	Port int

	mu sync.Mutex
	// clients are an HTTP client per credentials and server name, so
	// connections are reused and never shared between identities.
	clients map[string]*http.Client
}

// maxClients bounds the clients kept: past it they are all dropped (their
// idle connections closed) and made again as needed.
const maxClients = 4096

func (c *Client) httpClient(auth Auth) (*http.Client, error) {
	if auth.Credentials == nil || auth.Name == "" {
		return nil, errors.New("a request to an instance manager needs the database's credentials and the instance's name")
	}
	key := auth.Credentials.ID + "\x00" + auth.Name
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.clients[key]; ok {
		return h, nil
	}
	if c.clients == nil || len(c.clients) >= maxClients {
		for _, h := range c.clients {
			h.CloseIdleConnections()
		}
		c.clients = map[string]*http.Client{}
	}
	var rt http.RoundTripper = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     auth.Credentials.TLSConfig(auth.Name),
		TLSHandshakeTimeout: 5 * time.Second,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 2,
		ForceAttemptHTTP2:   false,
	}
	if c.Wrap != nil {
		rt = c.Wrap(rt)
	}
	timeout := c.Timeout
	if timeout == 0 {
		timeout = Timeout
	}
	h := &http.Client{Timeout: timeout, Transport: rt}
	c.clients[key] = h
	return h, nil
}

// Status is GET /v1/status of the manager at host (an address, or a
// host:port where it serves elsewhere than on Port).
func (c *Client) Status(ctx context.Context, host string, auth Auth) (*Status, error) {
	resp, err := c.send(ctx, http.MethodGet, host, PathStatus, auth, nil)
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

// SetArchive is PUT /v1/archive.
func (c *Client) SetArchive(ctx context.Context, host string, auth Auth, req ArchiveRequest) (*ArchiveStatus, error) {
	return call[ArchiveStatus](ctx, c, http.MethodPut, host, PathArchive, auth, req)
}

// operation calls one of the backup and restore endpoints, which answer an
// Operation.
func (c *Client) operation(ctx context.Context, method, host, path string, auth Auth, body any) (*Operation, error) {
	return call[Operation](ctx, c, method, host, path, auth, body)
}

// call sends body to the endpoint and reads its answer, a T, turning the
// answers that mean something into the errors above: 404
// ErrUnknownOperation, 409 and 503 ErrBusy, 422 and 501 ErrRefused.
func call[T any](ctx context.Context, c *Client, method, host, path string, auth Auth, body any) (*T, error) {
	resp, err := c.send(ctx, method, host, path, auth, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limited := http.MaxBytesReader(nil, resp.Body, maxAnswer)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
	case http.StatusNotFound:
		return nil, ErrUnknownOperation
	case http.StatusConflict, http.StatusServiceUnavailable:
		return nil, fmt.Errorf("%w: %s", ErrBusy, readMessage(limited))
	case http.StatusUnprocessableEntity, http.StatusNotImplemented:
		return nil, fmt.Errorf("%w: %s", ErrRefused, readMessage(limited))
	default:
		return nil, fmt.Errorf("%s %s answered %s: %s", method, path, resp.Status, readMessage(limited))
	}
	var answer T
	if err := json.NewDecoder(limited).Decode(&answer); err != nil {
		return nil, fmt.Errorf("reading the answer of %s %s: %w", method, path, err)
	}
	return &answer, nil
}

// send sends a request with body as JSON to the manager auth names.
func (c *Client) send(ctx context.Context, method, host, path string, auth Auth, body any) (*http.Response, error) {
	h, err := c.httpClient(auth)
	if err != nil {
		return nil, err
	}
	req, err := c.request(ctx, method, host, path, body)
	if err != nil {
		return nil, err
	}
	return h.Do(req)
}

// request is a request of body as JSON to path of the manager at host.
func (c *Client) request(ctx context.Context, method, host, path string, body any) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	address := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		port := c.Port
		if port == 0 {
			port = Port
		}
		address = net.JoinHostPort(host, strconv.Itoa(port))
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+address+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// readMessage is the start of an error answer's body.
func readMessage(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	return string(bytes.TrimSpace(b))
}
