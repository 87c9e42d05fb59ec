package mysql

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/instance/mysqlfamily"
)

// Dialect is MySQL 8.4's SQL: the replica/source terms (8.4 removed the
// MASTER/SLAVE statements; REPLICATION SLAVE stays the privilege's name).
type Dialect struct{}

var _ mysqlfamily.Dialect = Dialect{}

// UserStatements implements mysqlfamily.Dialect. 8.4 disables
// mysql_native_password, so there is no hash to send: the password goes
// over the unix socket in the statement, which MySQL rewrites before it
// reaches any log. The replication user also serves CLONE (BACKUP_ADMIN
// on the donor), and may connect to the admin interface
// (SERVICE_CONNECTION_ADMIN).
func (Dialect) UserStatements(app mysqlfamily.App, replicationPassword string) []string {
	appAccount := mysqlfamily.Account(app.User, "%")
	repl := mysqlfamily.Account(api.ReplicationUser, "%")
	return []string{
		fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8mb4", mysqlfamily.QuoteIdent(app.Database)),
		fmt.Sprintf("CREATE USER %s IDENTIFIED WITH caching_sha2_password BY %s", appAccount, mysqlfamily.QuoteString(app.Password)),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON %s.* TO %s", mysqlfamily.QuoteIdent(app.Database), appAccount),
		fmt.Sprintf("CREATE USER %s IDENTIFIED WITH caching_sha2_password BY %s", repl, mysqlfamily.QuoteString(replicationPassword)),
		fmt.Sprintf("GRANT REPLICATION SLAVE, BACKUP_ADMIN ON *.* TO %s", repl),
		adminInterfaceGrant,
	}
}

// adminInterfaceGrant lets replicas and clones connect to the primary's
// admin interface (ServerArgs). A primary whose data lacks it (made before
// mydb used the interface) gives it as it promotes (Driver.Promote).
var adminInterfaceGrant = fmt.Sprintf("GRANT SERVICE_CONNECTION_ADMIN ON *.* TO %s", mysqlfamily.Account(api.ReplicationUser, "%"))

// AdminUserStatements replace the passwordless root that
// --initialize-insecure leaves by auth_socket: root@localhost then
// connects only over the unix socket and only from the OS user osUser
// (the authentication string names it), with no password at all.
func AdminUserStatements(osUser string) []string {
	return []string{
		fmt.Sprintf("ALTER USER 'root'@'localhost' IDENTIFIED WITH auth_socket AS %s", mysqlfamily.QuoteString(osUser)),
	}
}

// FollowStatements implements mysqlfamily.Dialect. Over TLS the replica
// verifies the source's certificate names the host; GET_SOURCE_PUBLIC_KEY
// lets caching_sha2_password authenticate over a connection without TLS
// (the RSA key exchange).
func (Dialect) FollowStatements(src mysqlfamily.Source) []string {
	ssl := ", GET_SOURCE_PUBLIC_KEY = 1"
	if src.CAFile != "" {
		ssl = fmt.Sprintf(", SOURCE_SSL = 1, SOURCE_SSL_CA = %s, SOURCE_SSL_VERIFY_SERVER_CERT = 1", mysqlfamily.QuoteString(src.CAFile))
	}
	return []string{
		"STOP REPLICA",
		fmt.Sprintf("CHANGE REPLICATION SOURCE TO SOURCE_HOST = %s, SOURCE_PORT = %d, SOURCE_USER = %s, SOURCE_PASSWORD = %s, SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 1%s",
			mysqlfamily.QuoteString(src.Host), src.Port, mysqlfamily.QuoteString(src.User), mysqlfamily.QuoteString(src.Password), ssl),
		"START REPLICA",
	}
}

// FenceStatements implements mysqlfamily.Dialect: super_read_only (which
// sets read_only) stops even SUPER users.
func (Dialect) FenceStatements() []string { return []string{"SET GLOBAL super_read_only = ON"} }

// BinlogPositionQuery implements mysqlfamily.Dialect: gtid_executed holds
// every transaction the binlog has.
func (Dialect) BinlogPositionQuery() string { return "SELECT @@global.gtid_executed AS gtid" }

// PromoteStatements implements mysqlfamily.Dialect. super_read_only goes
// first: read_only cannot turn off while it is on.
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
		Received: "Retrieved_Gtid_Set",
	})
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

