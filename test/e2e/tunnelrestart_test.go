//go:build e2e && faults

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mydb-dev/mydb/pkg/access"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

// TestTunnelsThroughRestartsOfMydb: clients reach a PostgreSQL primary
// through mydatabases/connect the way kubectl mydb connect does (a local
// listener, a tunnel per connection, access.Redial with a 30 s
// redial timeout), while mydb-apiserver is restarted:
//   - three rolling restarts of a Deployment of two (mydbService): every
//     new connection succeeds; the sessions open through a replica that
//     exits end with an error (a tunnel is a TCP stream through that
//     process: nothing resumes it), and the client's next connection works;
//   - an outage with no replica in the rotation (the old ones' shutdown,
//     then at least 5 s with none running): a connection made while none
//     runs waits for the new replica (retrying the aggregator's 503s) and
//     succeeds.
//
// Measured: connections made, sessions ended by a restart, and the longest
// wait for a tunnel.
func TestTunnelsThroughRestartsOfMydb(t *testing.T) {
	tc := replicationCases[0]
	// A failoverDelay of a minute: the outage below stays under half of
	// it, after which a primary that cannot read its MyDatabase fences
	// itself (pkg/instance/kube), and a client waits for that too.
	_, _, h, _ := startShop(t, restConfig(t), tc, time.Minute, "")
	ns := h.ns
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	cred, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns).CreateCredentials(ctx, "shop",
		&examplev1.MyDatabaseCredentialRequest{Spec: examplev1.MyDatabaseCredentialRequestSpec{ExpirationSeconds: ptr.To[int64](1800)}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := startMydbService(t, 2)

	cfg := restConfig(t)
	var waits waitLog
	var tunnelFailures atomic.Int64
	port := listenTunnels(t, func(context.Context) (*access.TunnelConn, error) {
		start := time.Now()
		remote, err := access.Redial(ctx, func(ctx context.Context) (*access.TunnelConn, error) {
			return access.DialTunnel(ctx, cfg, ns, "shop", "")
		}, 30*time.Second)
		if err != nil {
			if ctx.Err() == nil {
				tunnelFailures.Add(1)
			}
			return nil, err
		}
		waits.add(time.Since(start))
		return remote, nil
	}, nil)
	s := cred.Status
	db, err := sql.Open("pgx", fmt.Sprintf("host=127.0.0.1 port=%d user=%s password=%s dbname=%s sslmode=require connect_timeout=40",
		port, s.Username, s.Password, s.Database))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0)

	// Short sessions: connect, ten queries, disconnect. Long sessions: one
	// connection for as long as it lasts, a query every 100 ms; when a
	// restart ends it, the next connection.
	var connects, connectFailures, ended atomic.Int64
	session := func(queries int) {
		conn, err := db.Conn(ctx)
		if err != nil {
			if ctx.Err() == nil && connectFailures.Add(1) <= 3 {
				t.Errorf("a connection: %v", err)
			}
			return
		}
		defer conn.Close()
		connects.Add(1)
		for i := 0; queries == 0 || i < queries; i++ {
			var n int
			if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM acks").Scan(&n); err != nil {
				if ctx.Err() == nil {
					ended.Add(1)
					t.Logf("a session ended: %v", err)
				}
				return
			}
			if queries == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(long bool) {
			defer wg.Done()
			for ctx.Err() == nil {
				if long {
					session(0)
				} else {
					session(10)
				}
			}
		}(i < 4)
	}

	time.Sleep(3 * time.Second)
	for i := 0; i < 3; i++ {
		ro := svc.roll(10 * time.Second)
		t.Logf("restart %d: %s replaced by %s; %s exited %s after SIGTERM", i+1, ro.old, ro.new, ro.old,
			ro.oldExited.Sub(ro.oldRemoved).Round(10*time.Millisecond))
		time.Sleep(2 * time.Second)
	}
	outage, dark := svc.outage(5 * time.Second)
	back := time.Now()
	t.Logf("outage: no mydb-apiserver in the rotation for %s, none running for the last %s of it, then %s ready",
		outage.Round(10*time.Millisecond), dark.Round(10*time.Millisecond), svc.addrs())
	// The clients that waited through the outage get their tunnels once
	// the aggregator finds the new replica: it rechecks the APIService when
	// its Service's endpoints change, and access.Redial retries at least
	// every 2 s.
	deadline := back.Add(15 * time.Second)
	for {
		if wait, end, ok := waits.firstEndedAfter(back); ok {
			t.Logf("the first tunnel after the outage: made %s after the new replica was ready, after a wait of %s",
				end.Sub(back).Round(10*time.Millisecond), wait.Round(10*time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("no tunnel was made in the 15 s after a mydb-apiserver was back: clients still wait")
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(10 * time.Second)
	stop()
	wg.Wait()

	p50, max := waits.summary()
	t.Logf("through 3 rolling restarts and a %s outage: %d connections, %d failed, %d sessions ended by a restart, %d tunnels refused; wait for a tunnel p50 %s, max %s",
		outage.Round(time.Second), connects.Load(), connectFailures.Load(), ended.Load(), tunnelFailures.Load(), p50, max)
	if connectFailures.Load() > 0 || tunnelFailures.Load() > 0 {
		t.Errorf("%d connections and %d tunnels failed: a client should only wait", connectFailures.Load(), tunnelFailures.Load())
	}
	// The old replicas serve the aggregator's open connections until they
	// exit: a connection made while none runs is one that must wait.
	if max < dark/2 {
		t.Errorf("no connection waited while no mydb-apiserver ran (%s; longest wait %s): the test did not make one then", dark.Round(10*time.Millisecond), max)
	}
}

// waitLog records each wait for a tunnel when it ends, with the time it
// ended.
type waitLog struct {
	mu    sync.Mutex
	waits []time.Duration
	ends  []time.Time
}

func (w *waitLog) add(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
	w.ends = append(w.ends, time.Now())
}

// firstEndedAfter is the first wait that ended after t: how long it
// lasted and when it ended.
func (w *waitLog) firstEndedAfter(t time.Time) (time.Duration, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, end := range w.ends {
		if end.After(t) {
			return w.waits[i], end, true
		}
	}
	return 0, time.Time{}, false
}

func (w *waitLog) summary() (p50, max time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waits) == 0 {
		return 0, 0
	}
	sorted := append([]time.Duration(nil), w.waits...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return sorted[len(sorted)/2].Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond)
}
