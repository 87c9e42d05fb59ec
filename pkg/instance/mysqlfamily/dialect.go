package mysqlfamily

import (
	"strconv"
)

// Source is the primary a replica replicates from.
type Source struct {
	Host     string
	Port     int
	User     string
	Password string
	// CAFile, when set, is the database's CA: the replica connects over
	// TLS and verifies the source's certificate names Host.
	CAFile string
	// ClientCertFile and ClientKeyFile, when set, are the certificate the
	// replica presents: the instance's own, which MariaDB's admin interface
	// (the manager's relay) requires.
	ClientCertFile, ClientKeyFile string
}

// App is the application's user and database.
type App struct {
	User, Password, Database string
}

// Dialect is the SQL that differs between MariaDB and MySQL.
type Dialect interface {
	// UserStatements create the application's database and user (owning
	// that database only) and the replication user.
	UserStatements(app App, replicationPassword string) []string
	// FollowStatements point the server at src and start replicating with
	// GTID auto-positioning.
	FollowStatements(src Source) []string
	// FenceStatements make the server refuse writes from clients.
	FenceStatements() []string
	// BinlogPositionQuery reads, as column gtid, the position of the
	// binlog, which holds every commit of a fenced primary.
	BinlogPositionQuery() string
	// PromoteStatements stop replication, forget the source and take writes.
	PromoteStatements() []string
	// ReplicaStatusQuery shows the replication threads' state.
	ReplicaStatusQuery() string
	// ParseReplicaStatus reads ReplicaStatusQuery's row.
	ParseReplicaStatus(row map[string]string) ReplicaStatus
	// StopIOThreadStatement stops receiving, leaving the applier running.
	StopIOThreadStatement() string
	// StateQuery reads the server's state in the columns fenced (what
	// FenceStatements turn on: 1 or 0), writable (1 or 0), server_id, gtid
	// (the primary's position) and replica_gtid (a replica's).
	StateQuery() string
	// SyncQuery reads, as column sync (1 or 0), whether the source's
	// commits wait for a replica as SyncStatements(true) set it up, as
	// column enabled (1 or 0) whether semi-synchronous replication is on at
	// all, and, as column sync_replicas, how many replicas acknowledge
	// commits now.
	SyncQuery() string
	// SyncStatements turn semi-synchronous replication on the source on
	// (wait after the binlog sync for one replica, so long that it never
	// falls back to asynchronous) or off.
	SyncStatements(on bool) []string
	// CreateUserStatement creates account (QuoteString'd user@host) logging
	// in with password, in the way the engine's logs never show it.
	CreateUserStatement(account, password string) string
	// AlterPasswordStatement gives account password, as
	// CreateUserStatement does.
	AlterPasswordStatement(account, password string) string
	// PasswordIs tells whether an account's stored authentication_string
	// is password's (false when the engine's hash cannot be checked here).
	PasswordIs(stored, password string) bool
	// ReloadTLSStatement has the server read its certificate files again.
	ReloadTLSStatement() string
	// MustReclone tells whether the stopped IO thread's error number means
	// the source no longer has the history the replica needs.
	MustReclone(ioErrno int) bool
}

// SemiSyncTimeoutMillis is how long a semi-synchronous source waits for a
// replica's acknowledgement before it falls back to asynchronous
// replication: 4294967295 ms (49.7 days, MySQL's largest), so a commit with
// no replica waits, it does not silently commit unreplicated.
const SemiSyncTimeoutMillis = 4294967295

// ReplicaStatus is a replica's replication state.
type ReplicaStatus struct {
	Configured bool
	Host       string
	Port       int
	User       string
	IORunning  string // Yes, No, Connecting
	SQLRunning string // Yes, No
	// SecondsBehind is nil while the SQL thread is not running.
	SecondsBehind *float64
	LastError     string
	// IOErrno is the IO thread's last error number (1236: the source
	// cannot send what the replica asks for).
	IOErrno int
	// Caught up: the SQL thread applied everything the IO thread received.
	AppliedAll bool
	// Received is the GTID position of what the IO thread wrote to the
	// relay log (MariaDB Gtid_IO_Pos, MySQL Retrieved_Gtid_Set), which can
	// be ahead of what the SQL thread applied: a semi-synchronous replica
	// acknowledges a commit once it has it there.
	Received string
}

// ErrSourceCannotServe is ER_MASTER_FATAL_ERROR_READING_BINLOG as the
// replica's IO thread reports it: the source purged the binary logs the
// replica needs, or does not have its GTID position.
const ErrSourceCannotServe = 1236

// Streaming tells whether both threads run.
func (s ReplicaStatus) Streaming() bool { return s.IORunning == "Yes" && s.SQLRunning == "Yes" }

// StatusColumns name a dialect's replica status columns.
type StatusColumns struct {
	IO, SQL, Host, Port, User, Behind    string
	ReadFile, ReadPos, ExecFile, ExecPos string
	// Received is the column of the GTIDs the IO thread received.
	Received string
}

// ParseStatus reads the columns both dialects have under their own names.
func ParseStatus(row map[string]string, c StatusColumns) ReplicaStatus {
	if row == nil {
		return ReplicaStatus{}
	}
	s := ReplicaStatus{
		Configured: row[c.Host] != "",
		Host:       row[c.Host],
		User:       row[c.User],
		IORunning:  row[c.IO],
		SQLRunning: row[c.SQL],
		AppliedAll: row[c.ReadFile] == row[c.ExecFile] && row[c.ReadPos] == row[c.ExecPos],
		Received:   row[c.Received],
	}
	s.Port, _ = strconv.Atoi(row[c.Port])
	s.IOErrno, _ = strconv.Atoi(row["Last_IO_Errno"])
	if v, err := strconv.ParseFloat(row[c.Behind], 64); err == nil {
		s.SecondsBehind = &v
	}
	for _, k := range []string{"Last_IO_Error", "Last_SQL_Error"} {
		if row[k] != "" {
			s.LastError = row[k]
		}
	}
	return s
}
