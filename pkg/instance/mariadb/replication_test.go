package mariadb

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily/fakeconn"
)

// The real-engine suite runs these paths against MariaDB; here the
// decisions are pinned through a fake connection.

func newFakeDriver(t *testing.T, state, replica map[string]string) (*Driver, *fakeconn.Conn) {
	t.Helper()
	secrets := t.TempDir()
	if err := os.WriteFile(filepath.Join(secrets, instance.SecretReplicationPassword), []byte("rpw"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := New(instance.DriverConfig{DataRoot: t.TempDir(), RunDir: t.TempDir(), Secrets: instance.Secrets{Dir: secrets},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	conn := &fakeconn.Conn{Row: func(q string) map[string]string {
		if q == (Dialect{}).StateQuery() {
			return state
		}
		return replica
	}}
	d.Server.Open = func() (mysqlfamily.Conn, error) { return conn, nil }
	return d, conn
}

var topo = instance.Topology{Primary: "db-0", PrimaryHost: "10.0.0.5", PrimaryPort: 3306}

func TestFollowAdoptsTheCloneGTIDFirst(t *testing.T) {
	d, conn := newFakeDriver(t, map[string]string{"fenced": "1"}, nil)
	if err := os.MkdirAll(d.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.DataDir, cloneGTIDFile), []byte("0-1-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Follow(context.Background(), topo); err != nil {
		t.Fatal(err)
	}
	want := append([]string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL gtid_slave_pos = '0-1-42'"},
		Dialect{}.FollowStatements(mysqlfamily.Source{Host: "10.0.0.5", Port: 3306, User: "replicator", Password: "rpw"})...)
	if diff := cmp.Diff(want, conn.Executed()); diff != "" {
		t.Error(diff)
	}
	if _, err := os.Stat(filepath.Join(d.DataDir, cloneGTIDFile)); !os.IsNotExist(err) {
		t.Errorf("the clone's GTID file is left: %v", err)
	}
}

// TestFollowToTheAdminInterface: while clients get a certificate of the
// user's own, the replica connects to the primary's admin interface (the
// manager's relay) with the instance's certificate, which the relay
// requires; back at the engine's port it presents none.
func TestFollowToTheAdminInterface(t *testing.T) {
	streaming := func(port string) map[string]string {
		return map[string]string{"Master_Host": "10.0.0.5", "Master_Port": port, "Master_User": "replicator",
			"Slave_IO_Running": "Yes", "Slave_SQL_Running": "Yes"}
	}
	byAdminPort := topo
	byAdminPort.PrimaryAdminPort = 33062
	tlsFiles := instance.EngineTLSIn("/run/mydb")
	src := mysqlfamily.Source{Host: "10.0.0.5", Port: 3306, User: "replicator", Password: "rpw", CAFile: tlsFiles.DatabaseCAFile}
	relay := src
	relay.Port, relay.ClientCertFile, relay.ClientKeyFile = 33062, tlsFiles.InstanceCertFile, tlsFiles.InstanceKeyFile
	for name, tc := range map[string]struct {
		replica  map[string]string
		topology instance.Topology
		want     []string
	}{
		"to the admin interface": {replica: streaming("3306"), topology: byAdminPort,
			want: append([]string{"STOP SLAVE IO_THREAD"}, Dialect{}.FollowStatements(relay)...)},
		"already there": {replica: streaming("33062"), topology: byAdminPort},
		"back to the engine's port": {replica: streaming("33062"), topology: topo,
			want: append([]string{"STOP SLAVE IO_THREAD"}, Dialect{}.FollowStatements(src)...)},
	} {
		t.Run(name, func(t *testing.T) {
			d, conn := newFakeDriver(t, map[string]string{"fenced": "1"}, tc.replica)
			d.cfg.TLS, d.Server.Cfg.TLS = tlsFiles, tlsFiles
			if err := d.Follow(context.Background(), tc.topology); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, conn.Executed()); diff != "" {
				t.Error(diff)
			}
		})
	}
}

func TestFollowFencesAndReclones(t *testing.T) {
	purged := map[string]string{"Master_Host": "10.0.0.5", "Master_Port": "3306", "Master_User": "replicator",
		"Slave_IO_Running": "No", "Slave_SQL_Running": "Yes", "Last_IO_Errno": "1236", "Last_IO_Error": "purged"}
	d, conn := newFakeDriver(t, map[string]string{"fenced": "0"}, purged)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d.Server.Now = func() time.Time { return now }
	// At first the replica retries: a primary promoted a moment ago may
	// still be applying the GTIDs the replica asks for.
	if err := d.Follow(context.Background(), topo); err != nil {
		t.Fatalf("within the grace: %v", err)
	}
	retry := append([]string{"SET GLOBAL read_only = ON"}, Dialect{}.FollowStatements(mysqlfamily.Source{Host: "10.0.0.5", Port: 3306, User: "replicator", Password: "rpw"})...)
	if diff := cmp.Diff(retry, conn.Executed()); diff != "" {
		t.Error(diff)
	}
	// Still refused after the grace: the history is gone, only a clone helps.
	now = now.Add(30 * time.Second)
	if err := d.Follow(context.Background(), topo); !errors.Is(err, instance.ErrMustReclone) {
		t.Fatalf("after the grace: err = %v", err)
	}
}

// TestFenceRefusesWritesEndsSessionsAndReportsTheBinlog: the fence is
// read_only, then the application's sessions end (one already gone is no
// error), and the position is the binlog's.
func TestFenceRefusesWritesEndsSessionsAndReportsTheBinlog(t *testing.T) {
	d, conn := newFakeDriver(t, nil, nil)
	if err := os.WriteFile(filepath.Join(d.Cfg.Secrets.Dir, instance.SecretUsername), []byte("app"), 0o600); err != nil {
		t.Fatal(err)
	}
	conn.Row = func(q string) map[string]string {
		switch {
		case strings.Contains(q, "information_schema.processlist") && strings.Contains(q, "'app'"):
			return map[string]string{"ids": "7,9"}
		case q == (Dialect{}).BinlogPositionQuery():
			return map[string]string{"gtid": "0-1-42"}
		}
		return nil
	}
	conn.Fail = func(stmt string) error {
		if stmt == "KILL CONNECTION 9" {
			return &mysql.MySQLError{Number: 1094, Message: "Unknown thread id: 9"}
		}
		return nil
	}
	if d.FenceStops() {
		t.Error("MariaDB fences a running server")
	}
	pos, err := d.Fence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pos.GTID != "0-1-42" {
		t.Errorf("fenced position %+v", pos)
	}
	if got, want := conn.Executed(), []string{"SET GLOBAL read_only = ON", "KILL CONNECTION 7"}; !slices.Equal(got, want) {
		t.Errorf("statements %q, want %q", got, want)
	}
}

// TestReplicaPositionIncludesTheRelayLog: a replica's position is what it
// applied merged with what its IO thread wrote to the relay log
// (Gtid_IO_Pos), since a semi-synchronous primary acknowledged those
// commits already and a promotion applies them.
func TestReplicaPositionIncludesTheRelayLog(t *testing.T) {
	d, _ := newFakeDriver(t,
		map[string]string{"fenced": "1", "writable": "0", "server_id": "2", "gtid": "0-1-40", "replica_gtid": "0-1-40"},
		map[string]string{"Slave_IO_Running": "No", "Slave_SQL_Running": "Yes", "Master_Host": "10.0.0.5", "Master_Port": "3306",
			"Master_User": "replicator", "Gtid_IO_Pos": "0-1-42"})
	p, err := d.Probe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.Position.GTID != "0-1-42" {
		t.Errorf("position %q, want the relay log's 0-1-42", p.Position.GTID)
	}
}

// TestOnlyAWritablePrimaryServesAClone: a server still being promoted
// (read-only, applying its relay log) answers 503, and the replica retries.
func TestOnlyAWritablePrimaryServesAClone(t *testing.T) {
	d, _ := newFakeDriver(t, map[string]string{"fenced": "1", "writable": "0"}, nil)
	if err := os.MkdirAll(d.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.DataDir, mysqlfamily.SystemIDFile), []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.ServeClone(rec, httptest.NewRequest(http.MethodGet, "/v1/clone", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not a writable primary") {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}
