package mariadb

import (
	"fmt"

	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Dialect is MariaDB's SQL (10.11).
type Dialect struct{}

var _ mysqlfamily.Dialect = Dialect{}

// UserStatements implements mysqlfamily.Dialect. The application user gets
// every privilege on its database and none global (no SUPER, FILE,
// PROCESS, GRANT OPTION, READ_ONLY ADMIN); passwords go in as hashes.
func (Dialect) UserStatements(app mysqlfamily.App, replicationPassword string) []string {
	appAccount := mysqlfamily.Account(app.User, "%")
	repl := mysqlfamily.Account(api.ReplicationUser, "%")
	return []string{
		fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", mysqlfamily.QuoteIdent(app.Database)),
		fmt.Sprintf("CREATE USER %s IDENTIFIED BY PASSWORD %s", appAccount, mysqlfamily.QuoteString(mysqlfamily.NativePasswordHash(app.Password))),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON %s.* TO %s", mysqlfamily.QuoteIdent(app.Database), appAccount),
		fmt.Sprintf("CREATE USER %s IDENTIFIED BY PASSWORD %s", repl, mysqlfamily.QuoteString(mysqlfamily.NativePasswordHash(replicationPassword))),
		fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO %s", repl),
	}
}

// FollowStatements implements mysqlfamily.Dialect; slave_pos makes the
// replica ask the source for what follows the GTIDs it applied.
func (Dialect) FollowStatements(src mysqlfamily.Source) []string {
	ssl := ""
	if src.CAFile != "" {
		ssl = fmt.Sprintf(", MASTER_SSL=1, MASTER_SSL_CA=%s, MASTER_SSL_VERIFY_SERVER_CERT=1", mysqlfamily.QuoteString(src.CAFile))
		// Always set, so a source without the relay's port is not
		// offered the last one's certificate.
		ssl += fmt.Sprintf(", MASTER_SSL_CERT=%s, MASTER_SSL_KEY=%s", mysqlfamily.QuoteString(src.ClientCertFile), mysqlfamily.QuoteString(src.ClientKeyFile))
	}
	return []string{
		"STOP SLAVE",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST=%s, MASTER_PORT=%d, MASTER_USER=%s, MASTER_PASSWORD=%s, MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1%s",
			mysqlfamily.QuoteString(src.Host), src.Port, mysqlfamily.QuoteString(src.User), mysqlfamily.QuoteString(src.Password), ssl),
		"START SLAVE",
	}
}

// FenceStatements implements mysqlfamily.Dialect. read_only stops every
// client without READ_ONLY ADMIN, which only the socket admin has.
func (Dialect) FenceStatements() []string { return []string{"SET GLOBAL read_only = ON"} }

// BinlogPositionQuery implements mysqlfamily.Dialect.
func (Dialect) BinlogPositionQuery() string { return "SELECT @@global.gtid_binlog_pos AS gtid" }

// PromoteStatements implements mysqlfamily.Dialect.
func (Dialect) PromoteStatements() []string {
	return []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"}
}

// ReplicaStatusQuery implements mysqlfamily.Dialect.
func (Dialect) ReplicaStatusQuery() string { return "SHOW SLAVE STATUS" }

// ParseReplicaStatus implements mysqlfamily.Dialect.
func (Dialect) ParseReplicaStatus(row map[string]string) mysqlfamily.ReplicaStatus {
	s := mysqlfamily.ParseStatus(row, mysqlfamily.StatusColumns{
		IO: "Slave_IO_Running", SQL: "Slave_SQL_Running", Host: "Master_Host", Port: "Master_Port",
		User: "Master_User", Behind: "Seconds_Behind_Master",
		ReadFile: "Master_Log_File", ReadPos: "Read_Master_Log_Pos", ExecFile: "Relay_Master_Log_File", ExecPos: "Exec_Master_Log_Pos",
		Received: "Gtid_IO_Pos",
	})
	return s
}

// StopIOThreadStatement implements mysqlfamily.Dialect.
func (Dialect) StopIOThreadStatement() string { return "STOP SLAVE IO_THREAD" }

// StateQuery implements mysqlfamily.Dialect: read_only is the fence;
// gtid_current_pos is a primary's position, gtid_slave_pos a replica's.
func (Dialect) StateQuery() string {
	return "SELECT @@global.read_only AS fenced, @@global.read_only = 0 AS writable, @@server_id AS server_id, " +
		"@@global.gtid_current_pos AS gtid, @@global.gtid_slave_pos AS replica_gtid"
}

// SyncQuery implements mysqlfamily.Dialect.
func (Dialect) SyncQuery() string {
	return fmt.Sprintf("SELECT @@global.rpl_semi_sync_master_enabled AS enabled, @@global.rpl_semi_sync_master_enabled = 1 AND @@global.rpl_semi_sync_master_wait_point = 'AFTER_SYNC' "+
		"AND @@global.rpl_semi_sync_master_wait_no_slave = 1 AND @@global.rpl_semi_sync_master_timeout = %d AS sync, "+
		"(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_CLIENTS') AS sync_replicas",
		mysqlfamily.SemiSyncTimeoutMillis)
}

// SyncStatements implements mysqlfamily.Dialect: semi-synchronous
// replication is built into MariaDB (10.3+); the replicas run with
// rpl_semi_sync_slave_enabled (see Driver.Command). AFTER_SYNC waits
// before the commit is visible to other sessions, so no client sees a
// write a failover could lose.
func (Dialect) SyncStatements(on bool) []string {
	if !on {
		return []string{"SET GLOBAL rpl_semi_sync_master_enabled = OFF"}
	}
	return []string{
		"SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC",
		"SET GLOBAL rpl_semi_sync_master_wait_no_slave = ON",
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_timeout = %d", mysqlfamily.SemiSyncTimeoutMillis),
		"SET GLOBAL rpl_semi_sync_master_enabled = ON",
	}
}

// MustReclone implements mysqlfamily.Dialect: 1236 is the source's fatal
// error reading its binlog (purged, or the GTID position is unknown to it).
func (Dialect) MustReclone(ioErrno int) bool { return ioErrno == mysqlfamily.ErrSourceCannotServe }

// CreateUserStatement implements mysqlfamily.Dialect: the password goes
// in as its hash.
func (Dialect) CreateUserStatement(account, password string) string {
	return fmt.Sprintf("CREATE USER %s IDENTIFIED BY PASSWORD %s", account, mysqlfamily.QuoteString(mysqlfamily.NativePasswordHash(password)))
}

// AlterPasswordStatement implements mysqlfamily.Dialect.
func (Dialect) AlterPasswordStatement(account, password string) string {
	return fmt.Sprintf("ALTER USER %s IDENTIFIED BY PASSWORD %s", account, mysqlfamily.QuoteString(mysqlfamily.NativePasswordHash(password)))
}

// PasswordIs implements mysqlfamily.Dialect: the native hash has no salt.
func (Dialect) PasswordIs(stored, password string) bool {
	return stored == mysqlfamily.NativePasswordHash(password)
}

// ReloadTLSStatement implements mysqlfamily.Dialect (MariaDB 10.4 and
// later). NO_WRITE_TO_BINLOG: a FLUSH is binlogged by default, and on a
// replica that is a transaction of its own (an errant GTID) which stops
// its replication under gtid_strict_mode at the primary's next
// transaction, as the engine suite's renewal found.
func (Dialect) ReloadTLSStatement() string { return "FLUSH NO_WRITE_TO_BINLOG SSL" }
