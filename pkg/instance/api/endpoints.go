package api

// Port is where every instance manager serves the endpoints.
const Port = 8000

// MetricsPort is where every instance manager serves PathMetrics, over TLS
// to anyone (Prometheus' text format): postgres_exporter's port, which
// scrape configurations know.
const MetricsPort = 9187

// PathMetrics is the metrics server's one endpoint.
const PathMetrics = "/metrics"

// The endpoints' paths (the package doc tells what each takes and answers).
const (
	PathHealthz = "/healthz"
	PathReadyz  = "/readyz"
	PathStatus  = "/v1/status"
	PathClone   = "/v1/clone"
	PathBackups = "/v1/backups"
	// PathBackup is one backup as a ServeMux pattern; its wildcard "id" is
	// the BackupRequest's ID.
	PathBackup  = PathBackups + "/{id}"
	PathRestore = "/v1/restore"
	// PathCredentials is in credentials.go.
)

// ReplicationUser is the engine user replicas connect as. Its password is
// for replication only: no manager endpoint takes it.
const ReplicationUser = "replicator"
