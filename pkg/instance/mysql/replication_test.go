package mysql

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// server is what the fake connection answers: the StateQuery's row and
// SHOW REPLICA STATUS's, as MySQL 8.4 names their columns.
type server struct {
	mu      sync.Mutex
	state   map[string]string
	replica map[string]string
	// adminGrants counts the replication user's SERVICE_CONNECTION_ADMIN
	// grants ("": 1).
	adminGrants string
}

func (s *server) row(q string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch q {
	case Dialect{}.StateQuery():
		return s.state
	case "SHOW REPLICA STATUS":
		return s.replica
	case adminInterfaceGrantQuery:
		return map[string]string{"n": cmp.Or(s.adminGrants, "1")}
	}
	return nil
}

var topo = instance.Topology{Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306}

func streaming(host string) map[string]string {
	return map[string]string{
		"Source_Host": host, "Source_Port": "3306", "Source_User": "replicator",
		"Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes", "Seconds_Behind_Source": "1",
		"Source_Log_File": "mydb-bin.000002", "Read_Source_Log_Pos": "900", "Relay_Source_Log_File": "mydb-bin.000002", "Exec_Source_Log_Pos": "900",
		"Last_IO_Errno": "0",
	}
}

func followStatements() []string { return followStatementsTo(3306) }

func followStatementsTo(port int) []string {
	return []string{
		"STOP REPLICA",
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST = '10.0.0.5', SOURCE_PORT = %d, SOURCE_USER = 'replicator', SOURCE_PASSWORD = 'repl-pw-2', SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 1, SOURCE_SSL = 1, SOURCE_SSL_CA = '/run/mydb/tls/database-ca.crt', SOURCE_SSL_VERIFY_SERVER_CERT = 1", port),
		"START REPLICA",
	}
}

// byAdminPort is the topology of a database whose clients get a server
// certificate of the user's own: replicas connect to the primary's admin
// interface, which serves its own.
var byAdminPort = instance.Topology{Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306, PrimaryAdminPort: 33062}

