package mydatabase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/access"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

type fixedTarget struct {
	address string
	err     error
}

// InstanceAddress leads every instance option to address; the instance's
// name is the option's (shop-0 for the primary).
func (f fixedTarget) InstanceAddress(_ *example.MyDatabase, instance string) (string, string, error) {
	if instance == "" || instance == example.ConnectToPrimary {
		instance = "shop-0"
	}
	return f.address, instance, f.err
}

// echoServer answers every line with the same line upper-cased.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 4096)
				for {
					n, err := c.Read(b)
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(strings.ToUpper(string(b[:n])))); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestConnectTunnelsToThePrimary(t *testing.T) {
	now := time.Now()
	shop := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"}, Spec: example.MyDatabaseSpec{Replicas: 3}}
	gone := shop.DeepCopy()
	gone.Name, gone.DeletionTimestamp = "gone", &metav1.Time{Time: now}
	r := &ConnectREST{databases: databaseGetter{"shop": shop, "gone": gone}}
	ctx := context.Background()

	for _, tc := range []struct {
		name     string
		db       string
		instance string
		target   TunnelTarget
		is       func(error) bool
	}{
		{"404 for no such database", "nope", "", fixedTarget{}, apierrors.IsNotFound},
		{"409 while it is being deleted", "gone", "", fixedTarget{}, apierrors.IsConflict},
		{"503 without controllers", "shop", "", nil, apierrors.IsServiceUnavailable},
		{"503 without a ready primary", "shop", "", fixedTarget{err: fmt.Errorf("%w: the primary shop-0 is not ready", access.ErrUnavailable)}, apierrors.IsServiceUnavailable},
		{"422 for an instance beyond spec.replicas", "shop", "shop-3", fixedTarget{}, apierrors.IsInvalid},
		{"422 for another database's instance", "shop", "shopping-0", fixedTarget{}, apierrors.IsInvalid},
		{"422 for an ordinal written twice", "shop", "shop-01", fixedTarget{}, apierrors.IsInvalid},
		{"422 for an unknown role", "shop", "standby", fixedTarget{}, apierrors.IsInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.target = tc.target
			_, err := r.Connect(ctx, tc.db, &example.MyDatabaseConnectOptions{Instance: tc.instance}, nil)
			if !tc.is(err) {
				t.Errorf("got %v", err)
			}
			if apierrors.IsInvalid(err) && !strings.Contains(err.Error(), "instance: Unsupported value") {
				t.Errorf("the refusal names no field: %v", err)
			}
		})
	}

	r.SetTarget(fixedTarget{address: echoServer(t)})
	handler, err := r.Connect(ctx, "shop", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	t.Run("400 without the upgrade", func(t *testing.T) {
		resp, err := http.Post(srv.URL, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%d", resp.StatusCode)
		}
	})
	t.Run("bytes both ways, many tunnels at once", func(t *testing.T) {
		errs := make(chan error, 20)
		for i := 0; i < 20; i++ {
			go func() {
				// Half through Redial, whose attempt's context ends once the
				// tunnel is open: the tunnel must outlive it.
				dial := func(ctx context.Context) (*access.TunnelConn, error) {
					return access.DialTunnel(ctx, &rest.Config{Host: srv.URL}, "ns", "shop", "")
				}
				var conn *access.TunnelConn
				var err error
				if i%2 == 1 {
					conn, err = access.Redial(ctx, dial, 10*time.Second)
				} else {
					conn, err = dial(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
				defer conn.Close()
				msg := fmt.Sprintf("select %d;", i)
				if _, err := conn.Write([]byte(msg)); err != nil {
					errs <- err
					return
				}
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(conn, got); err != nil {
					errs <- err
					return
				}
				if string(got) != strings.ToUpper(msg) {
					errs <- fmt.Errorf("got %q for %q", got, msg)
					return
				}
				errs <- nil
			}()
		}
		for i := 0; i < 20; i++ {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("the answer names the instance the options chose", func(t *testing.T) {
		for instance, want := range map[string]string{"": "shop-0", "replica": "replica", "shop-2": "shop-2"} {
			handler, err := r.Connect(ctx, "shop", &example.MyDatabaseConnectOptions{Instance: instance}, nil)
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(handler)
			conn, err := access.DialTunnel(ctx, &rest.Config{Host: srv.URL}, "ns", "shop", instance)
			if err != nil {
				t.Fatal(err)
			}
			if conn.Instance != want {
				t.Errorf("instance %q: the tunnel says it leads to %q, want %q", instance, conn.Instance, want)
			}
			conn.Close()
			srv.Close()
		}
	})
	t.Run("a refusal's message reaches the client", func(t *testing.T) {
		refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nobody may not create mydatabases/connect","code":403}`)
		}))
		defer refusing.Close()
		_, err := access.DialTunnel(ctx, &rest.Config{Host: refusing.URL}, "ns", "shop", "")
		var refused *access.TunnelError
		if !errors.As(err, &refused) || refused.Code != http.StatusForbidden || !strings.Contains(refused.Message, "nobody may not") {
			t.Errorf("got %v", err)
		}
	})
}
