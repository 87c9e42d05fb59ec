// Package mysql is the MySQL 8.4 dialect of the instance manager: the
// statements and server options that differ from MariaDB's. Only the
// statements exist so far (unit tested against the 8.4 reference manual's
// syntax); no MySQL server runs in mydb's tests, and --engine mysql is
// refused until the engine around them (initialize, CLONE, supervision)
// is built and run against a real server.
package mysql

import (
	"fmt"
	"path/filepath"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Dialect is MySQL 8.4's SQL.
type Dialect struct{}

var _ mysqlfamily.Dialect = Dialect{}

// UserStatements implements mysqlfamily.Dialect. 8.4 disables
// mysql_native_password, so there is no hash to send: the password goes
// over the unix socket in the statement, which MySQL rewrites before it
// reaches any log. The replication user may also serve CLONE (BACKUP_ADMIN).
func (Dialect) UserStatements(app mysqlfamily.App, replicationPassword string) []string {
	appAccount := mysqlfamily.Account(app.User, "%")
	repl := mysqlfamily.Account(instance.ReplicationUser, "%")
	return []string{
		fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8mb4", mysqlfamily.QuoteIdent(app.Database)),
		fmt.Sprintf("CREATE USER %s IDENTIFIED WITH caching_sha2_password BY %s", appAccount, mysqlfamily.QuoteString(app.Password)),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON %s.* TO %s", mysqlfamily.QuoteIdent(app.Database), appAccount),
		fmt.Sprintf("CREATE USER %s IDENTIFIED WITH caching_sha2_password BY %s", repl, mysqlfamily.QuoteString(replicationPassword)),
		fmt.Sprintf("GRANT REPLICATION SLAVE, BACKUP_ADMIN ON *.* TO %s", repl),
	}
}

// AdminUserStatements let the manager's OS user administer the server
// over the unix socket without a password (auth_socket), replacing the
// passwordless root that --initialize-insecure leaves.
func AdminUserStatements(osUser string) []string {
	admin := mysqlfamily.Account(osUser, "localhost")
	return []string{
		fmt.Sprintf("CREATE USER IF NOT EXISTS %s IDENTIFIED WITH auth_socket", admin),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO %s WITH GRANT OPTION", admin),
		"DROP USER IF EXISTS 'root'@'localhost'",
	}
}

// FollowStatements implements mysqlfamily.Dialect. GET_SOURCE_PUBLIC_KEY
// lets caching_sha2_password authenticate without TLS.
func (Dialect) FollowStatements(src mysqlfamily.Source) []string {
	return []string{
		"STOP REPLICA",
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST = %s, SOURCE_PORT = %d, SOURCE_USER = %s, SOURCE_PASSWORD = %s, SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 1, GET_SOURCE_PUBLIC_KEY = 1",
			mysqlfamily.QuoteString(src.Host), src.Port, mysqlfamily.QuoteString(src.User), mysqlfamily.QuoteString(src.Password)),
		"START REPLICA",
	}
}

// FenceStatements implements mysqlfamily.Dialect: super_read_only (which
// sets read_only) stops even SUPER users.
func (Dialect) FenceStatements() []string { return []string{"SET GLOBAL super_read_only = ON"} }

// PromoteStatements implements mysqlfamily.Dialect.
func (Dialect) PromoteStatements() []string {
	return []string{"STOP REPLICA", "RESET REPLICA ALL", "SET GLOBAL super_read_only = OFF", "SET GLOBAL read_only = OFF"}
}

// ReplicaStatusQuery implements mysqlfamily.Dialect.
func (Dialect) ReplicaStatusQuery() string { return "SHOW REPLICA STATUS" }

