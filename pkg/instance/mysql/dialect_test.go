package mysql

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// The expected statements follow the MySQL 8.4 reference manual's syntax
// (CHANGE REPLICATION SOURCE TO, START REPLICA, CLONE INSTANCE FROM); they
// are not run against a server here.

func TestFollowStatements(t *testing.T) {
	got := Dialect{}.FollowStatements(mysqlfamily.Source{Host: "10.0.0.7", Port: 3306, User: "replicator", Password: `p'w\x`})
	want := []string{
		"STOP REPLICA",
		`CHANGE REPLICATION SOURCE TO SOURCE_HOST = '10.0.0.7', SOURCE_PORT = 3306, SOURCE_USER = 'replicator', SOURCE_PASSWORD = 'p\'w\\x', SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 1, GET_SOURCE_PUBLIC_KEY = 1`,
		"START REPLICA",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestPromoteAndFence(t *testing.T) {
	if diff := cmp.Diff([]string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}, Dialect{}.PromoteStatements()); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"SET GLOBAL super_read_only = ON"}, Dialect{}.FenceStatements()); diff != "" {
		t.Error(diff)
	}
	for _, s := range append(Dialect{}.PromoteStatements(), Dialect{}.FollowStatements(mysqlfamily.Source{})...) {
		for _, old := range []string{"SLAVE", "MASTER"} {
			if strings.Contains(s, old) {
				t.Errorf("%q uses the terms 8.4 removed", s)
			}
		}
	}
}

