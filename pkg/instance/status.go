package instance

import "time"

// Role is what an instance is in its database's topology.
type Role string

const (
	// RoleWaiting is an instance that has not been told a topology yet.
	RoleWaiting Role = "waiting"
	RolePrimary Role = "primary"
	RoleReplica Role = "replica"
)

// Status is the JSON body of GET /v1/status. It has no Kubernetes types so
// the controller can import it as is.
type Status struct {
	Name   string `json:"name"`
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
}

// Position is a point in the data's history.
type Position struct {
	// Timeline and LSN are Postgres': the current WAL LSN on a primary, the
	// replay LSN on a replica.
	Timeline uint32 `json:"timeline,omitempty"`
	LSN      string `json:"lsn,omitempty"`
	// GTID is MySQL-family: gtid_current_pos on a primary, gtid_slave_pos on
	// a replica (MariaDB), gtid_executed (MySQL).
	GTID string `json:"gtid,omitempty"`
}

// Probe is what an engine reports about its running server.
type Probe struct {
	// Writable tells whether the server accepts writes (not in recovery,
	// not read-only).
	Writable         bool
	SystemIdentifier string
	ServerID         uint32
	Position         Position
	Streaming        bool
	Upstream         string
	LagBytes         *int64
	LagSeconds       *float64
}
