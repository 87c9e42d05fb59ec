package api

import "time"

// BackupRequest asks the instance to back its data up to Destination.
type BackupRequest struct {
	// ID names the operation (the MyDatabaseBackup's UID).
	ID          string      `json:"id"`
	Destination Destination `json:"destination"`
}

// RestoreRequest asks an instance that has no data and was started with
// --restore to load a backup into a fresh data directory.
type RestoreRequest struct {
	// ID names the operation (the restored MyDatabase's UID and the backup's).
	ID     string      `json:"id"`
	Source Destination `json:"source"`
	// SHA256 and Size are what the backup recorded; a load whose stream
	// does not match them fails and leaves no data.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Format is the backup's Operation.Format; when set, an instance of
	// another engine refuses the restore (422) before loading anything.
	Format string `json:"format,omitempty"`
	// Archive is the source database's WAL archive (S3Object.Key is its
	// prefix) and Target where its replay stops; both or neither are set.
	// The restored database never writes into Archive.
	Archive *S3Object       `json:"archive,omitempty"`
	Target  *RecoveryTarget `json:"target,omitempty"`
}

// Destination is where a backup is written or read: one object in an
// S3-compatible bucket, or the dump server of the backup's own claim.
// Exactly one is set.
type Destination struct {
	S3     *S3Object     `json:"s3,omitempty"`
	Volume *VolumeObject `json:"volume,omitempty"`
}

// VolumeObject is the dump server (mydb-instance dump-server) of the
// short-lived pod that mounts one backup's claim. The instance and the
// server authenticate each other with certificates of the database's
// issuer, over mutual TLS.
type VolumeObject struct {
	// Address is the server's host:port, the pod's IP and Port.
	Address string `json:"address"`
	// Server is the dump pod's name, which the server's certificate must
	// carry.
	Server string `json:"server"`
	// Claim is the claim's name, for messages.
	Claim string `json:"claim"`
}

// S3Object is one object of a bucket, with the credentials to reach it.
type S3Object struct {
	Endpoint        string `json:"endpoint"`
	Region          string `json:"region,omitempty"`
	Bucket          string `json:"bucket"`
	Key             string `json:"key"`
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	// CABundle is PEM certificates to trust for an https endpoint.
	CABundle []byte `json:"caBundle,omitempty"`
}

// OperationPhase is where a backup or restore is.
type OperationPhase string

const (
	OperationRunning   OperationPhase = "Running"
	OperationSucceeded OperationPhase = "Succeeded"
	OperationFailed    OperationPhase = "Failed"
)

// Operation is a backup's or a restore's progress and outcome.
type Operation struct {
	ID      string         `json:"id"`
	Phase   OperationPhase `json:"phase"`
	Message string         `json:"message,omitempty"`
	// Instance is the manager's instance name; Role the role it had when
	// the operation started.
	Instance   string     `json:"instance"`
	Role       Role       `json:"role,omitempty"`
	StartTime  time.Time  `json:"startTime"`
	FinishTime *time.Time `json:"finishTime,omitempty"`
	// Bytes is how much was streamed so far; Size and SHA256 are the whole
	// stream's, set on success.
	Bytes  int64  `json:"bytes"`
	Size   int64  `json:"size,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Format names the backup's format ("pg_basebackup-tar",
	// "mariadb-backup-xbstream", ...); a restore refuses another engine's.
	Format string `json:"format,omitempty"`
	// Position is how far the backed-up data goes.
	Position *Position `json:"position,omitempty"`
}
