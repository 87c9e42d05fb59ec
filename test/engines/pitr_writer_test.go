//go:build engines

package engines

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/test/s3server"
)

// TestPostgresPointInTimeUnderAWriter is the point-in-time issue's proof:
// a writer commits a row carrying its time every 10 ms for a minute on a
// primary that archives through its manager to a real S3 server; for three
// targets inside that minute, a restore from a base backup taken before it
// holds exactly the rows committed at or before the target (count and
// checksum of ids and times), no more and no fewer. While the writer runs,
// the primary's lastRecoverableTime stays within the archive timeout and a
// bound of now.
func TestPostgresPointInTimeUnderAWriter(t *testing.T) {
	t.Parallel()
	const (
		archiveTimeout = 2 * time.Second
		// What lastRecoverableTime may trail now by, beyond the archive
		// timeout (the heartbeat's period: its commit is what the window
		// follows): the switch, the upload and the status read, measured
		// 1.3-2.5 s beside the rest of the engine suite on 2 cores.
		windowSlack = 5 * time.Second
		writeEvery  = 10 * time.Millisecond
		writeFor    = time.Minute
	)
	s3 := s3server.Start(t, s3server.Options{})
	ctx := context.Background()
	spec := postgresSpec()

	p := archivingPrimary(t, spec, "pitr-writer", "127.0.60.", archiveTimeout)
	archive := destination(s3, "pitr/writer").S3
	p.setArchive(t, *archive)
	app := p.app()
	mustExec(t, app, "CREATE TABLE ticks (id int PRIMARY KEY, at timestamptz NOT NULL)")
	base := p.backup(t, "writer-base", s3, "pitr/writer-base")

	// The writer: one autocommitted row every 10 ms, its time taken in
	// the transaction (clock_timestamp(), so the commit follows it within
	// the statement's own time).
	written := writeWhileArchiving(t, p, 0, writeEvery, writeFor, archiveTimeout, windowSlack, func(id int) error {
		_, err := app.Exec("INSERT INTO ticks (id, at) VALUES ($1, clock_timestamp())", id)
		return err
	})

	// Three targets inside the minute, each halfway between two rows'
	// times, so which side of it a row's commit fell is not in doubt.
	type point struct {
		id int
		at time.Time
	}
	var rows []point
	rs, err := app.Query("SELECT id, at FROM ticks ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	for rs.Next() {
		var r point
		if err := rs.Scan(&r.id, &r.at); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	rs.Close()
	if len(rows) != written || rows[len(rows)-1].id != written {
		t.Fatalf("the table holds %d rows (last %d), the writer committed %d", len(rows), rows[len(rows)-1].id, written)
	}
	checksum := func(db *sql.DB, upTo int) (int, string, error) {
		var n int
		var sum sql.NullString
		err := db.QueryRow(`SELECT count(*), md5(string_agg(id || '@' || extract(epoch FROM at)::text, ',' ORDER BY id))
			FROM ticks WHERE id <= $1`, upTo).Scan(&n, &sum)
		return n, sum.String, err
	}
	type goal struct {
		target time.Time
		upTo   int
		count  int
		sum    string
	}
	var goals []goal
	for _, frac := range []int{25, 50, 75} {
		k := len(rows) * frac / 100
		for k < len(rows)-1 && rows[k].at.Sub(rows[k-1].at) < writeEvery/2 {
			k++ // a gap of at least 5 ms on each side of the target
		}
		last := rows[k-1] // the last row at or before the target
		target := last.at.Add(rows[k].at.Sub(last.at) / 2)
		n, sum, err := checksum(app, last.id)
		if err != nil {
			t.Fatal(err)
		}
		goals = append(goals, goal{target: target, upTo: last.id, count: n, sum: sum})
	}
	s := p.waitStatus(time.Minute, "the archive to pass the last target", func(s api.Status) bool {
		return s.Archive != nil && s.Archive.LastRecoverableTime != nil && s.Archive.LastRecoverableTime.After(goals[len(goals)-1].target)
	})
	t.Logf("%d rows written; archive: %d files, recoverable to %s", written, s.Archive.Archived, s.Archive.LastRecoverableTime.Format(time.RFC3339Nano))

	for i, g := range goals {
		t.Run(fmt.Sprintf("a restore to target %d holds exactly the rows up to it", i+1), func(t *testing.T) {
			prefix := fmt.Sprint(61 + i)
			n := awaitingRestore(t, spec, "pitr-writer-dst"+prefix, "127.0."+prefix+".")
			c, host := n.manager()
			begun := time.Now()
			if _, err := c.StartRestore(ctx, host, n.auth(), api.RestoreRequest{
				ID: fmt.Sprintf("writer-%d", i+1), Source: destination(s3, "pitr/writer-base"),
				SHA256: base.SHA256, Size: base.Size, Format: base.Format,
				Archive: archive, Target: &api.RecoveryTarget{Time: ptrTo(g.target)},
			}); err != nil {
				t.Fatalf("POST %s: %v", api.PathRestore, err)
			}
			n.waitReady(3*time.Minute, api.RolePrimary)
			took := time.Since(begun)
			count, sum, err := checksum(n.app(), written)
			if err != nil {
				t.Fatal(err)
			}
			if count != g.count || sum != g.sum {
				t.Errorf("restored to %s: %d rows (md5 %s), want the %d up to id %d (md5 %s)",
					g.target.Format(time.RFC3339Nano), count, sum, g.count, g.upTo, g.sum)
			}
			t.Logf("restored to %s: %d rows, as the source held up to id %d; ready %s after the request",
				g.target.Format(time.RFC3339Nano), count, g.upTo, took.Round(10*time.Millisecond))
		})
	}
}

// writeWhileArchiving commits insert(id) for ids after last, one every
// `every` for `length`, on the archiving primary p, while it samples how far
// p's lastRecoverableTime trails now every 500 ms. It fails the test when
// the writer stops, commits fewer than half the rows it had time for, or
// the window trails by more than archiveTimeout and slack. It returns the
// last id written.
func writeWhileArchiving(t *testing.T, p *node, last int, every, length, archiveTimeout, slack time.Duration, insert func(id int) error) int {
	t.Helper()
	var (
		written  = last
		writeErr error
		lags     []time.Duration
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		end := time.After(length)
		for {
			select {
			case <-end:
				close(stop)
				return
			case <-tick.C:
				if err := insert(written + 1); err != nil {
					writeErr = err
					close(stop)
					return
				}
				written++
			}
		}
	}()
	go func() {
		defer wg.Done()
		sample := time.NewTicker(500 * time.Millisecond)
		defer sample.Stop()
		for {
			select {
			case <-stop:
				return
			case <-sample.C:
				if s, err := p.status(); err == nil && s.Archive != nil && s.Archive.LastRecoverableTime != nil {
					lags = append(lags, time.Since(*s.Archive.LastRecoverableTime))
				}
			}
		}
	}()
	wg.Wait()
	if writeErr != nil {
		t.Fatalf("the writer stopped after %d rows: %v", written-last, writeErr)
	}
	if written-last < int(length/every)/2 {
		t.Fatalf("the writer committed %d rows in %s, fewer than half of one per %s", written-last, length, every)
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) < int(length/time.Second) {
		t.Fatalf("%d samples of the window while writing, want one per 500 ms", len(lags))
	}
	worst := lags[len(lags)-1]
	t.Logf("lastRecoverableTime behind now while writing: p50 %s, p95 %s, max %s (%d samples; archive timeout %s)",
		lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)*95/100].Round(time.Millisecond), worst.Round(time.Millisecond), len(lags), archiveTimeout)
	if worst > archiveTimeout+slack {
		t.Errorf("lastRecoverableTime trailed now by up to %s under the writer, more than the archive timeout %s and %s", worst, archiveTimeout, slack)
	}
	return written
}
