//go:build engines

package engines

import (
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// measureReplication writes n rows to the primary at a steady rate and,
// on every replica, polls for the newest row every millisecond; a row's delay
// is from its INSERT returning on the primary to its first sight on the
// replica. It returns the delays of every row on every replica.
func measureReplication(t *testing.T, primary *sql.DB, replicas []*sql.DB, n int, every time.Duration) []time.Duration {
	t.Helper()
	committed := make([]time.Time, n+1)
	seen := make([][]time.Time, len(replicas))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, len(replicas)+1)
	for i, db := range replicas {
		seen[i] = make([]time.Time, n+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := int64(0)
			deadline := time.Now().Add(time.Duration(n)*every + 30*time.Second)
			for last < int64(n) {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("replica %d saw only %d of %d rows", i, last, n)
					return
				}
				var m sql.NullInt64
				if err := db.QueryRow("SELECT max(id) FROM writes").Scan(&m); err != nil {
					errs <- err
					return
				}
				now := time.Now()
				for id := last + 1; id <= m.Int64; id++ {
					seen[i][id] = now
				}
				if m.Int64 > last {
					last = m.Int64
				}
				// Poll every millisecond rather than spin: on two cores a
				// spinning reader would steal the replica's CPU and inflate
				// the very delay it measures.
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
	}
	tick := time.NewTicker(every)
	for id := 1; id <= n; id++ {
		<-tick.C
		if _, err := primary.Exec(fmt.Sprintf("INSERT INTO writes VALUES (%d, '%s')", id, time.Now().UTC().Format(time.RFC3339Nano))); err != nil {
			tick.Stop()
			close(stop)
			wg.Wait()
			t.Fatalf("write %d: %v", id, err)
		}
		committed[id] = time.Now()
	}
	tick.Stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var delays []time.Duration
	for i := range replicas {
		for id := 1; id <= n; id++ {
			// A row can show on a replica before the primary's reply has
			// reached the client: that counts as no delay.
			delays = append(delays, max(seen[i][id].Sub(committed[id]), 0))
		}
	}
	return delays
}

// throughput is how fast a finished backup or restore streamed: its size
// over the time from its start to its end, as the manager recorded them.
func throughput(op api.Operation) string {
	mib := float64(op.Size) / (1 << 20)
	secs := op.FinishTime.Sub(op.StartTime).Seconds()
	return fmt.Sprintf("%.1f MiB in %.2fs, %.0f MiB/s", mib, secs, mib/secs)
}

func killPID(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("no engine pid in the status")
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}
