package mariadb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

func TestUserStatements(t *testing.T) {
	got := Dialect{}.UserStatements(mysqlfamily.App{User: "app", Password: "password", Database: "appdb"}, "password")
	want := []string{
		"CREATE DATABASE IF NOT EXISTS `appdb` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
		"CREATE USER 'app'@'%' IDENTIFIED BY PASSWORD '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'",
		"GRANT ALL PRIVILEGES ON `appdb`.* TO 'app'@'%'",
		"CREATE USER 'replicator'@'%' IDENTIFIED BY PASSWORD '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'",
		"GRANT REPLICATION SLAVE ON *.* TO 'replicator'@'%'",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	for _, s := range got {
		if strings.Contains(s, "'password'") {
			t.Errorf("a clear password in %q", s)
		}
	}
}

func TestFollowStatements(t *testing.T) {
	got := Dialect{}.FollowStatements(mysqlfamily.Source{Host: "10.0.0.7", Port: 3306, User: "replicator", Password: "pw"})
	want := []string{
		"STOP SLAVE",
		"CHANGE MASTER TO MASTER_HOST='10.0.0.7', MASTER_PORT=3306, MASTER_USER='replicator', MASTER_PASSWORD='pw', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		"START SLAVE",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	// With the database's CA, over TLS, and the source must be the host.
	got = Dialect{}.FollowStatements(mysqlfamily.Source{Host: "10.0.0.7", Port: 3306, User: "replicator", Password: "pw", CAFile: "/run/mydb/tls/ca.crt"})
	// No client certificate: one set for an earlier source is cleared.
	if want := "MASTER_CONNECT_RETRY=1, MASTER_SSL=1, MASTER_SSL_CA='/run/mydb/tls/ca.crt', MASTER_SSL_VERIFY_SERVER_CERT=1, MASTER_SSL_CERT='', MASTER_SSL_KEY=''"; !strings.HasSuffix(got[1], want) {
		t.Errorf("%s, want it to end in %s", got[1], want)
	}
	// The admin interface (the manager's relay) takes the instance's
	// certificate.
	got = Dialect{}.FollowStatements(mysqlfamily.Source{Host: "10.0.0.7", Port: 33062, User: "replicator", Password: "pw", CAFile: "/run/mydb/tls/ca.crt",
		ClientCertFile: "/run/mydb/tls/instance.crt", ClientKeyFile: "/run/mydb/tls/instance.key"})
	if want := "MASTER_PORT=33062"; !strings.Contains(got[1], want) {
		t.Errorf("%s, want %s", got[1], want)
	}
	if want := "MASTER_SSL_VERIFY_SERVER_CERT=1, MASTER_SSL_CERT='/run/mydb/tls/instance.crt', MASTER_SSL_KEY='/run/mydb/tls/instance.key'"; !strings.HasSuffix(got[1], want) {
		t.Errorf("%s, want it to end in %s", got[1], want)
	}
}

func TestParseBinlogInfo(t *testing.T) {
	for in, want := range map[string]string{
		"mydb-bin.000003\t385\t0-1-42\n":     "0-1-42",
		"mydb-bin.000003\t385\t0-1-42,1-2-7": "0-1-42,1-2-7",
		"mydb-bin.000001\t4\n":               "",
	} {
		got, err := parseBinlogInfo(in)
		if err != nil || got != want {
			t.Errorf("parseBinlogInfo(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := parseBinlogInfo("garbage"); err == nil {
		t.Error("a one-field binlog info parsed")
	}
}

func TestParseReplicaStatus(t *testing.T) {
	s := Dialect{}.ParseReplicaStatus(map[string]string{
		"Slave_IO_Running": "Connecting", "Slave_SQL_Running": "Yes", "Master_Host": "10.0.0.7", "Master_Port": "3306",
		"Master_User": "replicator", "Last_IO_Error": "error reconnecting", "Last_IO_Errno": "1236",
		"Master_Log_File": "mydb-bin.000002", "Read_Master_Log_Pos": "900", "Relay_Master_Log_File": "mydb-bin.000002", "Exec_Master_Log_Pos": "800",
		"Gtid_IO_Pos": "0-1-9",
	})
	if s.Streaming() || !s.Configured || s.AppliedAll || s.Received != "0-1-9" || s.SecondsBehind != nil || s.LastError != "error reconnecting" || s.IOErrno != mysqlfamily.ErrSourceCannotServe {
		t.Errorf("%+v", s)
	}
}

func TestSyncStatements(t *testing.T) {
	want := []string{
		"SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC",
		"SET GLOBAL rpl_semi_sync_master_wait_no_slave = ON",
		"SET GLOBAL rpl_semi_sync_master_timeout = 4294967295",
		"SET GLOBAL rpl_semi_sync_master_enabled = ON",
	}
	if diff := cmp.Diff(want, Dialect{}.SyncStatements(true)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"SET GLOBAL rpl_semi_sync_master_enabled = OFF"}, Dialect{}.SyncStatements(false)); diff != "" {
		t.Error(diff)
	}
	q := Dialect{}.SyncQuery()
	for _, want := range []string{"rpl_semi_sync_master_enabled AS enabled,", " AS sync,", "rpl_semi_sync_master_timeout = 4294967295", "'AFTER_SYNC'", "RPL_SEMI_SYNC_MASTER_CLIENTS') AS sync_replicas"} {
		if !strings.Contains(q, want) {
			t.Errorf("SyncQuery lacks %q: %s", want, q)
		}
	}
}

func TestBackupLogGivesTheGTID(t *testing.T) {
	log := "[00] 2026-12-01 11:07:55 MySQL binlog position: filename 'mydb-bin.000001', position '1234', GTID of the last change '0-1-8,1-2-3'\n[00] completed OK!\n"
	if m := lastChangeRE.FindStringSubmatch(log); m == nil || m[1] != "0-1-8,1-2-3" {
		t.Errorf("GTID from the backup log: %q", m)
	}
}

func TestRestoreCredentialStatements(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{instance.SecretUsername: "app", instance.SecretPassword: "password",
		instance.SecretDatabase: "appdb", instance.SecretReplicationPassword: "password"} {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := New(instance.DriverConfig{Secrets: instance.Secrets{Dir: dir}})
	got, err := d.credentialStatements()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"FLUSH PRIVILEGES",
		"ALTER USER 'app'@'%' IDENTIFIED BY PASSWORD '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'",
		"ALTER USER 'replicator'@'%' IDENTIFIED BY PASSWORD '*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19'",
		"USE `appdb`",
		"RESET SLAVE ALL",
		"SET GLOBAL gtid_slave_pos = ''",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

// The engines read a renewed certificate without a restart.
var _ instance.TLSReloader = (*Driver)(nil)
