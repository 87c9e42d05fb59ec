// Package failover decides who is a database's primary. A switchover under
// way (status.targetPrimary set through POST .../switchover) completes once
// the old primary has fenced and the target holds its last write, waits, or
// is given up after its timeout; a primary unready for the failover delay is
// replaced by its most advanced replica, unless, with Sync replication, a
// replica that cannot take over may hold acknowledged writes the candidate
// lacks. Decide is a pure function of the database as stored, what its
// instance managers just reported, the incident remembered since the last
// poll and the time: the controller gathers those and applies the result
// (one status write with the resourceVersion it was decided from, then its
// Event and metrics). Delay and FenceAfter are the two durations the
// controller and every instance manager must agree on.
package failover

import (
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
)

// Delay is how long db's primary may be unready before a failover:
// spec.failoverDelay, or its default.
func Delay(spec examplev1.MyDatabaseSpec) time.Duration {
	if d := spec.FailoverDelay; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return examplev1.DefaultFailoverDelay
}

// FenceAfter is how long an instance manager that cannot read its database
// from the API waits before it fences its primary: half the failover
// delay, so that a primary cut off from the API has stopped taking writes
// well before the controller, which waits the whole delay, promotes
// another instance.
func FenceAfter(delay time.Duration) time.Duration {
	return delay / 2
}

// Synchronous tells whether a commit is acknowledged only once a replica
// has it.
func Synchronous(spec examplev1.MyDatabaseSpec) bool {
	return spec.Replication != nil && spec.Replication.Mode == examplev1.ReplicationModeSync
}