// CloneStatements copy the donor's data into dir (which must not exist)
// through the CLONE plugin, on a recipient server running a throwaway data
// directory: the recipient's own data stays and the server does not
// restart, as it would after a clone into its own data directory. With
// the database's CA (donor.CAFile) the clone requires TLS and verifies the
// donor's certificate against it; without, TLS is tried first and plain
// used when the donor has none (no REQUIRE clause).
func CloneStatements(donor mysqlfamily.Source, dir string) []string {
	var statements []string
	require := ""
	if donor.CAFile != "" {
		statements = append(statements, fmt.Sprintf("SET GLOBAL clone_ssl_ca = %s", mysqlfamily.QuoteString(donor.CAFile)))
		require = " REQUIRE SSL"
	}
	return append(statements,
		fmt.Sprintf("SET GLOBAL clone_valid_donor_list = %s", mysqlfamily.QuoteString(fmt.Sprintf("%s:%d", donor.Host, donor.Port))),
		fmt.Sprintf("CLONE INSTANCE FROM %s:%d IDENTIFIED BY %s DATA DIRECTORY = %s%s",
			mysqlfamily.Account(donor.User, donor.Host), donor.Port, mysqlfamily.QuoteString(donor.Password), mysqlfamily.QuoteString(dir), require),
	)
}

// InitializeArgs create a data directory (one level below the volume:
// --initialize refuses a directory that is not empty, such as a volume's
// root with lost+found) whose root@localhost has no password and connects
// only over the socket until AdminUserStatements. No --user: the manager
// never runs as root, and mysqld warns that --user needs root.
func InitializeArgs(dataDir string) []string {
	return []string{"--no-defaults", "--initialize-insecure", "--datadir=" + dataDir, "--log-error-verbosity=2"}
}

// baseArgs are the options of every server run on dataDir, the manager's
// and the temporary ones. --no-defaults keeps an image's my.cnf out; with
// no --log-error the error log goes to stderr, the pod's log. auth_socket
// and clone are plugins to load (neither is built in).
func baseArgs(cfg instance.DriverConfig, dataDir string) []string {
	return []string{
		"--no-defaults",
		"--datadir=" + dataDir,
		"--socket=" + socketPath(cfg),
		"--pid-file=" + filepath.Join(cfg.RunDir, "mysqld.pid"),
		"--tmpdir=" + cfg.RunDir,
		"--plugin-load-add=auth_socket.so",
		"--plugin-load-add=mysql_clone.so",
		"--mysqlx=OFF",
		"--skip-name-resolve",
		"--log-error-verbosity=2",
		"--skip-replica-start",
	}
}

func socketPath(cfg instance.DriverConfig) string { return filepath.Join(cfg.RunDir, "mysqld.sock") }

// tempArgs are a temporary server's: no TCP listener, no binary log.
func tempArgs(cfg instance.DriverConfig, dataDir string) []string {
	return append(baseArgs(cfg, dataDir), "--skip-networking", "--skip-log-bin")
}

// ServerArgs are mysqld's options for an instance: GTIDs on, replication
// off until the manager configures it, writes off (super_read_only) until
// it promotes. The binary log is on by default in 8.4 and ROW is the
// default (and deprecated) binlog_format, so neither is passed beyond
// naming the logs after mydb rather than the host name.
func ServerArgs(cfg instance.DriverConfig, dataDir string) []string {
	args := append(baseArgs(cfg, dataDir),
		// A list since MySQL 8.0.13.
		"--bind-address="+strings.Join(cfg.ListenAddresses(), ","),
		fmt.Sprintf("--port=%d", cfg.Port),
		fmt.Sprintf("--server-id=%d", cfg.ServerID),
		"--report-host="+cfg.ListenHost,
		"--log-bin=mydb-bin",
		"--relay-log=mydb-relay-bin",
		"--gtid-mode=ON",
		"--enforce-gtid-consistency=ON",
		"--binlog-expire-logs-seconds=604800",
		"--replica-net-timeout=10",
		"--super-read-only=ON",
		// Semi-synchronous replication: every server acknowledges as a
		// replica; only a primary in Sync mode waits (SyncStatements).
		"--plugin-load-add=semisync_source.so",
		"--plugin-load-add=semisync_replica.so",
		"--loose-rpl-semi-sync-replica-enabled=ON",
	)
	if cfg.TLSEnabled() {
		// The instance's certificate, renewed by the manager, which then
		// has the server read it again (ReloadTLS).
		// ssl_ca holds the issuer too: MySQL checks its own certificate
		// against it (CertFile's first certificate alone) and refuses
		// ALTER INSTANCE RELOAD TLS when the check fails (MY-015011).
		args = append(args, "--ssl-cert="+cfg.TLS.CertFile, "--ssl-key="+cfg.TLS.KeyFile, "--ssl-ca="+cfg.TLS.ChainCAFile)
	}
	return append(append(args, adminInterfaceArgs(cfg)...), mysqlfamily.StartArgs(cfg)...)
}

