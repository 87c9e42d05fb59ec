package livelag

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// managers answer for the instances at their addresses after delay.
type managers struct {
	delay   time.Duration
	lag     float64
	asked   atomic.Int32
	mu      sync.Mutex
	names   map[string]string
	active  int
	maxSeen int
}

func (m *managers) Status(ctx context.Context, host string, _ api.Auth) (*api.Status, error) {
	m.asked.Add(1)
	m.mu.Lock()
	m.active++
	m.maxSeen = max(m.maxSeen, m.active)
	m.mu.Unlock()
	defer func() { m.mu.Lock(); m.active--; m.mu.Unlock() }()
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	lag := m.lag
	return &api.Status{Name: m.names[host], Streaming: true, LagSeconds: &lag}, nil
}

func database(name string, replicas ...string) (*example.MyDatabase, map[string]string) {
	db := &example.MyDatabase{}
	db.Namespace, db.Name = "shop", name
	db.Status.CurrentPrimary = name + "-0"
	db.Status.Instances = []example.InstanceStatus{{Name: name + "-0", Role: example.InstanceRolePrimary, Address: "10.0.0.1"}}
	names := map[string]string{}
	for i, r := range replicas {
		address := "10.0." + name + "." + string(rune('1'+i))
		db.Status.Instances = append(db.Status.Instances, example.InstanceStatus{Name: r, Role: example.InstanceRoleReplica, Address: address})
		names[address] = r
	}
	return db, names
}

func reader(m *managers) *Reader {
	return &Reader{Managers: m, Credentials: func(string, string) (*api.Credentials, error) { return &api.Credentials{}, nil }}
}

func TestATableShowsEachReplicasLagAndAsksOncePerTTL(t *testing.T) {
	db, names := database("a", "a-1", "a-2")
	m := &managers{lag: 1.5, names: names}
	r := reader(m)
	r.Prefetch(context.Background(), db)
	if got := r.Text(db); got != "a-1=1.5s a-2=1.5s" {
		t.Errorf("Text = %q", got)
	}
	r.Prefetch(context.Background(), db)
	if got := m.asked.Load(); got != 2 {
		t.Errorf("two tables within the TTL asked the managers %d times, want 2 (once each replica)", got)
	}
}

func TestASlowManagerDoesNotHoldTheTable(t *testing.T) {
	db, names := database("b", "b-1")
	m := &managers{delay: 300 * time.Millisecond, lag: 0.2, names: names}
	r := reader(m)
	r.Budget = 20 * time.Millisecond
	start := time.Now()
	r.Prefetch(context.Background(), db)
	if waited := time.Since(start); waited > 200*time.Millisecond {
		t.Errorf("the table waited %s for a slow manager, want about the budget", waited)
	}
	if got := r.Text(db); got != "b-1=?" {
		t.Errorf("before the answer: %q, want b-1=?", got)
	}
	time.Sleep(400 * time.Millisecond)
	if got := r.Text(db); got != "b-1=0.2s" {
		t.Errorf("after the answer: %q, want b-1=0.2s (it serves the next read)", got)
	}
}

func TestManyDatabasesAskAFewManagersAtOnce(t *testing.T) {
	var dbs []*example.MyDatabase
	m := &managers{delay: 20 * time.Millisecond, names: map[string]string{}}
	for _, name := range []string{"c", "d", "e", "f", "g", "h"} {
		db, names := database(name, name+"-1", name+"-2")
		for k, v := range names {
			m.names[k] = v
		}
		dbs = append(dbs, db)
	}
	r := reader(m)
	r.Parallel, r.Budget = 3, time.Second
	r.Prefetch(context.Background(), dbs...)
	if m.maxSeen > 3 {
		t.Errorf("%d managers asked at once, want at most 3", m.maxSeen)
	}
	if got := r.Text(dbs[5]); got != "h-1=0s h-2=0s" {
		t.Errorf("Text = %q", got)
	}
}

func TestAnAnswerFromAnotherInstanceIsUnknown(t *testing.T) {
	db, _ := database("i", "i-1")
	r := reader(&managers{names: map[string]string{}})
	r.Prefetch(context.Background(), db)
	if got := r.Text(db); got != "i-1=?" {
		t.Errorf("Text = %q, want i-1=? (the manager at the address is not i-1's)", got)
	}
	single, _ := database("j")
	if got := r.Text(single); got != "<none>" {
		t.Errorf("no replicas: %q", got)
	}
}

func TestFormat(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		s    api.Status
		want string
	}{
		{api.Status{Streaming: true, LagSeconds: f(0)}, "0s"},
		{api.Status{Streaming: true, LagSeconds: f(0.12345)}, "0.123s"},
		{api.Status{Streaming: true, LagSeconds: f(42.6)}, "43s"},
		{api.Status{Streaming: true}, "?"},
		{api.Status{LagSeconds: f(1)}, "not-streaming"},
	} {
		if got := Format(&c.s); got != c.want {
			t.Errorf("Format(%+v) = %q, want %q", c.s, got, c.want)
		}
	}
}
