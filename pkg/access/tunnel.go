package access

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// DialTunnel opens POST mydatabases/<name>/connect in namespace through
// the API server cfg names (kube-apiserver, whose aggregation layer
// passes the upgrade on to mydb-apiserver), authenticated as cfg says
// (certificates, tokens, impersonation), and returns the connection, which
// then carries the engine protocol of the instance named by instance
// (primary when empty, replica, or an instance's name: the connect
// subresource's instance option). An answer other than 101 is an error
// with the server's message.
func DialTunnel(ctx context.Context, cfg *rest.Config, namespace, name, instance string) (*TunnelConn, error) {
	base, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	if base.Scheme == "" {
		base, err = url.Parse("https://" + cfg.Host)
		if err != nil {
			return nil, err
		}
	}
	target := *base
	target.Path = strings.TrimSuffix(base.Path, "/") + "/apis/example.com/v1/namespaces/" + url.PathEscape(namespace) +
		"/mydatabases/" + url.PathEscape(name) + "/" + TunnelSubresource
	if instance != "" {
		target.RawQuery = url.Values{"instance": {instance}}.Encode()
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	up := &upgrader{tls: tlsConfig}
	rt, err := rest.HTTPWrappersForConfig(cfg, up)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", TunnelProtocol)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var status metav1.Status
		if json.Unmarshal(body, &status) == nil && status.Message != "" {
			return nil, &TunnelError{Code: resp.StatusCode, Message: status.Message}
		}
		return nil, &TunnelError{Code: resp.StatusCode, Message: strings.TrimSpace(string(body))}
	}
	up.conn.Instance = resp.Header.Get(TunnelInstanceHeader)
	return up.conn, nil
}

// contextError is err, or the context's error when the context ended it.
func contextError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %v", ctx.Err(), err)
	}
	return err
}

// Redial opens a tunnel with dial, trying again for up to timeout while
// the API server does not answer or answers that it cannot now (a restart
// of mydb-apiserver, a failover under way: 5xx, 429); a refusal (403,
// 404, 422) is final.
func Redial(ctx context.Context, dial func(context.Context) (*TunnelConn, error), timeout time.Duration) (*TunnelConn, error) {
	deadline := time.Now().Add(timeout)
	wait := 250 * time.Millisecond
	for {
		// Each attempt ends at the deadline too: an API server that takes
		// the connection and never answers is waited for no longer.
		attempt, cancel := context.WithDeadline(ctx, deadline)
		conn, err := dial(attempt)
		cancel()
		if err != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("%w (the last attempt: %v)", ctx.Err(), err)
		}
		if err == nil || !retriable(err) || time.Now().Add(wait).After(deadline) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the last attempt: %v)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func retriable(err error) bool {
	var refused *TunnelError
	if errors.As(err, &refused) {
		return refused.Code >= 500 || refused.Code == http.StatusTooManyRequests
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// TunnelError is a refused tunnel: the API server's status code and
// message.
type TunnelError struct {
	Code    int
	Message string
}

func (e *TunnelError) Error() string {
	return fmt.Sprintf("mydatabases/%s refused (%d %s): %s", TunnelSubresource, e.Code, http.StatusText(e.Code), e.Message)
}

// upgrader is the innermost round tripper of DialTunnel: it sends the
// request (with the headers client-go's wrappers added) on a connection of
// its own, HTTP/1.1 as an upgrade must be, and keeps that connection once
// the server switched protocols.
type upgrader struct {
	tls  *tls.Config
	conn *TunnelConn
}

func (u *upgrader) RoundTrip(req *http.Request) (*http.Response, error) {
	host := req.URL.Host
	if req.URL.Port() == "" {
		port := "443"
		if req.URL.Scheme == "http" {
			port = "80"
		}
		host = net.JoinHostPort(req.URL.Hostname(), port)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	raw, err := dialer.DialContext(req.Context(), "tcp", host)
	if err != nil {
		return nil, err
	}
	conn := raw
	if req.URL.Scheme == "https" {
		config := &tls.Config{}
		if u.tls != nil {
			config = u.tls.Clone()
		}
		if config.ServerName == "" {
			config.ServerName = req.URL.Hostname()
		}
		config.NextProtos = []string{"http/1.1"}
		tc := tls.Client(raw, config)
		if err := tc.HandshakeContext(req.Context()); err != nil {
			raw.Close()
			return nil, err
		}
		conn = tc
	}
	// Writing the request and reading the answer do not watch the
	// context by themselves: a server that accepted the connection and
	// never answers would hold the dial (and Redial's timeout) forever.
	stop := context.AfterFunc(req.Context(), func() { conn.Close() })
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, contextError(req.Context(), err)
	}
	reader := bufio.NewReader(conn)
	resp, err := http.ReadResponse(reader, req)
	if err != nil {
		conn.Close()
		return nil, contextError(req.Context(), err)
	}
	if !stop() {
		// The context ended as the answer came: the connection is closed.
		resp.Body.Close()
		return nil, req.Context().Err()
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		u.conn = &TunnelConn{Conn: conn, reader: reader}
		return resp, nil
	}
	resp.Body = &closeBoth{ReadCloser: resp.Body, conn: conn}
	return resp, nil
}

// TunnelConn is an open tunnel: it reads what the server sent after its
// 101 first.
type TunnelConn struct {
	net.Conn
	// Instance is the instance the tunnel leads to, as the server said.
	Instance string
	reader   *bufio.Reader
}

func (c *TunnelConn) Read(p []byte) (int, error) { return c.reader.Read(p) }

// CloseWrite half-closes the tunnel (the engine sees end of input) where
// the connection can.
func (c *TunnelConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

type closeBoth struct {
	io.ReadCloser
	conn net.Conn
}

func (c *closeBoth) Close() error {
	err := c.ReadCloser.Close()
	c.conn.Close()
	return err
}

// Join copies client (read through clientReader, which may hold bytes the
// client sent ahead) to server and server to client until both directions
// end, passing each end on as a half-close, closes both, and answers the
// bytes each way.
func Join(server net.Conn, clientReader io.Reader, client net.Conn) (up, down int64) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		up, _ = io.Copy(server, clientReader)
		closeWrite(server)
	}()
	go func() {
		defer wg.Done()
		down, _ = io.Copy(client, server)
		closeWrite(client)
	}()
	wg.Wait()
	server.Close()
	client.Close()
	return up, down
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
