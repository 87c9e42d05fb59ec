package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Engine is a database engine.
// +enum
type Engine string

// The engines mydb runs.
const (
	// EngineMySQL runs MySQL.
	EngineMySQL Engine = "mysql"
	// EngineMariaDB runs MariaDB.
	EngineMariaDB Engine = "mariadb"
	// EnginePostgres runs PostgreSQL.
	EnginePostgres Engine = "postgres"
)

// InstanceRole is what one instance (pod) of a database does.
// +enum
type InstanceRole string

// The roles of an instance.
const (
	// InstanceRolePrimary serves writes; the <name>-rw Service routes to it.
	InstanceRolePrimary InstanceRole = "Primary"
	// InstanceRoleReplica streams from the primary and serves reads; the
	// <name>-ro Service routes to the ready ones.
	InstanceRoleReplica InstanceRole = "Replica"
)

// DeletionPolicy says what happens to a database's volumes when it is deleted.
// +enum
type DeletionPolicy string

// The deletion policies.
const (
	// DeletionPolicyRetain keeps the PersistentVolumeClaims (and so the data)
	// and the credentials Secret after the MyDatabase is deleted.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete deletes the PersistentVolumeClaims and the
	// credentials Secret with the MyDatabase.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// DeleteDataFinalizer holds a MyDatabase whose spec.deletionPolicy is
// Delete until the controller has deleted its claims and credentials,
// which carry no owner reference: the garbage collector would delete them
// whenever their owner merely reads as absent (an emptied etcd, say).
const DeleteDataFinalizer = "example.com/delete-data"

// Condition types of a MyDatabase.
const (
	// ConditionReady is True when every replica is ready and the spec is rolled out.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a change is being rolled out.
	ConditionProgressing = "Progressing"
	// ConditionDegraded is True when the database cannot reach its spec.
	ConditionDegraded = "Degraded"
	// ConditionReplicating is True when every replica streams from the
	// current primary within the lag bound.
	ConditionReplicating = "Replicating"
	// ConditionPrimaryChange is True while a switchover is under way; False
	// says how the last switchover or failover ended (reason, old and new
	// primary, duration in the message).
	ConditionPrimaryChange = "PrimaryChange"
	// ConditionRestored is set on a database with spec.restoreFrom: False
	// while its primary loads the backup (reason Restoring, or
	// WaitingForBackup) or when the load failed (RestoreFailed; the
	// database never goes Ready), True once the data is loaded.
	ConditionRestored = "Restored"
	// ConditionContinuousArchiving is set on a database with
	// spec.backup.pointInTimeRecovery: True while its primary's WAL reaches
	// the archive, False with the reason (ArchiveFailing,
	// ArchiveNotConfigured) when it does not, and the window stops
	// advancing.
	ConditionContinuousArchiving = "ContinuousArchiving"
	// ConditionHibernated is True once spec.hibernate stopped every
	// instance; False while they stop (Hibernating) or, after
	// spec.hibernate went back to false, until the primary serves again
	// (Waking); absent otherwise.
	ConditionHibernated = "Hibernated"
	// ConditionParametersApplied is set on a database with
	// spec.parameters: True once every instance runs them (those the
	// engine takes live applied without a restart, those it reads at start
	// rolled out primary last), False while they are applied or when an
	// engine refused one (reason ParameterRefused, naming it).
	ConditionParametersApplied = "ParametersApplied"

	// ConditionRolesAndDatabasesApplied is set on a database with
	// spec.roles or spec.databases: True once the primary's manager has
	// reconciled every one of them as the spec says, False with reason
	// Applying (what it waits for) or Failed (which the engine refused).
	ConditionRolesAndDatabasesApplied = "RolesAndDatabasesApplied"
)

// ReasonFailoverWouldLoseWrites is the PrimaryChange condition's reason
// (status True) while the controller holds a failover back: with Sync
// replication, a replica that cannot take over last reported a position
// beyond every one that can. POST .../switchover with allowWriteLoss
// forces it.
const ReasonFailoverWouldLoseWrites = "FailoverWouldLoseWrites"

// The /backup action's client method, Backup, is hand-written in the clientset's
// typed/example/v1/mydatabase_expansion.go: a genclient tag for it does not compile
// (see there). A block of its own, so that no generator copies it into docs.

// +genclient
// +genclient:method=GetScale,verb=get,subresource=scale,result=k8s.io/api/autoscaling/v1.Scale
// +genclient:method=UpdateScale,verb=update,subresource=scale,input=k8s.io/api/autoscaling/v1.Scale,result=k8s.io/api/autoscaling/v1.Scale
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabase is a database run by mydb: a StatefulSet with its Services,
// credentials and volumes, managed as one object.
type MyDatabase struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec is the desired state of the database.
	Spec MyDatabaseSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// Status is the observed state of the database, written by mydb's controller.
	// +optional
	Status MyDatabaseStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// MyDatabaseSpec is the desired state of a MyDatabase.
type MyDatabaseSpec struct {
	// Engine is the database engine: "postgres", "mariadb" or "mysql". It
	// may not change after the database is created.
	Engine Engine `json:"engine" protobuf:"bytes,1,opt,name=engine,casttype=Engine"`

	// Version is the engine's release line, such as "8.4" for mysql or "17"
	// for postgres. mydb pins each release line to one image. Defaults to the
	// newest release line mydb supports for the engine.
	// +optional
	Version string `json:"version,omitempty" protobuf:"bytes,2,opt,name=version"`

	// Replicas is the number of database pods, from 1 to 9. Defaults to 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,3,opt,name=replicas"`

	// StorageSize is the size of the volume each replica gets, such as "50Gi".
	// It may grow but may not shrink.
	StorageSize resource.Quantity `json:"storageSize" protobuf:"bytes,4,opt,name=storageSize"`

	// StorageClassName is the StorageClass of the replicas' volumes. The
	// cluster's default StorageClass is used when it is empty. It may not
	// change after the database is created.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty" protobuf:"bytes,5,opt,name=storageClassName"`

	// Resources are the compute resources of each database container.
	// Defaults to requests of 250m CPU and 512Mi memory and limits of 1 CPU
	// and 1Gi memory.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty" protobuf:"bytes,6,opt,name=resources"`

	// DeletionPolicy says what happens to the replicas' volumes and the
	// credentials Secret when the MyDatabase is deleted: "Retain" (the
	// default) keeps them, "Delete" deletes them (the server holds the
	// MyDatabase with the example.com/delete-data finalizer until they are
	// gone).
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty" protobuf:"bytes,7,opt,name=deletionPolicy,casttype=DeletionPolicy"`

	// Backup schedules backups of the database. No backups are taken on a
	// schedule when it is empty; POST .../backup takes one at any time.
	// +optional
	Backup *BackupPolicy `json:"backup,omitempty" protobuf:"bytes,8,opt,name=backup"`

	// RestoreFrom makes a new database start from a backup: its primary
	// loads the dump before it first reports ready (condition Restored). It
	// may only be set at create.
	// +optional
	RestoreFrom *RestoreSource `json:"restoreFrom,omitempty" protobuf:"bytes,9,opt,name=restoreFrom"`

	// FailoverDelay is how long the primary may be unready (its instance
	// manager not answering, or not serving writes) before mydb promotes the
	// most advanced replica in its place, from 5s to 10m. Defaults to 30s.
	// +optional
	FailoverDelay *metav1.Duration `json:"failoverDelay,omitempty" protobuf:"bytes,10,opt,name=failoverDelay"`

	// Replication says how the primary replicates to the other instances.
	// Defaults to mode Async. It may change on a running database.
	// +optional
	Replication *ReplicationSpec `json:"replication,omitempty" protobuf:"bytes,11,opt,name=replication"`

	// Hibernate, when true, stops every instance and keeps every volume and
	// the credentials (condition Hibernated); failover and scheduled
	// backups pause. Set back to false, every instance starts again with
	// its data, the primary it had serving writes again, and mydb moves no
	// role before it does.
	// +optional
	Hibernate bool `json:"hibernate,omitempty" protobuf:"varint,12,opt,name=hibernate"`

	// Parameters are engine parameters, by name (for example work_mem:
	// 64MB, or max_connections: "500"). Only the parameters mydb lists
	// for the engine may be set (docs/operations.md), with values of
	// their type and within their bounds; those mydb sets itself
	// (replication, archiving, listening, TLS, durability) may not. A
	// parameter the engine reads live is applied on every instance without
	// a restart; one it reads only at start is a rolling update, primary
	// last. The condition ParametersApplied says which, and when.
	// +optional
	Parameters map[string]string `json:"parameters,omitempty" protobuf:"bytes,13,rep,name=parameters"`

	// TLS is how the engines serve TLS to clients. Without it they serve a
	// certificate of the database's own CA (status.certificateAuthority).
	// +optional
	TLS *TLSSpec `json:"tls,omitempty" protobuf:"bytes,14,opt,name=tls"`

	// Databases are databases mydb keeps on the primary besides the
	// application's own, reconciled by its instance manager (status
	// databases says how each went). Taking one out of the list leaves it
	// as it is, with its data; only ensure: Absent drops it.
	// +optional
	// +listType=map
	// +listMapKey=name
	Databases []DatabaseSpec `json:"databases,omitempty" protobuf:"bytes,15,rep,name=databases"`

	// Roles are users mydb keeps on the primary, each logging in with the
	// password of a Secret of the database's namespace (the writer must
	// be allowed to get it), with the access to databases it lists and
	// none to the others mydb keeps. mydb reads each Secret at most every
	// 30 seconds: a new password is applied within that and a poll.
	// Taking one out of the list leaves it as it is; only ensure: Absent
	// drops it.
	// +optional
	// +listType=map
	// +listMapKey=name
	Roles []RoleSpec `json:"roles,omitempty" protobuf:"bytes,16,rep,name=roles"`
}

// Ensure says whether a database or role of the spec is to exist.
// +enum
type Ensure string

// The values of ensure.
const (
	// EnsurePresent makes the object, or keeps it as the spec says.
	EnsurePresent Ensure = "Present"
	// EnsureAbsent drops the object: a database with all its data, a role
	// with its sessions (what it owns goes to the database's owner).
	EnsureAbsent Ensure = "Absent"
)

// DatabaseSpec is a database mydb keeps on the primary.
type DatabaseSpec struct {
	// Name is the database's name: lowercase letters, digits and
	// underscores, starting with a letter or an underscore, at most 63
	// characters; not the application's database nor one of the engine's
	// or mydb's own.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// Owner is the role of spec.roles that owns the database (PostgreSQL's
	// owner; in MariaDB and MySQL, which have none, the role gets all
	// privileges on it). Defaults to the application user.
	// +optional
	Owner string `json:"owner,omitempty" protobuf:"bytes,2,opt,name=owner"`

	// CharacterSet is PostgreSQL's encoding (default UTF8) or the MySQL
	// family's character set (default utf8mb4). It is given when the
	// database is made and may not change.
	// +optional
	CharacterSet string `json:"characterSet,omitempty" protobuf:"bytes,3,opt,name=characterSet"`

	// Collation is PostgreSQL's locale (LC_COLLATE and LC_CTYPE, such as
	// "C" or "C.UTF-8"; default the instance's) or the MySQL family's
	// collation (default the character set's). It is given when the
	// database is made and may not change.
	// +optional
	Collation string `json:"collation,omitempty" protobuf:"bytes,4,opt,name=collation"`

	// Ensure is Present (the default) or Absent, which drops the database
	// and all its data.
	// +optional
	Ensure Ensure `json:"ensure,omitempty" protobuf:"bytes,5,opt,name=ensure,casttype=Ensure"`
}

// RoleSpec is a user mydb keeps on the primary.
type RoleSpec struct {
	// Name is the role's name: lowercase letters, digits and underscores,
	// starting with a letter or an underscore, at most 32 characters; not
	// a name of the engine's, mydb's, or the application user's.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// PasswordSecret is the key of a Secret of the database's namespace
	// that holds the role's password. Required unless ensure is Absent.
	// +optional
	PasswordSecret *SecretKeySelector `json:"passwordSecret,omitempty" protobuf:"bytes,2,opt,name=passwordSecret"`

	// Privileges are the role's access to databases: the application's
	// or one of spec.databases. It has none to the other databases of
	// spec.databases (those it owns aside).
	// +optional
	// +listType=map
	// +listMapKey=database
	Privileges []DatabasePrivilege `json:"privileges,omitempty" protobuf:"bytes,3,rep,name=privileges"`

	// ConnectionLimit is how many sessions the role may hold at once, from
	// 1 to 100000. Unlimited when unset.
	// +optional
	ConnectionLimit *int32 `json:"connectionLimit,omitempty" protobuf:"varint,4,opt,name=connectionLimit"`

	// Ensure is Present (the default) or Absent, which ends the role's
	// sessions and drops it.
	// +optional
	Ensure Ensure `json:"ensure,omitempty" protobuf:"bytes,5,opt,name=ensure,casttype=Ensure"`
}

// SecretKeySelector is a key of a Secret of the database's namespace.
type SecretKeySelector struct {
	// Name is the Secret's name.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// Key is the key of the Secret that holds the value. Defaults to
	// "password".
	// +optional
	Key string `json:"key,omitempty" protobuf:"bytes,2,opt,name=key"`
}

// DatabasePrivilege is a role's access to one database.
type DatabasePrivilege struct {
	// Database is the application's database or one of spec.databases.
	Database string `json:"database" protobuf:"bytes,1,opt,name=database"`

	// Access is ReadOnly (read every table), ReadWrite (read and change
	// rows, no schema changes) or All (everything, schema changes too).
	Access DatabaseAccess `json:"access" protobuf:"bytes,2,opt,name=access,casttype=DatabaseAccess"`
}

// DatabaseAccess is a level of access to a database.
// +enum
type DatabaseAccess string

// The levels of access.
const (
	DatabaseAccessReadOnly  DatabaseAccess = "ReadOnly"
	DatabaseAccessReadWrite DatabaseAccess = "ReadWrite"
	DatabaseAccessAll       DatabaseAccess = "All"
)

// TLSSpec is how a database's engines serve TLS to clients.
type TLSSpec struct {
	// ServerCertificateSecret names a Secret of the database's namespace
	// (type kubernetes.io/tls, as cert-manager writes them: tls.crt, tls.key
	// and ca.crt, the CA that signed it) whose certificate every engine
	// serves to clients in place of the one mydb issues: a certificate of
	// your own PKI, for the names your clients use. The writer must be
	// allowed to get the Secret. mydb copies it into the database's
	// certificates Secret; a renewed certificate is served without a
	// restart. PostgreSQL replicas verify their primary against its ca.crt
	// and the certificate's first DNS name; MySQL and MariaDB replicas
	// connect to the primary's admin interface (port 33062; for MariaDB a
	// relay the instance manager serves), which serves the instance's own
	// certificate.
	// +optional
	ServerCertificateSecret string `json:"serverCertificateSecret,omitempty" protobuf:"bytes,1,opt,name=serverCertificateSecret"`

	// ClientTLS is "Preferred" (unset: the engines offer TLS, and clients
	// that do not ask for it are still let in, as libpq's default
	// sslmode=prefer expects) or "Required": every instance refuses
	// clients that connect over the network without TLS (PostgreSQL
	// hostssl, MariaDB and MySQL require_secure_transport). Replication
	// uses TLS either way; the instance manager's own connections go over
	// the pod's unix socket. A change rolls the instances out, primary
	// last.
	// +optional
	ClientTLS ClientTLSMode `json:"clientTLS,omitempty" protobuf:"bytes,2,opt,name=clientTLS,casttype=ClientTLSMode"`
}

// ClientTLSMode says whether clients must use TLS.
// +enum
type ClientTLSMode string

// The client TLS modes.
const (
	// ClientTLSPreferred lets clients in with or without TLS.
	ClientTLSPreferred ClientTLSMode = "Preferred"
	// ClientTLSRequired refuses clients without TLS.
	ClientTLSRequired ClientTLSMode = "Required"
)

// ReplicationSpec says how the primary replicates to the other instances.
type ReplicationSpec struct {
	// Mode is "Async" (the default: a commit returns once the primary has
	// it; a failover may lose the last commits) or "Sync" (a commit returns
	// only once at least one replica has it too; with no replica connected,
	// commits wait, they do not fail). Sync needs replicas of 2 or more.
	// +optional
	Mode ReplicationMode `json:"mode,omitempty" protobuf:"bytes,1,opt,name=mode,casttype=ReplicationMode"`
}

// ReplicationMode is how a commit waits for the replicas.
// +enum
type ReplicationMode string

// The replication modes.
const (
	// ReplicationModeAsync acknowledges a commit once the primary has it.
	ReplicationModeAsync ReplicationMode = "Async"
	// ReplicationModeSync acknowledges a commit once the primary and at
	// least one replica have it.
	ReplicationModeSync ReplicationMode = "Sync"
)

// RestoreSource names the backup a new database starts from.
type RestoreSource struct {
	// BackupName is a succeeded MyDatabaseBackup in the database's
	// namespace, of the same engine. The database waits for it to succeed;
	// its primary then loads it into an empty data directory before it
	// first reports ready, and its replicas clone from that primary. The
	// backup's source database may be gone: its status.location says where
	// the dump is and with which credentials. Exactly one of backupName and
	// databaseName is set.
	// +optional
	BackupName string `json:"backupName,omitempty" protobuf:"bytes,1,opt,name=backupName"`

	// DatabaseName, with pointInTime, lets mydb pick the backup: the
	// newest succeeded MyDatabaseBackup in S3 of the MyDatabase of that name
	// (which may be gone) that ended before the target (for latest, the
	// newest). The database waits while there is none.
	// +optional
	DatabaseName string `json:"databaseName,omitempty" protobuf:"bytes,3,opt,name=databaseName"`

	// PointInTime replays the log its source database archived
	// (spec.backup.pointInTimeRecovery: PostgreSQL's write-ahead log,
	// MariaDB's binary logs) from the end of the backup to this point,
	// after which the new database is a primary of its own (PostgreSQL on a
	// new timeline, MariaDB with a GTID history of its own); it never
	// writes into the source's archive. PostgreSQL and MariaDB, with an S3
	// destination. Unset, the database is as the backup left it.
	// +optional
	PointInTime *RecoveryTarget `json:"pointInTime,omitempty" protobuf:"bytes,2,opt,name=pointInTime"`
}

// RecoveryTarget is where a restore stops replaying the archive; exactly
// one field is set.
type RecoveryTarget struct {
	// Time: every transaction committed at or before it is restored, none
	// committed after it. MariaDB's binary log keeps whole seconds (when a
	// transaction's statement began): a MariaDB restore replays the
	// transactions of the seconds before the target's, none of its own
	// second. It must lie after the backup ended and before the source's
	// status.recoverability.lastRecoverableTime; a target the archive does
	// not reach fails the restore (it never ends elsewhere).
	// +optional
	Time *metav1.Time `json:"time,omitempty" protobuf:"bytes,1,opt,name=time"`

	// LSN replays every record up to and including this log sequence
	// number, such as "0/3000148" (PostgreSQL).
	// +optional
	LSN string `json:"lsn,omitempty" protobuf:"bytes,2,opt,name=lsn"`

	// Latest replays everything the archive holds.
	// +optional
	Latest bool `json:"latest,omitempty" protobuf:"varint,3,opt,name=latest"`

	// GTID replays the binary logs up to and including the transaction
	// with this GTID (MariaDB and MySQL): MariaDB's domain-server-sequence
	// ("0-1-4711"), MySQL's source_uuid:sequence
	// ("3e11fa47-71ca-11e1-9e33-c80aa9429562:4711"). The backup must not
	// hold it already; an archive that does not reach it fails the
	// restore.
	// +optional
	GTID string `json:"gtid,omitempty" protobuf:"bytes,4,opt,name=gtid"`
}

// PointInTimeRecovery makes a database's primary archive its write-ahead
// log (PostgreSQL) or binary logs (MariaDB) continuously, next to its
// backups, so it can be restored to any moment of its recoverability
// window.
type PointInTimeRecovery struct {
	// ArchiveTimeout is how often an idle primary commits a heartbeat and
	// closes its WAL file (MariaDB: closes its binary log), so the window
	// advances with no writes: it bounds how far lastRecoverableTime lags
	// behind now, at the cost of one WAL file (16 MiB; a binary log of a
	// few hundred bytes) in the bucket each time. From 10s to 1h. Defaults
	// to 5m.
	// +optional
	ArchiveTimeout *metav1.Duration `json:"archiveTimeout,omitempty" protobuf:"bytes,1,opt,name=archiveTimeout"`

	// RetentionWindow keeps what a restore to any moment of the last
	// RetentionWindow needs, such as "168h" for a week: every succeeded
	// scheduled backup that ended within it and the newest one that ended
	// before it (besides the newest spec.backup.retention, which are kept
	// whatever their age), and the archived WAL from that oldest base on.
	// Older archived WAL is deleted (MariaDB: the binary logs the oldest
	// base holds that closed before it began); nothing the window needs
	// ever is. Unset, mydb deletes no archived log. From 1h to 87600h (ten
	// years).
	// +optional
	RetentionWindow *metav1.Duration `json:"retentionWindow,omitempty" protobuf:"bytes,2,opt,name=retentionWindow"`
}

// Recoverability is how far back and up to when a database can be
// restored, as its instance managers measured it.
type Recoverability struct {
	// FirstRecoverableTime is when the oldest succeeded backup taken while
	// the archive was complete ended: the earliest target.
	// +optional
	FirstRecoverableTime *metav1.Time `json:"firstRecoverableTime,omitempty" protobuf:"bytes,1,opt,name=firstRecoverableTime"`

	// LastRecoverableTime is the commit time of the latest transaction
	// known to be in the archive: a target must be before it.
	// +optional
	LastRecoverableTime *metav1.Time `json:"lastRecoverableTime,omitempty" protobuf:"bytes,2,opt,name=lastRecoverableTime"`

	// LastArchivedWAL is the last file the primary archived, at
	// LastArchivedTime.
	// +optional
	LastArchivedWAL string `json:"lastArchivedWAL,omitempty" protobuf:"bytes,3,opt,name=lastArchivedWAL"`
	// +optional
	LastArchivedTime *metav1.Time `json:"lastArchivedTime,omitempty" protobuf:"bytes,4,opt,name=lastArchivedTime"`

	// ArchivingSince is when the controller first saw the primary archive
	// a file: backups that started before it are not a base for a replay.
	// +optional
	ArchivingSince *metav1.Time `json:"archivingSince,omitempty" protobuf:"bytes,5,opt,name=archivingSince"`

	// PendingWALFiles is how many closed WAL files the primary had not
	// archived yet when last asked: the archive's lag, in 16 MiB files.
	// +optional
	PendingWALFiles int32 `json:"pendingWALFiles,omitempty" protobuf:"varint,6,opt,name=pendingWALFiles"`
}

// BackupPolicy says when a MyDatabase is backed up besides on demand.
type BackupPolicy struct {
	// Schedule is when to take a backup, in cron syntax ("0 3 * * *" is every
	// day at 03:00 UTC); empty takes none on a schedule. When the controller
	// was not running at a scheduled time, it takes one backup for the
	// latest time it missed.
	// +optional
	Schedule string `json:"schedule,omitempty" protobuf:"bytes,1,opt,name=schedule"`

	// Retention is how many scheduled backups to keep, from 1 to 100; older
	// ones are deleted. Other backups are never deleted. Defaults to 7.
	// +optional
	Retention *int32 `json:"retention,omitempty" protobuf:"varint,2,opt,name=retention"`

	// FinalBackup, when true, makes deleting the database take a last backup
	// of its primary first (named <database>-final-<time>, never owned by
	// the database, so it outlives it whatever the deletionPolicy): the
	// server holds the database with the example.com/final-backup finalizer
	// until a backup of this database, started after its deletion began,
	// succeeds. It needs a destination. To delete without it, annotate the
	// database mydb.example.com/skip-final-backup=true.
	// +optional
	FinalBackup bool `json:"finalBackup,omitempty" protobuf:"varint,3,opt,name=finalBackup"`

	// Destination is where the database's backups are written. Every
	// backup, on demand, scheduled or final, needs one: a backup of a
	// database without a destination fails, and POST .../backup refuses it.
	// +optional
	Destination *BackupDestination `json:"destination,omitempty" protobuf:"bytes,4,opt,name=destination"`

	// PointInTimeRecovery archives the write-ahead log continuously to the
	// destination (S3 only; PostgreSQL only), so a new database can start
	// from any moment of status.recoverability. Changing it restarts the
	// instances, one at a time.
	// +optional
	PointInTimeRecovery *PointInTimeRecovery `json:"pointInTimeRecovery,omitempty" protobuf:"bytes,5,opt,name=pointInTimeRecovery"`
}

// BackupDestination is where backups are written; exactly one field is set.
type BackupDestination struct {
	// S3 is a bucket of an S3-compatible object store.
	// +optional
	S3 *S3Destination `json:"s3,omitempty" protobuf:"bytes,1,opt,name=s3"`

	// Volume gives each backup a PersistentVolumeClaim of its own, for
	// clusters without object storage. A short-lived pod mounts the claim
	// while the backup is written and while a restore reads it; no
	// database's pod ever mounts it.
	// +optional
	Volume *VolumeDestination `json:"volume,omitempty" protobuf:"bytes,2,opt,name=volume"`
}

// VolumeDestination is how the claim of each backup is made: one claim per
// backup, named <backup>-dump, labelled app.kubernetes.io/managed-by=mydb,
// owned by nothing and deleted with its backup.
type VolumeDestination struct {
	// StorageClassName is the claims' StorageClass; unset, the cluster's
	// default.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty" protobuf:"bytes,1,opt,name=storageClassName"`

	// StorageSize is each claim's requested storage. Defaults to the database's
	// storageSize, which a physical backup of its data does not outgrow.
	// +optional
	StorageSize *resource.Quantity `json:"storageSize,omitempty" protobuf:"bytes,2,opt,name=storageSize"`
}

// S3Destination is a bucket, and a prefix in it, of an S3-compatible object
// store. Each backup is one object, <prefix>/<namespace>/<database>/<database
// UID>/<backup>-<backup UID>, streamed by the instance manager that takes it.
type S3Destination struct {
	// Endpoint is the store's URL, such as "https://s3.eu-west-1.amazonaws.com"
	// or "http://minio.storage:9000": an http or https scheme and a host,
	// with no path, query or credentials in it.
	Endpoint string `json:"endpoint" protobuf:"bytes,1,opt,name=endpoint"`

	// Region is the bucket's region, for stores that sign with one.
	// +optional
	Region string `json:"region,omitempty" protobuf:"bytes,2,opt,name=region"`

	// Bucket is the bucket's name (3 to 63 lowercase letters, digits, dots
	// and hyphens, beginning and ending with a letter or digit). mydb
	// creates it when it does not exist.
	Bucket string `json:"bucket" protobuf:"bytes,3,opt,name=bucket"`

	// Prefix is a path in the bucket under which the backups are written,
	// such as "prod/databases": clean, relative, with no "." or ".."
	// element. Empty writes them at the bucket's root.
	// +optional
	Prefix string `json:"prefix,omitempty" protobuf:"bytes,4,opt,name=prefix"`

	// CredentialsSecret is the Secret, in the database's namespace, holding
	// the access key. The controller reads it at each backup, restore and
	// delete and hands the key to the instance manager in the request.
	CredentialsSecret S3CredentialsSecret `json:"credentialsSecret" protobuf:"bytes,5,opt,name=credentialsSecret"`

	// CABundle names PEM certificates, in the database's namespace, to
	// trust for an https endpoint besides the system's.
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty" protobuf:"bytes,6,opt,name=caBundle"`
}

// S3CredentialsSecret names a Secret and its keys of an S3 access key.
type S3CredentialsSecret struct {
	// Name is the Secret's name.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// AccessKeyIDKey is the Secret's key of the access key ID. Defaults to
	// "accessKeyID".
	// +optional
	AccessKeyIDKey string `json:"accessKeyIDKey,omitempty" protobuf:"bytes,2,opt,name=accessKeyIDKey"`
	// SecretAccessKeyKey is the Secret's key of the secret access key.
	// Defaults to "secretAccessKey".
	// +optional
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty" protobuf:"bytes,3,opt,name=secretAccessKeyKey"`
}

// CABundleSource is a key of a Secret or of a ConfigMap; exactly one of
// secretName and configMapName is set.
type CABundleSource struct {
	// SecretName is a Secret holding the certificates.
	// +optional
	SecretName string `json:"secretName,omitempty" protobuf:"bytes,1,opt,name=secretName"`
	// ConfigMapName is a ConfigMap holding the certificates.
	// +optional
	ConfigMapName string `json:"configMapName,omitempty" protobuf:"bytes,2,opt,name=configMapName"`
	// Key is the key of the certificates. Defaults to "ca.crt".
	// +optional
	Key string `json:"key,omitempty" protobuf:"bytes,3,opt,name=key"`
}

// FinalBackupFinalizer holds a MyDatabase whose spec.backup.finalBackup is
// set until its final backup has succeeded.
const FinalBackupFinalizer = "example.com/final-backup"

// SkipFinalBackupAnnotation, set to "true", lets a database with
// spec.backup.finalBackup be deleted without its final backup.
const SkipFinalBackupAnnotation = "mydb.example.com/skip-final-backup"

// MyDatabaseStatus is the observed state of a MyDatabase.
type MyDatabaseStatus struct {
	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`

	// Replicas is the number of database pods that exist.
	// +optional
	Replicas int32 `json:"replicas,omitempty" protobuf:"varint,2,opt,name=replicas"`

	// ReadyReplicas is the number of database pods that are ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty" protobuf:"varint,3,opt,name=readyReplicas"`

	// Selector is the label selector of the database's pods, in string form;
	// the /scale subresource reports it so autoscalers can find the pods.
	// +optional
	Selector string `json:"selector,omitempty" protobuf:"bytes,4,opt,name=selector"`

	// Endpoint is the host:port clients connect to.
	// +optional
	Endpoint string `json:"endpoint,omitempty" protobuf:"bytes,5,opt,name=endpoint"`

	// Conditions are the latest observations of the database's state:
	// Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +patchStrategy=merge
	// +patchMergeKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type" protobuf:"bytes,6,rep,name=conditions"`

	// CurrentPrimary is the instance that serves writes: the <name>-rw
	// Service routes to it.
	// +optional
	CurrentPrimary string `json:"currentPrimary,omitempty" protobuf:"bytes,7,opt,name=currentPrimary"`

	// Instances are the database's pods: the role mydb gave each, and what
	// its instance manager last reported.
	// +optional
	// +listType=map
	// +listMapKey=name
	Instances []InstanceStatus `json:"instances,omitempty" protobuf:"bytes,8,rep,name=instances"`

	// TargetPrimary is the instance chosen to become the primary. It
	// differs from currentPrimary while a switchover is under way: the
	// current primary stops taking writes (it fences) as soon as it sees a
	// target other than itself, and the controller makes the target the
	// current primary once it has everything the old one acknowledged. It
	// equals currentPrimary otherwise.
	// +optional
	TargetPrimary string `json:"targetPrimary,omitempty" protobuf:"bytes,9,opt,name=targetPrimary"`

	// TargetPrimaryTime is when targetPrimary was last set.
	// +optional
	TargetPrimaryTime *metav1.MicroTime `json:"targetPrimaryTime,omitempty" protobuf:"bytes,10,opt,name=targetPrimaryTime"`

	// TargetPrimaryReason says why targetPrimary was set: Switchover,
	// Failover, ForcedFailover or RollingUpdate.
	// +optional
	TargetPrimaryReason string `json:"targetPrimaryReason,omitempty" protobuf:"bytes,11,opt,name=targetPrimaryReason"`

	// LastScheduleTime is the due time of the last backup spec.backup.schedule
	// took; the next one is due at the schedule's first time after it.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty" protobuf:"bytes,12,opt,name=lastScheduleTime"`

	// Recoverability is the window a restore to a point may target, with
	// spec.backup.pointInTimeRecovery.
	// +optional
	Recoverability *Recoverability `json:"recoverability,omitempty" protobuf:"bytes,13,opt,name=recoverability"`

	// UpdateRevision is the revision of the pod template the database's
	// spec asks for (its StatefulSet's update revision). A change that
	// needs new pods is rolled out primary last: the replicas are replaced
	// one at a time, then one switchover moves the primary role to an
	// updated replica, then the old primary is replaced.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty" protobuf:"bytes,14,opt,name=updateRevision"`

	// UpdatedReplicas is the number of database pods that run
	// updateRevision.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty" protobuf:"varint,15,opt,name=updatedReplicas"`

	// CertificateAuthority is the database's root CA, which every
	// certificate of its instances chains to, and its rotation.
	// +optional
	CertificateAuthority *CertificateAuthorityStatus `json:"certificateAuthority,omitempty" protobuf:"bytes,16,opt,name=certificateAuthority"`

	// Databases are spec.databases as the primary's manager last
	// reconciled them.
	// +optional
	// +listType=map
	// +listMapKey=name
	Databases []ManagedObjectStatus `json:"databases,omitempty" protobuf:"bytes,17,rep,name=databases"`

	// Roles are spec.roles as the primary's manager last reconciled them.
	// +optional
	// +listType=map
	// +listMapKey=name
	Roles []ManagedObjectStatus `json:"roles,omitempty" protobuf:"bytes,18,rep,name=roles"`
}

// ManagedObjectState is where a database or role of the spec is.
type ManagedObjectState string

// The states of a database or role of the spec.
const (
	// ManagedObjectPresent: it exists as the spec says.
	ManagedObjectPresent ManagedObjectState = "Present"
	// ManagedObjectAbsent: it does not exist, as ensure: Absent says.
	ManagedObjectAbsent ManagedObjectState = "Absent"
	// ManagedObjectPending: not reconciled yet (the message says what it
	// waits for).
	ManagedObjectPending ManagedObjectState = "Pending"
	// ManagedObjectFailed: the engine refused it (the message says why).
	ManagedObjectFailed ManagedObjectState = "Failed"
)

// ManagedObjectStatus is one database or role of the spec on the primary.
type ManagedObjectStatus struct {
	// Name is the database's or role's name.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// State is Present, Absent, Pending or Failed.
	State ManagedObjectState `json:"state" protobuf:"bytes,2,opt,name=state,casttype=ManagedObjectState"`

	// Message says why a database or role is Pending or Failed.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,3,opt,name=message"`

	// PasswordSecretVersion is the resourceVersion of a role's password
	// Secret whose password the role has.
	// +optional
	PasswordSecretVersion string `json:"passwordSecretVersion,omitempty" protobuf:"bytes,4,opt,name=passwordSecretVersion"`
}

// CertificateAuthorityStatus is a database's root CA. A rotation (the
// mydb.example.com/rotate-ca annotation, or the root at two thirds of its
// life) replaces it without a restart: the new root is trusted next to
// the old one everywhere (Introducing), then it signs and every instance
// takes a certificate of it (Switched), then the old one is no longer
// trusted.
type CertificateAuthorityStatus struct {
	// Fingerprint is the hex of the first 8 bytes of the SHA-256 of the
	// root that signs.
	// +optional
	Fingerprint string `json:"fingerprint,omitempty" protobuf:"bytes,1,opt,name=fingerprint"`

	// NotAfter is when that root ends.
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty" protobuf:"bytes,2,opt,name=notAfter"`

	// Rotation is the phase of a rotation under way: Introducing,
	// Switched, or Retiring (the old root is gone from the Secrets and
	// the instances have yet to drop it); empty when none is.
	// +optional
	Rotation string `json:"rotation,omitempty" protobuf:"bytes,3,opt,name=rotation"`

	// Message says what a rotation waits for.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,4,opt,name=message"`

	// LastRotationTime is when the last rotation ended.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty" protobuf:"bytes,5,opt,name=lastRotationTime"`
}

// InstanceStatus is one instance of a database as mydb sees it.
type InstanceStatus struct {
	// Name is the instance's pod.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`

	// Address is where the instance serves: its pod's IP. Replicas reach
	// the primary there.
	// +optional
	Address string `json:"address,omitempty" protobuf:"bytes,2,opt,name=address"`

	// Role is Primary or Replica.
	// +optional
	Role InstanceRole `json:"role,omitempty" protobuf:"bytes,3,opt,name=role,casttype=InstanceRole"`

	// Ready tells whether the instance serves its role: a primary accepts
	// writes, a replica streams from the primary within the lag bound.
	// +optional
	Ready bool `json:"ready,omitempty" protobuf:"varint,4,opt,name=ready"`

	// Message says what the instance manager reported when it is not ready.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,5,opt,name=message"`

	// Fenced tells that the instance refuses writes because another
	// instance is to be the primary.
	// +optional
	Fenced bool `json:"fenced,omitempty" protobuf:"varint,6,opt,name=fenced"`

	// Position is how far the instance's data goes, as its manager last
	// reported (kept while the manager does not answer, until the primary
	// changes): a switchover with no target picks the ready replica that
	// is furthest, and a failover under Sync replication waits rather than
	// promote a replica behind a lost one.
	// +optional
	Position *InstancePosition `json:"position,omitempty" protobuf:"bytes,7,opt,name=position"`

	// Revision is the revision of the pod template the instance's pod
	// runs; status.updateRevision once it is updated.
	// +optional
	Revision string `json:"revision,omitempty" protobuf:"bytes,8,opt,name=revision"`
}

// InstancePosition is a point in a database's history.
type InstancePosition struct {
	// Timeline and LSN are PostgreSQL's: the current WAL position of a
	// primary; of a replica the WAL it received and flushed (or replayed,
	// when that is further), which a promotion replays in full.
	// +optional
	Timeline int32 `json:"timeline,omitempty" protobuf:"varint,1,opt,name=timeline"`
	// +optional
	LSN string `json:"lsn,omitempty" protobuf:"bytes,2,opt,name=lsn"`
	// GTID is the MySQL family's GTID position; a replica's includes what
	// its relay log holds and it has not applied yet.
	// +optional
	GTID string `json:"gtid,omitempty" protobuf:"bytes,3,opt,name=gtid"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseList is a list of MyDatabases.
type MyDatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items are the MyDatabases.
	Items []MyDatabase `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// The reasons status.targetPrimary is set for.
const (
	// TargetPrimaryReasonSwitchover is a planned switchover (POST .../switchover).
	TargetPrimaryReasonSwitchover = "Switchover"
	// TargetPrimaryReasonFailover is a failover: the primary was unready for
	// spec.failoverDelay.
	TargetPrimaryReasonFailover = "Failover"
	// TargetPrimaryReasonForcedFailover is a failover an operator forced
	// (POST .../switchover with allowWriteLoss) while the controller held
	// it back because it would lose acknowledged writes.
	TargetPrimaryReasonForcedFailover = "ForcedFailover"
	// TargetPrimaryReasonRollingUpdate is the one switchover of a rolling
	// update: the primary's pod is replaced last, once an updated replica
	// holds the role.
	TargetPrimaryReasonRollingUpdate = "RollingUpdate"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseSwitchover is the body and the answer of POST
// mydatabases/<name>/switchover, which moves the primary role to another
// instance without losing an acknowledged write. It needs only the create
// verb on mydatabases/switchover. It is not stored.
type MyDatabaseSwitchover struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata; ignored.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec says where to switch over to.
	// +optional
	Spec MyDatabaseSwitchoverSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`

	// Status is what the server decided.
	// +optional
	Status MyDatabaseSwitchoverStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// MyDatabaseSwitchoverSpec names the instance to switch over to.
type MyDatabaseSwitchoverSpec struct {
	// TargetInstance is the replica to promote (a pod name such as
	// "shop-1"); empty picks the ready replica whose status.instances[]
	// position is the most advanced.
	// +optional
	TargetInstance string `json:"targetInstance,omitempty" protobuf:"bytes,1,opt,name=targetInstance"`

	// AllowWriteLoss forces a failover the controller holds back: with
	// spec.replication.mode Sync, while the primary is lost and a replica
	// that is lost too last reported a position beyond every replica that
	// answers (the PrimaryChange condition says FailoverWouldLoseWrites),
	// it promotes targetInstance at once, and the commits only the lost
	// replica had are lost. It needs targetInstance, and is refused (409)
	// while no failover is held back.
	// +optional
	AllowWriteLoss bool `json:"allowWriteLoss,omitempty" protobuf:"varint,2,opt,name=allowWriteLoss"`
}

// MyDatabaseSwitchoverStatus is what the server decided.
type MyDatabaseSwitchoverStatus struct {
	// OldPrimary is the primary being replaced.
	// +optional
	OldPrimary string `json:"oldPrimary,omitempty" protobuf:"bytes,1,opt,name=oldPrimary"`
	// NewPrimary is the instance that will be the primary.
	// +optional
	NewPrimary string `json:"newPrimary,omitempty" protobuf:"bytes,2,opt,name=newPrimary"`
	// StartTime is when the switchover was recorded.
	// +optional
	StartTime *metav1.MicroTime `json:"startTime,omitempty" protobuf:"bytes,3,opt,name=startTime"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +k8s:conversion-gen:explicit-from=net/url.Values

// MyDatabaseConnectOptions are the query parameters of POST
// mydatabases/<name>/connect.
type MyDatabaseConnectOptions struct {
	metav1.TypeMeta `json:",inline"`

	// Instance is where the tunnel leads: "primary" (the default) is the
	// ready primary, "replica" a ready replica mydb picks, and an
	// instance's name (for example shop-1) that instance while it is
	// ready. A replica serves reads only, as of its replay position.
	// +optional
	Instance string `json:"instance,omitempty" protobuf:"bytes,1,opt,name=instance"`
}

// The instances mydatabases/connect leads to by role.
const (
	ConnectToPrimary = "primary"
	ConnectToReplica = "replica"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseCredentialRequest is the body and the answer of POST
// mydatabases/<name>/credentials, shaped like TokenRequest: the primary's
// instance manager makes a database user that logs in until
// status.expirationTimestamp, named after the requesting Kubernetes user,
// and the answer carries its password. Nothing of it is stored, in etcd or
// in any Secret. It needs the create verb on mydatabases/credentials and
// the role's own verb (readonly or readwrite) there too.
type MyDatabaseCredentialRequest struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata; ignored.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec says which role, for how long.
	// +optional
	Spec MyDatabaseCredentialRequestSpec `json:"spec,omitempty" protobuf:"bytes,2,opt,name=spec"`

	// Status is the credential and where to use it.
	// +optional
	Status MyDatabaseCredentialRequestStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// CredentialRole is what a short-lived user may do in the application's
// database.
// +enum
type CredentialRole string

// The roles of short-lived users.
const (
	// CredentialRoleReadOnly reads every table and changes nothing.
	CredentialRoleReadOnly CredentialRole = "readonly"
	// CredentialRoleReadWrite has the application user's rights.
	CredentialRoleReadWrite CredentialRole = "readwrite"
)

// MyDatabaseCredentialRequestSpec says which role, for how long.
type MyDatabaseCredentialRequestSpec struct {
	// Role is readonly (the default) or readwrite.
	// +optional
	Role CredentialRole `json:"role,omitempty" protobuf:"bytes,1,opt,name=role,casttype=CredentialRole"`
	// ExpirationSeconds is how long the credential logs in: 60 to 86400
	// (24 hours), 3600 when unset.
	// +optional
	ExpirationSeconds *int64 `json:"expirationSeconds,omitempty" protobuf:"varint,2,opt,name=expirationSeconds"`
}

// MyDatabaseCredentialRequestStatus is the credential and where to use it.
type MyDatabaseCredentialRequestStatus struct {
	// Username is the database user, named after the Kubernetes user with
	// a hash that makes it unique.
	Username string `json:"username" protobuf:"bytes,1,opt,name=username"`
	// Password logs Username in until ExpirationTimestamp.
	Password string `json:"password" protobuf:"bytes,2,opt,name=password"`
	// ExpirationTimestamp is when the user stops logging in; its sessions
	// end within seconds after (docs/security.md).
	ExpirationTimestamp metav1.Time `json:"expirationTimestamp" protobuf:"bytes,3,opt,name=expirationTimestamp"`
	// Database is the application's database.
	Database string `json:"database" protobuf:"bytes,4,opt,name=database"`
	// Host is the DNS name of the Service that reaches the primary.
	Host string `json:"host" protobuf:"bytes,5,opt,name=host"`
	// ReadOnlyHost is the DNS name of the Service that reaches the ready
	// replicas.
	// +optional
	ReadOnlyHost string `json:"readOnlyHost,omitempty" protobuf:"bytes,6,opt,name=readOnlyHost"`
	// Port is the engine's port.
	Port int32 `json:"port" protobuf:"varint,7,opt,name=port"`
	// CACertificate is the PEM bundle that verifies the engine's
	// certificate (sslmode=verify-full, --ssl-verify-server-cert).
	// +optional
	CACertificate string `json:"caCertificate,omitempty" protobuf:"bytes,8,opt,name=caCertificate"`
	// Instance is the primary that made the user.
	// +optional
	Instance string `json:"instance,omitempty" protobuf:"bytes,9,opt,name=instance"`
	// ServerName is the name the engine's certificate is verified for when
	// it is one of the user's own (spec.tls.serverCertificateSecret);
	// empty when the database's CA issued it, whose certificates name
	// the Services, the pods and localhost.
	// +optional
	ServerName string `json:"serverName,omitempty" protobuf:"bytes,10,opt,name=serverName"`
}

// BackupPhase is where a backup is in its life.
// +enum
type BackupPhase string

// The phases of a backup.
const (
	// BackupPhasePending: the backup is accepted and waits for an instance.
	BackupPhasePending BackupPhase = "Pending"
	// BackupPhaseRunning: an instance manager streams the backup to the
	// destination.
	BackupPhaseRunning BackupPhase = "Running"
	// BackupPhaseSucceeded: the dump is stored at status.location.
	BackupPhaseSucceeded BackupPhase = "Succeeded"
	// BackupPhaseFailed: the backup failed; status.message says why.
	BackupPhaseFailed BackupPhase = "Failed"
)

// BackupTarget says which instance of a database a backup reads.
// +enum
type BackupTarget string

// The backup targets.
const (
	// BackupTargetPrimary backs the primary up: the backup holds every
	// commit acknowledged before it began.
	BackupTargetPrimary BackupTarget = "Primary"
	// BackupTargetPreferReplica backs up the ready, streaming replica that
	// is furthest along, or the primary when there is none.
	BackupTargetPreferReplica BackupTarget = "PreferReplica"
)

// BackupFinalizer holds a MyDatabaseBackup until the controller has deleted
// its dump from the destination, so deleting a backup deletes its data.
const BackupFinalizer = "example.com/backup-data"

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseBackup is one backup of a MyDatabase: a consistent physical
// backup an instance manager (mydb-instance) takes of its engine and
// streams, without staging it on disk, to the database's
// spec.backup.destination. Create one with POST
// .../mydatabases/<name>/backup (which needs only the create verb on
// mydatabases/backup), or directly. Deleting it deletes its dump.
type MyDatabaseBackup struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Spec says what to back up. It may not change.
	Spec MyDatabaseBackupSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`

	// Status is how the backup went, written by mydb's controller.
	// +optional
	Status MyDatabaseBackupStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// MyDatabaseBackupSpec says what to back up.
type MyDatabaseBackupSpec struct {
	// DatabaseName is the MyDatabase, in the backup's namespace, to back up.
	DatabaseName string `json:"databaseName" protobuf:"bytes,1,opt,name=databaseName"`

	// Target is the instance to back up: "PreferReplica" (the default) the
	// ready, streaming replica that is furthest along, falling back to the
	// primary when no replica is ready, so that reading the whole database
	// does not compete with the application's writes on the primary; such
	// a backup lacks the commits the replica had not replayed when it
	// began (status.position says how far it goes). "Primary" backs the
	// primary up, with every commit acknowledged before the backup began
	// (final backups always do).
	// +optional
	Target BackupTarget `json:"target,omitempty" protobuf:"bytes,2,opt,name=target,casttype=BackupTarget"`
}

// MyDatabaseBackupStatus is how the backup went.
type MyDatabaseBackupStatus struct {
	// Phase is Pending, Running, Succeeded or Failed.
	// +optional
	Phase BackupPhase `json:"phase,omitempty" protobuf:"bytes,1,opt,name=phase,casttype=BackupPhase"`

	// StartTime is when the instance manager began the backup.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty" protobuf:"bytes,2,opt,name=startTime"`

	// CompletionTime is when the backup succeeded or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty" protobuf:"bytes,3,opt,name=completionTime"`

	// Location is where the dump is, and with which credentials it is read:
	// set when the backup starts, so it outlives the source database.
	// (Protobuf field 4 held an earlier string form and stays unused.)
	// +optional
	Location *BackupLocation `json:"location,omitempty" protobuf:"bytes,6,opt,name=location"`

	// Message says why a backup failed, or what it waits for.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,5,opt,name=message"`

	// DatabaseUID is the UID of the MyDatabase backed up: a database later
	// created with the same name has another.
	// +optional
	DatabaseUID types.UID `json:"databaseUID,omitempty" protobuf:"bytes,7,opt,name=databaseUID,casttype=k8s.io/apimachinery/pkg/types.UID"`

	// Instance is the instance (pod) backed up, and Role the role it had.
	// +optional
	Instance string `json:"instance,omitempty" protobuf:"bytes,8,opt,name=instance"`
	// +optional
	Role InstanceRole `json:"role,omitempty" protobuf:"bytes,9,opt,name=role,casttype=InstanceRole"`

	// Bytes is how much has been streamed so far.
	// +optional
	Bytes int64 `json:"bytes,omitempty" protobuf:"varint,10,opt,name=bytes"`

	// SizeBytes is the dump's size and Checksum its SHA-256 (in hex), set
	// on success; a restore checks the stream it reads against both.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty" protobuf:"varint,11,opt,name=sizeBytes"`
	// +optional
	Checksum string `json:"checksum,omitempty" protobuf:"bytes,12,opt,name=checksum"`

	// Format is the dump's format, such as "pg_basebackup-tar" or
	// "mariadb-backup-xbstream"; only an engine that reads it restores it.
	// +optional
	Format string `json:"format,omitempty" protobuf:"bytes,13,opt,name=format"`

	// Position is how far the backed-up data goes.
	// +optional
	Position *InstancePosition `json:"position,omitempty" protobuf:"bytes,14,opt,name=position"`
}

// BackupLocation is where a backup's dump is stored; exactly one field is set.
// (Protobuf field 1 held the shared claim of an earlier design and stays
// unused.)
type BackupLocation struct {
	// S3 is an object of an S3-compatible bucket.
	// +optional
	S3 *S3Location `json:"s3,omitempty" protobuf:"bytes,2,opt,name=s3"`

	// Volume is the backup's own PersistentVolumeClaim.
	// +optional
	Volume *VolumeLocation `json:"volume,omitempty" protobuf:"bytes,3,opt,name=volume"`
}

// URI is the location as kubectl shows it: s3://<bucket>/<key> or
// pvc://<claim>.
func (l *BackupLocation) URI() string {
	switch {
	case l == nil:
		return ""
	case l.S3 != nil:
		return "s3://" + l.S3.Bucket + "/" + l.S3.Key
	case l.Volume != nil:
		return "pvc://" + l.Volume.ClaimName
	}
	return ""
}

// VolumeLocation is the PersistentVolumeClaim, in the backup's namespace,
// that holds the backup's dump and nothing else.
type VolumeLocation struct {
	// ClaimName is the claim's name, <backup>-dump.
	ClaimName string `json:"claimName" protobuf:"bytes,1,opt,name=claimName"`
}

// S3Location is one object of a bucket, and what it takes to read it.
type S3Location struct {
	// Endpoint, Region and Bucket are the destination's when the backup
	// was taken.
	Endpoint string `json:"endpoint" protobuf:"bytes,1,opt,name=endpoint"`
	// +optional
	Region string `json:"region,omitempty" protobuf:"bytes,2,opt,name=region"`
	Bucket string `json:"bucket" protobuf:"bytes,3,opt,name=bucket"`
	// Key is the object's key.
	Key string `json:"key" protobuf:"bytes,4,opt,name=key"`
	// CredentialsSecret is the Secret, in the backup's namespace, whose
	// access key reads and deletes the object.
	CredentialsSecret S3CredentialsSecret `json:"credentialsSecret" protobuf:"bytes,5,opt,name=credentialsSecret"`
	// CABundle names the certificates to trust for an https endpoint.
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty" protobuf:"bytes,6,opt,name=caBundle"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseBackupList is a list of MyDatabaseBackups.
type MyDatabaseBackupList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// Items are the backups.
	Items []MyDatabaseBackup `json:"items" protobuf:"bytes,2,rep,name=items"`
}
