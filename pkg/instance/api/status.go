package api

import "time"

// Role is what an instance is in its database's topology.
type Role string

const (
	// RoleWaiting is an instance that has not been told a topology yet.
	RoleWaiting Role = "waiting"
	RolePrimary Role = "primary"
	RoleReplica Role = "replica"
)

// Status is the JSON body of GET /v1/status: what the instance is, whether
// it serves its role, and how far its data goes.
type Status struct {
	Name string `json:"name"`
	// PodUID is the UID of the pod the manager runs in (when it knows it).
	PodUID string `json:"podUID,omitempty"`
	Engine string `json:"engine"`
	// Role is the role the instance is acting on.
	Role Role `json:"role"`
	// Primary is the primary the topology names (this instance or another).
	Primary string `json:"primary,omitempty"`
	// Ready is what GET /readyz answers; Reason says why not (or what).
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	// EngineRunning tells whether the engine's process is up; EnginePID is its pid.
	EngineRunning bool `json:"engineRunning"`
	EnginePID     int  `json:"enginePID,omitempty"`
	// Restarts counts the engine's exits the manager did not ask for.
	Restarts     int        `json:"restarts"`
	LastExit     string     `json:"lastExit,omitempty"`
	LastExitTime *time.Time `json:"lastExitTime,omitempty"`
	// SystemIdentifier names the data set's lineage: a primary and its clones
	// share it (Postgres' system identifier; for MariaDB one the manager
	// generates at bootstrap).
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// ServerID is the MySQL-family server_id.
	ServerID uint32 `json:"serverID,omitempty"`
	// Position is how far the instance's data goes.
	Position *Position `json:"position,omitempty"`
	// Streaming tells whether a replica receives changes from its primary.
	Streaming bool `json:"streaming"`
	// Upstream is the host:port a replica follows.
	Upstream string `json:"upstream,omitempty"`
	// LagBytes (Postgres) and LagSeconds tell how far a replica is behind.
	LagBytes   *int64   `json:"lagBytes,omitempty"`
	LagSeconds *float64 `json:"lagSeconds,omitempty"`
	// Fenced tells that the instance, named primary, refuses writes because
	// another instance is to be the primary (or it cannot confirm it still
	// is); FencedPosition is where its last write ends, once it is fenced.
	Fenced         bool      `json:"fenced,omitempty"`
	FencedReason   string    `json:"fencedReason,omitempty"`
	FencedPosition *Position `json:"fencedPosition,omitempty"`
	// Synchronous tells that the primary acknowledges a commit only once a
	// replica has it (spec.replication.mode Sync, as the engine applies
	// it); SyncReplicas is how many connected replicas acknowledge commits
	// now (0: commits wait).
	Synchronous  bool `json:"synchronous,omitempty"`
	SyncReplicas int  `json:"syncReplicas,omitempty"`
	// AwaitingRestore tells that the instance, started with --restore and
	// holding no data, waits for POST /v1/restore; Restore is the last
	// restore asked of it, Backup the backup running or last run.
	AwaitingRestore bool       `json:"awaitingRestore,omitempty"`
	Restore         *Operation `json:"restore,omitempty"`
	Backup          *Operation `json:"backup,omitempty"`
	// Archive is the WAL archive's progress, on an instance started with
	// --wal-archive.
	Archive *ArchiveStatus `json:"archive,omitempty"`
	// Parameters is the hash (parameters.Hash) of the live parameters the
	// running engine took; ParametersError says why the last ones asked
	// for were not taken.
	Parameters      string `json:"parameters,omitempty"`
	ParametersError string `json:"parametersError,omitempty"`
	// Certificates are the instance's: a rotation of the database's CA
	// goes on when every instance took its step.
	Certificates *Certificates `json:"certificates,omitempty"`
	// Objects is the last reconciliation of the spec's databases and
	// roles (POST /v1/objects), on a primary that was given them.
	Objects *ObjectsReport `json:"objects,omitempty"`
}

// Certificates is what an instance trusts and holds.
type Certificates struct {
	// Roots are the fingerprints (pki.Fingerprint) of the database's roots
	// it trusts; Issuer that of the issuer its certificate is of.
	Roots  []string `json:"roots,omitempty"`
	Issuer string   `json:"issuer,omitempty"`
	// NotAfter is when its certificate ends.
	NotAfter time.Time `json:"notAfter"`
}
