package postgres

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// Probe implements instance.Driver.
func (d *Driver) Probe(ctx context.Context) (instance.Probe, error) {
	var p instance.Probe
	pool, err := d.adminPool()
	if err != nil {
		return p, err
	}
	var inRecovery bool
	if err := pool.QueryRow(ctx, "SELECT pg_is_in_recovery(), system_identifier::text FROM pg_control_system()").
		Scan(&inRecovery, &p.SystemIdentifier); err != nil {
		return p, err
	}
	p.Writable = !inRecovery
	if !inRecovery {
		// The timeline is the first 8 hex digits of the current WAL file's name.
		err := pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text,
			('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int`).
			Scan(&p.Position.LSN, &p.Position.Timeline)
		if err != nil {
			return p, err
		}
		err = pool.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names') <> '',
			(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum'))::int`).
			Scan(&p.Synchronous, &p.SyncReplicas)
		return p, err
	}
	// On a standby: the position is the WAL it has flushed (received and
	// synced), or has replayed when that is further (the receive LSN
	// starts at a segment's beginning, or is NULL, until streaming
	// resumes after a restart). A Sync primary acknowledges a commit once
	// some standby flushed it, and a promotion replays everything flushed
	// first, so this, not the replay LSN, is what a failover compares. The
	// lag is the replay's, behind the primary's WAL end as the walreceiver
	// last heard it (latest_end_lsn).
	var (
		position, status, host *string
		conninfo               *string
		port                   *int
		received               *uint32
		checkpoint             uint32
		lagBytes               *int64
		lagSeconds             *float64
	)
	err = pool.QueryRow(ctx, `
		SELECT greatest(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::text,
		       r.received_tli::int, (SELECT timeline_id FROM pg_control_checkpoint())::int,
		       r.status, r.sender_host, r.sender_port, r.conninfo,
		       greatest(pg_wal_lsn_diff(r.latest_end_lsn, pg_last_wal_replay_lsn()), 0)::bigint,
		       CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
		            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) END::float8
		FROM (SELECT 1) one LEFT JOIN pg_stat_wal_receiver r ON true`).
		Scan(&position, &received, &checkpoint, &status, &host, &port, &conninfo, &lagBytes, &lagSeconds)
	if err != nil {
		return p, err
	}
	if position != nil {
		p.Position.LSN = *position
	}
	p.Position.Timeline = d.standbyTimeline(received, checkpoint)
	p.Streaming = status != nil && *status == "streaming"
	if host != nil && port != nil {
		p.Upstream = net.JoinHostPort(upstreamHost(*host, conninfo), fmt.Sprint(*port))
	}
	p.LagBytes, p.LagSeconds = lagBytes, lagSeconds
	return p, nil
}

// hostaddrIn finds hostaddr in a walreceiver's conninfo.
var hostaddrIn = regexp.MustCompile(`(?:^|\s)hostaddr=(\S+)`)

// upstreamHost is the address a walreceiver connects to: its host, or,
// when it verifies a name at an address (a server certificate of the
// user's own: host=<name> hostaddr=<address>), the address.
func upstreamHost(host string, conninfo *string) string {
	if conninfo != nil {
		if m := hostaddrIn.FindStringSubmatch(*conninfo); m != nil {
			return strings.Trim(m[1], "'")
		}
	}
	return host
}

// standbyTimeline is the timeline of a standby's position: the
// walreceiver's while it streams, and the last one it streamed on once it
// stopped (a primary's clean shutdown ends it, and a switchover compares
// the position with that primary's last write then). The
// checkpoint's timeline, the fallback before anything streamed, changes
// only at the standby's next restartpoint, so it lags a timeline switch.
func (d *Driver) standbyTimeline(received *uint32, checkpoint uint32) uint32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if received != nil && *received > 0 {
		d.receivedTimeline = *received
		return *received
	}
	return max(d.receivedTimeline, checkpoint)
}
