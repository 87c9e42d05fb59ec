package tcpproxy

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nameServer answers every line with its name, so a client can tell which
// backend a connection reached.
func nameServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := fmt.Fprintln(conn, name); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, backends ...string) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", backends...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

type client struct {
	conn net.Conn
	r    *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	return &client{conn: conn, r: bufio.NewReader(conn)}
}

// ask sends a line and returns the backend's name, or the error.
func (c *client) ask() (string, error) {
	if _, err := fmt.Fprintln(c.conn, "who"); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	return strings.TrimSpace(line), err
}

// tryOnce dials the proxy and asks once on the new connection.
func tryOnce(p *Proxy) error {
	conn, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = (&client{conn: conn, r: bufio.NewReader(conn)}).ask()
	return err
}

func mustAsk(t *testing.T, c *client) string {
	t.Helper()
	name, err := c.ask()
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func TestConnectionsGoToTheBackendsInTurn(t *testing.T) {
	p := startProxy(t, nameServer(t, "a"), nameServer(t, "b"))
	var got []string
	for i := 0; i < 4; i++ {
		got = append(got, mustAsk(t, dial(t, p)))
	}
	if want := "a b a b"; strings.Join(got, " ") != want {
		t.Errorf("connections went to %v, want %s", got, want)
	}
	if s := p.Stats(); s.Forwarded != 4 || s.Refused+s.DialFailures+s.Severed != 0 {
		t.Errorf("stats %+v, want 4 forwarded and nothing else", s)
	}
}

func TestARemovedBackendKeepsItsOpenConnections(t *testing.T) {
	a, b := nameServer(t, "a"), nameServer(t, "b")
	p := startProxy(t, a, b)
	onA := dial(t, p)
	if got := mustAsk(t, onA); got != "a" {
		t.Fatalf("the first connection reached %s", got)
	}
	p.Remove(a)
	for i := 0; i < 3; i++ {
		if got := mustAsk(t, dial(t, p)); got != "b" {
			t.Errorf("a new connection reached %s after a was removed", got)
		}
	}
	if got := mustAsk(t, onA); got != "a" {
		t.Errorf("the open connection to the removed backend now answers %s", got)
	}
	p.Add(a)
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		seen[mustAsk(t, dial(t, p))] = true
	}
	if !seen["a"] || !seen["b"] {
		t.Errorf("after adding a back, new connections reached %v", seen)
	}
	if got := p.Backends(); len(got) != 2 {
		t.Errorf("backends %v", got)
	}
}

func TestACutResetsOpenAndNewConnectionsUntilRestored(t *testing.T) {
	p := startProxy(t, nameServer(t, "a"))
	open := dial(t, p)
	mustAsk(t, open)

	p.Cut()
	if _, err := open.ask(); !isReset(err) {
		t.Errorf("an open connection across the cut: %v, want a reset", err)
	}
	start := time.Now()
	if err := tryOnce(p); !isReset(err) {
		t.Errorf("a new connection during the cut: %v, want a reset", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a connection during the cut took %s to fail, want at once", took)
	}

	p.Restore()
	if got := mustAsk(t, dial(t, p)); got != "a" {
		t.Errorf("after the cut a new connection reached %s", got)
	}
	if s := p.Stats(); s.Severed != 1 || s.Refused != 1 || s.Forwarded != 2 {
		t.Errorf("stats %+v, want 1 severed, 1 refused, 2 forwarded", s)
	}
}

func TestNoBackendOrADeadOneResets(t *testing.T) {
	p := startProxy(t)
	if err := tryOnce(p); !isReset(err) {
		t.Errorf("with no backend: %v, want a reset", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	p.Add(dead)
	if err := tryOnce(p); !isReset(err) {
		t.Errorf("with a backend that refuses: %v, want a reset", err)
	}
	if s := p.Stats(); s.Refused != 1 || s.DialFailures != 1 {
		t.Errorf("stats %+v, want 1 refused and 1 dial failure", s)
	}
}

func TestCloseEndsOpenConnections(t *testing.T) {
	p := startProxy(t, nameServer(t, "a"))
	open := dial(t, p)
	mustAsk(t, open)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := open.ask(); err == nil {
		t.Error("a connection still answers after Close")
	}
	if _, err := net.Dial("tcp", p.Addr()); err == nil {
		t.Error("the proxy still accepts after Close")
	}
}

// isReset tells whether err is what a peer's RST causes, on connect, read
// or write.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