func TestCloneStatements(t *testing.T) {
	got := CloneStatements(mysqlfamily.Source{Host: "db-0.db", Port: 3306, User: api.ReplicationUser, Password: "s3cret"}, "/data/mysql.clone")
	want := []string{
		"SET GLOBAL clone_valid_donor_list = 'db-0.db:3306'",
		"CLONE INSTANCE FROM 'replicator'@'db-0.db':3306 IDENTIFIED BY 's3cret' DATA DIRECTORY = '/data/mysql.clone'",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestUserStatements(t *testing.T) {
	got := Dialect{}.UserStatements(mysqlfamily.App{User: "app", Password: "pw", Database: "shop`db"}, "rpw")
	want := []string{
		"CREATE DATABASE IF NOT EXISTS `shop``db` CHARACTER SET utf8mb4",
		"CREATE USER 'app'@'%' IDENTIFIED WITH caching_sha2_password BY 'pw'",
		"GRANT ALL PRIVILEGES ON `shop``db`.* TO 'app'@'%'",
		"CREATE USER 'replicator'@'%' IDENTIFIED WITH caching_sha2_password BY 'rpw'",
		"GRANT REPLICATION SLAVE, BACKUP_ADMIN ON *.* TO 'replicator'@'%'",
		"GRANT SERVICE_CONNECTION_ADMIN ON *.* TO 'replicator'@'%'",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	for _, s := range got {
		if strings.Contains(s, "ON *.* TO 'app'") {
			t.Errorf("the application user gets a global privilege: %s", s)
		}
	}
}

func TestParseReplicaStatus(t *testing.T) {
	s := Dialect{}.ParseReplicaStatus(map[string]string{
		"Replica_IO_Running": "Yes", "Replica_SQL_Running": "Yes", "Source_Host": "10.0.0.7", "Source_Port": "3306",
		"Source_User": "replicator", "Seconds_Behind_Source": "2",
		"Source_Log_File": "mydb-bin.000002", "Read_Source_Log_Pos": "900", "Relay_Source_Log_File": "mydb-bin.000002", "Exec_Source_Log_Pos": "900",
		"Retrieved_Gtid_Set": "u1:1-9",
	})
	if !s.Streaming() || s.Received != "u1:1-9" || s.Host != "10.0.0.7" || s.Port != 3306 || s.SecondsBehind == nil || *s.SecondsBehind != 2 || !s.AppliedAll {
		t.Errorf("%+v", s)
	}
	if s := (Dialect{}).ParseReplicaStatus(nil); s.Configured || s.Streaming() {
		t.Errorf("no row: %+v", s)
	}
}

func TestServerArgs(t *testing.T) {
	args := strings.Join(ServerArgs(instance.DriverConfig{RunDir: "/run/mydb", ListenHost: "10.0.0.8", Port: 3306, ServerID: 2}, "/data/mysql"), " ")
	for _, want := range []string{"--no-defaults", "--server-id=2", "--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--super-read-only=ON", "--skip-replica-start", "--plugin-load-add=mysql_clone.so", "--bind-address=10.0.0.8"} {
		if !strings.Contains(args, want) {
			t.Errorf("server args lack %s: %s", want, args)
		}
	}
	if strings.Contains(args, "--admin") {
		t.Errorf("an admin interface without an admin port: %s", args)
	}
	// The admin interface serves the instance's own certificate, whatever
	// the engine's port serves clients.
	tls := instance.EngineTLSIn("/run/mydb")
	args = strings.Join(ServerArgs(instance.DriverConfig{RunDir: "/run/mydb", ListenHost: "10.0.0.8", Port: 3306, AdminPort: 33062, ServerID: 2, TLS: tls}, "/data/mysql"), " ")
	for _, want := range []string{"--ssl-cert=/run/mydb/tls/server.crt", "--admin-address=10.0.0.8", "--admin-port=33062",
		"--admin-ssl-cert=/run/mydb/tls/instance.crt", "--admin-ssl-key=/run/mydb/tls/instance.key", "--admin-ssl-ca=/run/mydb/tls/instance-chain-ca.crt"} {
		if !strings.Contains(args, want) {
			t.Errorf("server args lack %s: %s", want, args)
		}
	}
}

// TestReloadTLS: the engine's port and the admin interface read their
// files again.
func TestReloadTLS(t *testing.T) {
	for adminPort, want := range map[int][]string{
		0:     {"ALTER INSTANCE RELOAD TLS"},
		33062: {"ALTER INSTANCE RELOAD TLS", "ALTER INSTANCE RELOAD TLS FOR CHANNEL mysql_admin"},
	} {
		d, tools := newTestDriver(t)
		d.cfg.AdminPort = adminPort
		if err := d.ReloadTLS(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := tools.conn.Executed(); !slices.Equal(got, want) {
			t.Errorf("admin port %d: %q, want %q", adminPort, got, want)
		}
	}
}

func TestSyncStatements(t *testing.T) {
	want := []string{
		"SET GLOBAL rpl_semi_sync_source_wait_point = AFTER_SYNC",
		"SET GLOBAL rpl_semi_sync_source_wait_no_replica = ON",
		"SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 1",
		"SET GLOBAL rpl_semi_sync_source_timeout = 4294967295",
		"SET GLOBAL rpl_semi_sync_source_enabled = ON",
	}
	if got := (Dialect{}).SyncStatements(true); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("on: %q", got)
	}
	if got := (Dialect{}).SyncStatements(false); len(got) != 1 || got[0] != "SET GLOBAL rpl_semi_sync_source_enabled = OFF" {
		t.Errorf("off: %q", got)
	}
	q := Dialect{}.SyncQuery()
	for _, want := range []string{"rpl_semi_sync_source_enabled AS enabled,", " AS sync,", "rpl_semi_sync_source_timeout = 4294967295", "'AFTER_SYNC'", "performance_schema.global_status", "'Rpl_semi_sync_source_clients') AS sync_replicas"} {
		if !strings.Contains(q, want) {
			t.Errorf("SyncQuery lacks %q: %s", want, q)
		}
	}
	args := strings.Join(ServerArgs(instance.DriverConfig{RunDir: "/run/mydb", ListenHost: "10.0.0.8", Port: 3306, ServerID: 2}, "/data/mysql"), " ")
	for _, want := range []string{"--plugin-load-add=semisync_source.so", "--plugin-load-add=semisync_replica.so", "--loose-rpl-semi-sync-replica-enabled=ON"} {
		if !strings.Contains(args, want) {
			t.Errorf("server args lack %s: %s", want, args)
		}
	}
}

// The engines read a renewed certificate without a restart.
var _ instance.TLSReloader = (*Driver)(nil)