// adminInterfaceArgs open MySQL's admin interface on the instance's address
// (one address: admin_address takes no list), for connections with
// SERVICE_CONNECTION_ADMIN: replicas and clones connect there while the
// engine's port serves clients a certificate of the user's own. It serves
// the instance's own certificate, which replicas verify by the address.
func adminInterfaceArgs(cfg instance.DriverConfig) []string {
	if cfg.AdminPort <= 0 {
		return nil
	}
	args := []string{"--admin-address=" + cfg.ListenHost, fmt.Sprintf("--admin-port=%d", cfg.AdminPort)}
	if cfg.TLSEnabled() {
		args = append(args, "--admin-ssl-cert="+cfg.TLS.InstanceCertFile, "--admin-ssl-key="+cfg.TLS.InstanceKeyFile,
			"--admin-ssl-ca="+cfg.TLS.InstanceChainCAFile)
	}
	return args
}

// SyncQuery implements mysqlfamily.Dialect.
func (Dialect) SyncQuery() string {
	return fmt.Sprintf("SELECT @@global.rpl_semi_sync_source_enabled AS enabled, @@global.rpl_semi_sync_source_enabled = 1 AND @@global.rpl_semi_sync_source_wait_point = 'AFTER_SYNC' "+
		"AND @@global.rpl_semi_sync_source_wait_no_replica = 1 AND @@global.rpl_semi_sync_source_wait_for_replica_count = 1 "+
		"AND @@global.rpl_semi_sync_source_timeout = %d AS sync, "+
		"(SELECT VARIABLE_VALUE FROM performance_schema.global_status WHERE VARIABLE_NAME = 'Rpl_semi_sync_source_clients') AS sync_replicas",
		mysqlfamily.SemiSyncTimeoutMillis)
}

// SyncStatements implements mysqlfamily.Dialect: the variables of the
// rpl_semi_sync_source plugin, which ServerArgs loads (with the replica's).
func (Dialect) SyncStatements(on bool) []string {
	if !on {
		return []string{"SET GLOBAL rpl_semi_sync_source_enabled = OFF"}
	}
	return []string{
		"SET GLOBAL rpl_semi_sync_source_wait_point = AFTER_SYNC",
		"SET GLOBAL rpl_semi_sync_source_wait_no_replica = ON",
		"SET GLOBAL rpl_semi_sync_source_wait_for_replica_count = 1",
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_source_timeout = %d", mysqlfamily.SemiSyncTimeoutMillis),
		"SET GLOBAL rpl_semi_sync_source_enabled = ON",
	}
}

// CreateUserStatement implements mysqlfamily.Dialect: MySQL rewrites the
// password out of the statement before any log sees it.
func (Dialect) CreateUserStatement(account, password string) string {
	return fmt.Sprintf("CREATE USER %s IDENTIFIED WITH caching_sha2_password BY %s", account, mysqlfamily.QuoteString(password))
}

// AlterPasswordStatement implements mysqlfamily.Dialect.
func (Dialect) AlterPasswordStatement(account, password string) string {
	return fmt.Sprintf("ALTER USER %s IDENTIFIED WITH caching_sha2_password BY %s", account, mysqlfamily.QuoteString(password))
}

// PasswordIs implements mysqlfamily.Dialect: caching_sha2_password's
// stored hash is salted and iterated in a way mydb does not compute, so
// the password is set again each time (sessions stay; the server's cache
// of the account's authentication is cleared).
func (Dialect) PasswordIs(stored, password string) bool { return false }

// ReloadTLSStatement implements mysqlfamily.Dialect.
func (Dialect) ReloadTLSStatement() string { return "ALTER INSTANCE RELOAD TLS" }
