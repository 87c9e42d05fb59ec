package api

import "time"

// PathArchive is where the controller tells a manager where its database's
// write-ahead log archive is (PUT) and reads how far it goes (GET).
const PathArchive = "/v1/archive"

// ArchiveRequest is the body of PUT /v1/archive: the bucket and prefix the
// instance's engine archives its WAL to while it is the primary. Key is
// the prefix; each segment is an object below it.
type ArchiveRequest struct {
	Destination S3Object `json:"destination"`
}

// ArchiveStatus is how far an instance's WAL archive goes, as its manager
// measured it: nothing here is estimated.
type ArchiveStatus struct {
	// Configured tells that the manager knows where to archive (PUT
	// /v1/archive); until then the engine keeps its WAL and retries.
	Configured bool `json:"configured"`
	// Prefix is the archive's endpoint, bucket and key prefix,
	// https://host/bucket/prefix.
	Prefix string `json:"prefix,omitempty"`
	// Credentials is a digest of the access key and CA bundle the manager
	// uploads with (instance.ArchiveCredentials), never the key itself:
	// the controller sends the archive again when the user's Secret holds
	// others (a rotated key).
	Credentials string `json:"credentials,omitempty"`
	// Archived counts the files this manager uploaded (or found already
	// there, identical); Failed the attempts that failed.
	Archived int64 `json:"archived"`
	Failed   int64 `json:"failed"`
	// LastArchived is the last file archived and LastArchivedTime when its
	// upload began: the engine had closed it by then.
	LastArchived     string     `json:"lastArchived,omitempty"`
	LastArchivedTime *time.Time `json:"lastArchivedTime,omitempty"`
	// LastFailure says why the last failed attempt failed, at
	// LastFailureTime.
	LastFailure     string     `json:"lastFailure,omitempty"`
	LastFailureTime *time.Time `json:"lastFailureTime,omitempty"`
	// LastRecoverableTime is the commit time of the latest transaction
	// known to be in the archive (a heartbeat the manager commits each
	// archive timeout counts): a restore may target any time before it.
	LastRecoverableTime *time.Time `json:"lastRecoverableTime,omitempty"`
	// Pending is how many closed files wait to be archived (the engine's
	// archive_status/*.ready): the archive's lag, in files.
	Pending int `json:"pending"`
}

// RecoveryTarget is where a restore stops replaying the archive. Exactly
// one of Time, LSN and Latest is set.
type RecoveryTarget struct {
	// Time: every transaction committed at or before it is restored, none
	// committed after it.
	Time *time.Time `json:"time,omitempty"`
	// LSN (PostgreSQL): every record up to and including it is replayed.
	LSN string `json:"lsn,omitempty"`
	// Latest replays everything the archive holds.
	Latest bool `json:"latest,omitempty"`
	// GTID (MariaDB, MySQL): every transaction up to and including the one
	// with this GTID is replayed.
	GTID string `json:"gtid,omitempty"`
}
