package access_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mydb-dev/mydb/pkg/access"
)

func TestRedialWaitsThroughARestartButNotThroughARefusal(t *testing.T) {
	ctx := context.Background()
	refusedConn := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		name    string
		answers []error // one per attempt; after them, success
		timeout time.Duration
		dials   int
		ok      bool
	}{
		{"a server restarting: refused, then 503, then the tunnel", []error{refusedConn, &access.TunnelError{Code: 503}}, 10 * time.Second, 3, true},
		{"429 is tried again", []error{&access.TunnelError{Code: 429}}, 10 * time.Second, 2, true},
		{"403 is final", []error{&access.TunnelError{Code: 403}}, 10 * time.Second, 1, false},
		{"422 is final", []error{&access.TunnelError{Code: 422}}, 10 * time.Second, 1, false},
		{"a server that stays away, past the timeout", []error{refusedConn, refusedConn, refusedConn, refusedConn, refusedConn}, 700 * time.Millisecond, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dials := 0
			conn, err := access.Redial(ctx, func(context.Context) (*access.TunnelConn, error) {
				dials++
				if dials <= len(tc.answers) {
					return nil, tc.answers[dials-1]
				}
				return &access.TunnelConn{Instance: "shop-0"}, nil
			}, tc.timeout)
			if (err == nil) != tc.ok || dials != tc.dials {
				t.Errorf("got %v after %d dials, want ok=%v after %d", err, dials, tc.ok, tc.dials)
			}
			if tc.ok && conn.Instance != "shop-0" {
				t.Errorf("got %+v", conn)
			}
		})
	}
	t.Run("an interrupt ends the wait", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := access.Redial(ctx, func(context.Context) (*access.TunnelConn, error) { return nil, refusedConn }, time.Minute)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "connection refused") || time.Since(start) > 5*time.Second {
			t.Errorf("got %v after %s", err, time.Since(start))
		}
	})
}

// TestATunnelToAServerThatNeverAnswersEndsWithItsContext: an API server
// that accepts the connection and never answers holds neither DialTunnel
// past its context nor Redial past its timeout.
func TestATunnelToAServerThatNeverAnswersEndsWithItsContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var held []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	cfg := &rest.Config{Host: "http://" + ln.Addr().String()}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := access.DialTunnel(ctx, cfg, "ns", "shop", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DialTunnel: %v, want the context's deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("DialTunnel returned %s after its context ended", took)
	}
	start = time.Now()
	_, err = access.Redial(context.Background(), func(ctx context.Context) (*access.TunnelConn, error) {
		return access.DialTunnel(ctx, cfg, "ns", "shop", "")
	}, time.Second)
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("Redial with a 1 s timeout: %v after %s", err, time.Since(start))
	}
}