func TestFollow(t *testing.T) {
	fenced := map[string]string{"fenced": "1", "writable": "0", "server_id": "2", "gtid": ""}
	for name, tc := range map[string]struct {
		state, replica map[string]string
		topology       *instance.Topology
		want           []string
		reclone        bool
	}{
		// The database's clients got a certificate of the user's own:
		// the replica moves to the primary's admin interface, applying
		// its relay log first.
		"to the admin interface": {state: fenced, replica: streaming("10.0.0.5"), topology: &byAdminPort,
			want: append([]string{"STOP REPLICA IO_THREAD"}, followStatementsTo(33062)...)},
		"already streaming from the admin interface": {state: fenced, replica: with(streaming("10.0.0.5"), "Source_Port", "33062"), topology: &byAdminPort},
		// And back to the engine's port when the certificate goes.
		"from the admin interface back": {state: fenced, replica: with(streaming("10.0.0.5"), "Source_Port", "33062"),
			want: append([]string{"STOP REPLICA IO_THREAD"}, followStatements()...)},
		// A fresh clone: started super_read_only, no source configured
		// (the donor was a primary), gtid_executed from the clone.
		"a fresh clone": {state: fenced, want: followStatements()},
		// A server that took writes is fenced before anything else.
		"a writable server": {state: map[string]string{"fenced": "0", "writable": "1"},
			want: append([]string{"SET GLOBAL super_read_only = ON"}, followStatements()...)},
		"already streaming from the primary": {state: fenced, replica: streaming("10.0.0.5")},
		"IO thread connecting":               {state: fenced, replica: with(streaming("10.0.0.5"), "Replica_IO_Running", "Connecting")},
		// Re-pointed from another source: the relay log is applied first
		// (the re-point discards it).
		"following another primary": {state: fenced, replica: streaming("10.0.0.9"),
			want: append([]string{"STOP REPLICA IO_THREAD"}, followStatements()...)},
		"SQL thread stopped": {state: fenced, replica: with(streaming("10.0.0.5"), "Replica_SQL_Running", "No"), want: followStatements()},
		// 13114: the source purged binary logs with GTIDs the replica
		// lacks; the history is gone, only a clone helps.
		"source purged the binlogs (13114)": {state: fenced, reclone: true,
			replica: with(with(streaming("10.0.0.5"), "Replica_IO_Running", "No"), "Last_IO_Errno", "13114")},
		"source cannot serve (1236)": {state: fenced, reclone: true,
			replica: with(with(streaming("10.0.0.5"), "Replica_IO_Running", "No"), "Last_IO_Errno", "1236")},
		// A purge on a former primary is not this primary's.
		"13114 from another source": {state: fenced, want: append([]string{"STOP REPLICA IO_THREAD"}, followStatements()...),
			replica: with(with(streaming("10.0.0.9"), "Replica_IO_Running", "No"), "Last_IO_Errno", "13114")},
		// 2003: cannot connect; the primary may be restarting.
		"cannot connect (2003)": {state: fenced, want: followStatements(),
			replica: with(with(streaming("10.0.0.5"), "Replica_IO_Running", "No"), "Last_IO_Errno", "2003")},
	} {
		t.Run(name, func(t *testing.T) {
			d, tools := newTestDriver(t)
			// Every reading of the clock is a second on, past the grace
			// before a re-clone (mysqlfamily's, tested with MariaDB).
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			d.Server.RecloneGrace = time.Second
			d.Server.Now = func() time.Time { clock = clock.Add(time.Second); return clock }
			srv := &server{state: tc.state, replica: tc.replica}
			tools.conn.Row = srv.row
			err := d.Follow(context.Background(), *cmp.Or(tc.topology, &topo))
			if tc.reclone != errors.Is(err, instance.ErrMustReclone) || (!tc.reclone && err != nil) {
				t.Fatalf("err = %v, want a re-clone: %v", err, tc.reclone)
			}
			if diff := gocmp.Diff(tc.want, tools.conn.Executed()); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func with(m map[string]string, k, v string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	c[k] = v
	return c
}

func TestPromote(t *testing.T) {
	t.Run("a bootstrapped primary", func(t *testing.T) {
		d, tools := newTestDriver(t)
		tools.conn.Row = (&server{}).row
		if err := d.Promote(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}
		if diff := gocmp.Diff(want, tools.conn.Executed()); diff != "" {
			t.Error(diff)
		}
	})
	// Data made before mydb used the admin interface: the grant, once
	// writes are on.
	t.Run("a primary whose replication user lacks the admin grant", func(t *testing.T) {
		d, tools := newTestDriver(t)
		tools.conn.Row = (&server{adminGrants: "0"}).row
		if err := d.Promote(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF",
			"GRANT SERVICE_CONNECTION_ADMIN ON *.* TO 'replicator'@'%'"}
		if diff := gocmp.Diff(want, tools.conn.Executed()); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("a replica applies its relay log first", func(t *testing.T) {
		d, tools := newTestDriver(t)
		srv := &server{replica: with(streaming("10.0.0.5"), "Exec_Source_Log_Pos", "700")}
		tools.conn.Row = srv.row
		polls := 0
		tools.conn.Row = func(q string) map[string]string {
			if q == "SHOW REPLICA STATUS" {
				polls++
				if polls == 3 {
					// The SQL thread caught up with what the IO thread read.
					srv.replica = with(srv.replica, "Exec_Source_Log_Pos", "900")
				}
			}
			return srv.row(q)
		}
		if err := d.Promote(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := []string{"STOP REPLICA IO_THREAD", "STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}
		if diff := gocmp.Diff(want, tools.conn.Executed()); diff != "" {
			t.Error(diff)
		}
		if polls < 3 {
			t.Errorf("promoted after %d status reads, before the relay log was applied", polls)
		}
	})
	t.Run("the wait is bounded", func(t *testing.T) {
		d, tools := newTestDriver(t)
		d.Server.ApplyTimeout = 300 * time.Millisecond
		tools.conn.Row = (&server{replica: with(streaming("10.0.0.5"), "Exec_Source_Log_Pos", "700")}).row
		start := time.Now()
		if err := d.Promote(context.Background()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
			t.Errorf("promoted after %s", took)
		}
		if got := tools.conn.Executed(); got[len(got)-1] != "SET GLOBAL read_only = OFF" {
			t.Errorf("not promoted: %v", got)
		}
	})
}

func TestProbe(t *testing.T) {
	d, tools := newTestDriver(t)
	srv := &server{state: map[string]string{"fenced": "0", "writable": "1", "server_id": "1", "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5", "replica_gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5"}}
	tools.conn.Row = srv.row
	p, err := d.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Writable || p.ServerID != 1 || p.Position.GTID != "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5" || p.Streaming || p.Upstream != "" {
		t.Errorf("primary: %+v", p)
	}
	srv.state = map[string]string{"fenced": "1", "writable": "0", "server_id": "2", "gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-4", "replica_gtid": "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-4"}
	srv.replica = streaming("10.0.0.5")
	p, err = d.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.Writable || !p.Streaming || p.Upstream != "10.0.0.5:3306" || p.LagSeconds == nil || *p.LagSeconds != 1 || p.ServerID != 2 || !strings.HasSuffix(p.Position.GTID, ":1-4") {
		t.Errorf("replica: %+v", p)
	}
	// The SQL thread stopped: Seconds_Behind_Source is NULL, no lag.
	srv.replica = with(streaming("10.0.0.5"), "Replica_SQL_Running", "No")
	delete(srv.replica, "Seconds_Behind_Source")
	if p, _ = d.Probe(context.Background()); p.Streaming || p.LagSeconds != nil {
		t.Errorf("a stopped applier: %+v", p)
	}
}
