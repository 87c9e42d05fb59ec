//go:build engines

package engines

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/stats"
)

// syncChecks are an engine's means to tell, reading a replica directly,
// whether it holds a commit: commitMark names the commit the connection
// just made (Postgres: the WAL insert position right after it, which is at
// or past the commit record's end; MariaDB: @@last_gtid), replicaHas tells
// whether the replica received and stored it (Postgres:
// pg_last_wal_receive_lsn, WAL flushed on the standby; MariaDB: the IO
// thread's Gtid_IO_Pos, events in the relay log).
type syncChecks struct {
	commitMark func(ctx context.Context, conn *sql.Conn) (string, error)
	// markedCommit, when set, commits stmt and returns the mark itself,
	// for an engine whose mark read after the commit may include other
	// sessions' later writes (Postgres: autovacuum's WAL).
	markedCommit func(ctx context.Context, conn *sql.Conn, stmt string) (string, error)
	replicaHas   func(t *testing.T, r *node) func(mark string) (bool, error)
}

// commitLatencies times n single-row autocommit INSERTs on one connection.
func commitLatencies(t *testing.T, conn *sql.Conn, from, n int) []time.Duration {
	t.Helper()
	ds := make([]time.Duration, 0, n)
	for i := from; i < from+n; i++ {
		start := time.Now()
		if _, err := conn.ExecContext(context.Background(), fmt.Sprintf("INSERT INTO syncw VALUES (%d)", i)); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	return ds
}

// testSync: with the topology's Synchronous, a commit returns only once a
// replica holds it: each of N acknowledged commits is on a replica at the
// moment of its acknowledgement; with every replica stopped a commit waits
// (no error), and returns once one is back, or once the mode is Async again.
func testSync(t *testing.T, c *cluster, p *node, replicas []*node, fig *figures) {
	sc := c.spec.sync
	ctx := context.Background()
	mustExec(t, p.app(), "CREATE TABLE syncw (id int PRIMARY KEY)")
	conn, err := p.app().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 300
	commitLatencies(t, conn, 100000, 100) // warm-up, not counted
	async := commitLatencies(t, conn, 0, n)

	c.setSync(p, true)
	s := p.waitStatus(30*time.Second, "synchronous with both replicas", func(s api.Status) bool {
		return s.Ready && s.Synchronous && s.SyncReplicas == len(replicas)
	})
	t.Logf("primary: synchronous %v, %d sync replicas", s.Synchronous, s.SyncReplicas)
	sync := commitLatencies(t, conn, n, n)
	fig.add("commit latency, %d single-row commits each, Async: p50 %s p99 %s; Sync: p50 %s p99 %s",
		n, stats.Percentile(async, 50), stats.Percentile(async, 99), stats.Percentile(sync, 50), stats.Percentile(sync, 99))

	// Every acknowledged commit is on a replica when it is acknowledged.
	checks := make([]func(string) (bool, error), len(replicas))
	for i, r := range replicas {
		checks[i] = sc.replicaHas(t, r)
	}
	const acked = 100
	for i := 0; i < acked; i++ {
		stmt := fmt.Sprintf("INSERT INTO syncw VALUES (%d)", 10000+i)
		var mark string
		var err error
		if sc.markedCommit != nil {
			mark, err = sc.markedCommit(ctx, conn, stmt)
		} else if _, err = conn.ExecContext(ctx, stmt); err == nil {
			mark, err = sc.commitMark(ctx, conn)
		}
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, has := range checks {
			ok, err := has(mark)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				held++
			}
		}
		if held == 0 {
			t.Fatalf("commit %d (%s) acknowledged while no replica has it", i, mark)
		}
	}
	fig.add("Sync: each of %d acknowledged commits was on a replica at its acknowledgement (read on the replicas)", acked)

	// No replica: a commit waits, and returns once one is back.
	for _, r := range replicas {
		if _, code := r.stop(); code != 0 {
			t.Fatalf("%s: exit code %d", r.name, code)
		}
	}
	blocked := func(id int) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := p.app().Exec(fmt.Sprintf("INSERT INTO syncw VALUES (%d)", id))
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("a Sync commit with no replica returned (%v) within 2s", err)
		case <-time.After(2 * time.Second):
		}
		return done
	}
	done := blocked(20001)
	start := time.Now()
	replicas[0].start()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting commit failed: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the waiting commit did not return once a replica was back")
	}
	fig.add("Sync, no replica: a commit waits (>2s, no error); returned %.2fs after a replica's manager started", time.Since(start).Seconds())
	replicas[0].waitReady(time.Minute, api.RoleReplica)

	// No replica again: switching to Async releases the waiting commit.
	if _, code := replicas[0].stop(); code != 0 {
		t.Fatalf("%s: exit code %d", replicas[0].name, code)
	}
	done = blocked(20002)
	start = time.Now()
	c.setSync(p, false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiting commit failed: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiting commit did not return once the mode was Async")
	}
	fig.add("Sync, no replica: Async again released the waiting commit in %.2fs", time.Since(start).Seconds())
	p.waitStatus(30*time.Second, "asynchronous", func(s api.Status) bool { return s.Ready && !s.Synchronous })
	if _, err := p.app().Exec("INSERT INTO syncw VALUES (20003)"); err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		r.start()
	}
	for _, r := range replicas {
		r.waitReady(2*time.Minute, api.RoleReplica)
	}
}