// ParseReplicaStatus implements mysqlfamily.Dialect.
func (Dialect) ParseReplicaStatus(row map[string]string) mysqlfamily.ReplicaStatus {
	return mysqlfamily.ParseStatus(row, mysqlfamily.StatusColumns{
		IO: "Replica_IO_Running", SQL: "Replica_SQL_Running", Host: "Source_Host", Port: "Source_Port",
		User: "Source_User", Behind: "Seconds_Behind_Source",
		ReadFile: "Source_Log_File", ReadPos: "Read_Source_Log_Pos", ExecFile: "Relay_Source_Log_File", ExecPos: "Exec_Source_Log_Pos",
	})
}

// PositionQuery is the set of GTIDs the server applied.
const PositionQuery = "SELECT @@GLOBAL.gtid_executed"

// CloneStatements replace the (running, empty) recipient's data with a
// physical copy of the donor's through the CLONE plugin; the server
// restarts itself afterwards (under a supervisor) and replication then
// starts with auto-positioning from the cloned gtid_executed.
func CloneStatements(donor mysqlfamily.Source) []string {
	return []string{
		fmt.Sprintf("SET GLOBAL clone_valid_donor_list = %s", mysqlfamily.QuoteString(fmt.Sprintf("%s:%d", donor.Host, donor.Port))),
		fmt.Sprintf("CLONE INSTANCE FROM %s:%d IDENTIFIED BY %s",
			mysqlfamily.Account(donor.User, donor.Host), donor.Port, mysqlfamily.QuoteString(donor.Password)),
	}
}

// InitializeArgs create a data directory (one level below the volume,
// since --initialize refuses a lost+found) with a root that has no
// password and can only connect over the socket until AdminUserStatements.
func InitializeArgs(dataDir string) []string {
	return []string{"--no-defaults", "--initialize-insecure", "--datadir=" + dataDir}
}

// ServerArgs are mysqld's options for an instance: GTIDs on, replication
// off until the manager configures it, writes off until it promotes.
func ServerArgs(cfg instance.EngineConfig, dataDir string) []string {
	return []string{
		"--no-defaults",
		"--datadir=" + dataDir,
		"--socket=" + filepath.Join(cfg.RunDir, "mysqld.sock"),
		"--pid-file=" + filepath.Join(cfg.RunDir, "mysqld.pid"),
		"--bind-address=" + cfg.ListenHost,
		fmt.Sprintf("--port=%d", cfg.Port),
		fmt.Sprintf("--server-id=%d", cfg.ServerID),
		"--report-host=" + cfg.ListenHost,
		"--log-bin=mydb-bin",
		"--relay-log=mydb-relay-bin",
		"--gtid-mode=ON",
		"--enforce-gtid-consistency=ON",
		"--skip-replica-start",
		"--super-read-only=ON",
		"--skip-name-resolve",
		"--plugin-load-add=mysql_clone.so",
		"--plugin-load-add=auth_socket.so",
	}
}

// StopIOThreadStatement implements mysqlfamily.Dialect.
func (Dialect) StopIOThreadStatement() string { return "STOP REPLICA IO_THREAD" }

// StateQuery implements mysqlfamily.Dialect: super_read_only is the fence,
// read_only what clients see; gtid_executed is the position on a primary
// and on a replica alike.
func (Dialect) StateQuery() string {
	return "SELECT @@global.super_read_only AS fenced, @@global.read_only = 0 AS writable, @@server_id AS server_id, " +
		"@@global.gtid_executed AS gtid, @@global.gtid_executed AS replica_gtid"
}

// ErrSourceFatalReadingBinlog is ER_SERVER_SOURCE_FATAL_ERROR_READING_BINLOG,
// the number 8.4's replica IO thread reports ("Got fatal error 1236 from
// source when reading data from binary log: ... purged required binary
// logs") in Last_IO_Errno.
const ErrSourceFatalReadingBinlog = 13114

// MustReclone implements mysqlfamily.Dialect.
func (Dialect) MustReclone(ioErrno int) bool {
	return ioErrno == ErrSourceFatalReadingBinlog || ioErrno == mysqlfamily.ErrSourceCannotServe
}
