package example

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Engine is a database engine.
type Engine string

// The engines mydb runs.
const (
	EngineMySQL    Engine = "mysql"
	EngineMariaDB  Engine = "mariadb"
	EnginePostgres Engine = "postgres"
)

// DeletionPolicy says what happens to a database's volumes when it is deleted.
type DeletionPolicy string

// The deletion policies.
const (
	DeletionPolicyRetain DeletionPolicy = "Retain"
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// Condition types of a MyDatabase.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
	ConditionRestored    = "Restored"
	// ConditionContinuousArchiving says whether the primary's WAL reaches
	// the archive (spec.backup.pointInTimeRecovery).
	ConditionContinuousArchiving = "ContinuousArchiving"
	// ConditionHibernated says the instances are stopped by spec.hibernate.
	ConditionHibernated = "Hibernated"
	// ConditionParametersApplied says whether every instance runs
	// spec.parameters.
	ConditionParametersApplied = "ParametersApplied"
	// ConditionRolesAndDatabasesApplied says whether the primary runs
	// spec.roles and spec.databases.
	ConditionRolesAndDatabasesApplied = "RolesAndDatabasesApplied"
	// ConditionPrimaryChange says how the primary last moved, or why it
	// does not.
	ConditionPrimaryChange = "PrimaryChange"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabase is a database run by mydb.
type MyDatabase struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   MyDatabaseSpec
	Status MyDatabaseStatus
}

// MyDatabaseSpec is the desired state of a MyDatabase.
type MyDatabaseSpec struct {
	Engine           Engine
	Version          string
	Replicas         int32
	StorageSize      resource.Quantity
	StorageClassName *string
	Resources        corev1.ResourceRequirements
	DeletionPolicy   DeletionPolicy
	Backup           *BackupPolicy
	RestoreFrom      *RestoreSource
	FailoverDelay    *metav1.Duration
	Replication      *ReplicationSpec
	Hibernate        bool
	Parameters       map[string]string
	TLS              *TLSSpec
	Databases        []DatabaseSpec
	Roles            []RoleSpec
}

// Ensure says whether a database or role of the spec is to exist.
type Ensure string

// The values of ensure.
const (
	EnsurePresent Ensure = "Present"
	EnsureAbsent  Ensure = "Absent"
)

// DatabaseSpec is a database mydb keeps on the primary (see v1).
type DatabaseSpec struct {
	Name         string
	Owner        string
	CharacterSet string
	Collation    string
	Ensure       Ensure
}

// RoleSpec is a user mydb keeps on the primary (see v1).
type RoleSpec struct {
	Name            string
	PasswordSecret  *SecretKeySelector
	Privileges      []DatabasePrivilege
	ConnectionLimit *int32
	Ensure          Ensure
}

// SecretKeySelector is a key of a Secret of the database's namespace.
type SecretKeySelector struct {
	Name string
	Key  string
}

// DatabasePrivilege is a role's access to one database.
type DatabasePrivilege struct {
	Database string
	Access   DatabaseAccess
}

// DatabaseAccess is a level of access to a database.
type DatabaseAccess string

// The levels of access.
const (
	DatabaseAccessReadOnly  DatabaseAccess = "ReadOnly"
	DatabaseAccessReadWrite DatabaseAccess = "ReadWrite"
	DatabaseAccessAll       DatabaseAccess = "All"
)

// TLSSpec is how a database's engines serve TLS to clients (see v1).
type TLSSpec struct {
	ServerCertificateSecret string
	ClientTLS               ClientTLSMode
}

// ClientTLSMode says whether clients must use TLS.
type ClientTLSMode string

// The client TLS modes.
const (
	ClientTLSPreferred ClientTLSMode = "Preferred"
	ClientTLSRequired  ClientTLSMode = "Required"
)

// ReplicationSpec says how the primary replicates to the other instances.
type ReplicationSpec struct {
	Mode ReplicationMode
}

// ReplicationMode is how a commit waits for the replicas.
type ReplicationMode string

// The replication modes.
const (
	ReplicationModeAsync ReplicationMode = "Async"
	ReplicationModeSync  ReplicationMode = "Sync"
)

// RestoreSource names the backup a new database starts from.
type RestoreSource struct {
	BackupName   string
	DatabaseName string
	PointInTime  *RecoveryTarget
}

// RecoveryTarget is where a restore stops replaying the archive.
type RecoveryTarget struct {
	Time   *metav1.Time
	LSN    string
	GTID   string
	Latest bool
}

// PointInTimeRecovery makes a database archive its write-ahead log.
type PointInTimeRecovery struct {
	ArchiveTimeout  *metav1.Duration
	RetentionWindow *metav1.Duration
}

// Recoverability is the window a restore to a point may target.
type Recoverability struct {
	FirstRecoverableTime *metav1.Time
	LastRecoverableTime  *metav1.Time
	LastArchivedWAL      string
	LastArchivedTime     *metav1.Time
	ArchivingSince       *metav1.Time
	PendingWALFiles      int32
}

// BackupPolicy schedules backups of a MyDatabase.
type BackupPolicy struct {
	Schedule            string
	Retention           int32
	FinalBackup         bool
	Destination         *BackupDestination
	PointInTimeRecovery *PointInTimeRecovery
}

// BackupDestination is where backups are written.
type BackupDestination struct {
	S3     *S3Destination
	Volume *VolumeDestination
}

// VolumeDestination gives each backup a PersistentVolumeClaim of its own.
type VolumeDestination struct {
	StorageClassName *string
	StorageSize      *resource.Quantity
}

// S3Destination is a bucket, and a prefix in it, of an S3-compatible store.
type S3Destination struct {
	Endpoint          string
	Region            string
	Bucket            string
	Prefix            string
	CredentialsSecret S3CredentialsSecret
	CABundle          *CABundleSource
}

// S3CredentialsSecret names a Secret and its keys of an S3 access key.
type S3CredentialsSecret struct {
	Name               string
	AccessKeyIDKey     string
	SecretAccessKeyKey string
}

// CABundleSource is a key of a Secret or of a ConfigMap.
type CABundleSource struct {
	SecretName    string
	ConfigMapName string
	Key           string
}

// DeleteDataFinalizer holds a MyDatabase whose spec.deletionPolicy is
// Delete until the controller has deleted its claims and credentials.
const DeleteDataFinalizer = "example.com/delete-data"

// FinalBackupFinalizer holds a MyDatabase whose spec.backup.finalBackup is
// set until its final backup has succeeded.
const FinalBackupFinalizer = "example.com/final-backup"

// SkipFinalBackupAnnotation, set to "true", lets a database with
// spec.backup.finalBackup be deleted without its final backup.
const SkipFinalBackupAnnotation = "mydb.example.com/skip-final-backup"

// MyDatabaseStatus is the observed state of a MyDatabase.
type MyDatabaseStatus struct {
	ObservedGeneration   int64
	Replicas             int32
	ReadyReplicas        int32
	Selector             string
	Endpoint             string
	Conditions           []metav1.Condition
	CurrentPrimary       string
	Instances            []InstanceStatus
	TargetPrimary        string
	TargetPrimaryTime    *metav1.MicroTime
	TargetPrimaryReason  string
	LastScheduleTime     *metav1.Time
	Recoverability       *Recoverability
	UpdateRevision       string
	UpdatedReplicas      int32
	CertificateAuthority *CertificateAuthorityStatus
	Databases            []ManagedObjectStatus
	Roles                []ManagedObjectStatus
}

// ManagedObjectState is where a database or role of the spec is.
type ManagedObjectState string

// The states of a database or role of the spec.
const (
	ManagedObjectPresent ManagedObjectState = "Present"
	ManagedObjectAbsent  ManagedObjectState = "Absent"
	ManagedObjectPending ManagedObjectState = "Pending"
	ManagedObjectFailed  ManagedObjectState = "Failed"
)

// ManagedObjectStatus is one database or role of the spec on the primary.
type ManagedObjectStatus struct {
	Name                  string
	State                 ManagedObjectState
	Message               string
	PasswordSecretVersion string
}

// CertificateAuthorityStatus is a database's root CA (see v1).
type CertificateAuthorityStatus struct {
	Fingerprint      string
	NotAfter         *metav1.Time
	Rotation         string
	Message          string
	LastRotationTime *metav1.Time
}

// The reasons status.targetPrimary is set for.
const (
	TargetPrimaryReasonSwitchover = "Switchover"
	TargetPrimaryReasonFailover   = "Failover"
	// TargetPrimaryReasonForcedFailover is a held-back failover an
	// operator forced.
	TargetPrimaryReasonForcedFailover = "ForcedFailover"
	// TargetPrimaryReasonRollingUpdate is the switchover of a rolling
	// update, which replaces the primary's pod last.
	TargetPrimaryReasonRollingUpdate = "RollingUpdate"
)

// ReasonFailoverWouldLoseWrites is the PrimaryChange condition's reason
// while the controller holds a failover back (see v1).
const ReasonFailoverWouldLoseWrites = "FailoverWouldLoseWrites"

// InstanceRole is what one instance of a database does.
type InstanceRole string

// The roles of an instance.
const (
	InstanceRolePrimary InstanceRole = "Primary"
	InstanceRoleReplica InstanceRole = "Replica"
)

// InstanceStatus is one instance of a database as mydb sees it.
type InstanceStatus struct {
	Name     string
	Address  string
	Role     InstanceRole
	Ready    bool
	Message  string
	Fenced   bool
	Position *InstancePosition
	Revision string
}

// InstancePosition is how far an instance's data goes.
type InstancePosition struct {
	Timeline int32
	LSN      string
	GTID     string
}

// MaxPositionLength bounds each string of an InstancePosition: validation
// refuses longer ones.
const MaxPositionLength = 1024

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseList is a list of MyDatabases.
type MyDatabaseList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []MyDatabase
}

// BackupPhase is where a backup is in its life.
type BackupPhase string

// The phases of a backup.
const (
	BackupPhasePending   BackupPhase = "Pending"
	BackupPhaseRunning   BackupPhase = "Running"
	BackupPhaseSucceeded BackupPhase = "Succeeded"
	BackupPhaseFailed    BackupPhase = "Failed"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseBackup is one backup of a MyDatabase.
type MyDatabaseBackup struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   MyDatabaseBackupSpec
	Status MyDatabaseBackupStatus
}

// BackupTarget says which instance of a database a backup reads.
type BackupTarget string

// The backup targets.
const (
	BackupTargetPrimary       BackupTarget = "Primary"
	BackupTargetPreferReplica BackupTarget = "PreferReplica"
)

// BackupFinalizer holds a backup until its dump is deleted.
const BackupFinalizer = "example.com/backup-data"

// MyDatabaseBackupSpec is what to back up.
type MyDatabaseBackupSpec struct {
	DatabaseName string
	Target       BackupTarget
}

// MyDatabaseBackupStatus is how the backup went.
type MyDatabaseBackupStatus struct {
	Phase          BackupPhase
	StartTime      *metav1.Time
	CompletionTime *metav1.Time
	Location       *BackupLocation
	Message        string
	DatabaseUID    types.UID
	Instance       string
	Role           InstanceRole
	Bytes          int64
	SizeBytes      int64
	Checksum       string
	Format         string
	Position       *InstancePosition
}

// BackupLocation is where a backup's dump is stored.
type BackupLocation struct {
	S3     *S3Location
	Volume *VolumeLocation
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

// VolumeLocation is the PersistentVolumeClaim holding a backup's dump.
type VolumeLocation struct {
	ClaimName string
}

// S3Location is one object of a bucket, and what it takes to read it.
type S3Location struct {
	Endpoint          string
	Region            string
	Bucket            string
	Key               string
	CredentialsSecret S3CredentialsSecret
	CABundle          *CABundleSource
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseBackupList is a list of MyDatabaseBackups.
type MyDatabaseBackupList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []MyDatabaseBackup
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseSwitchover is the body and the answer of POST
// mydatabases/<name>/switchover.
type MyDatabaseSwitchover struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   MyDatabaseSwitchoverSpec
	Status MyDatabaseSwitchoverStatus
}

// MyDatabaseSwitchoverSpec names the instance to switch over to.
type MyDatabaseSwitchoverSpec struct {
	TargetInstance string
	// AllowWriteLoss forces a failover the controller holds back.
	AllowWriteLoss bool
}

// MyDatabaseSwitchoverStatus is what the server decided.
type MyDatabaseSwitchoverStatus struct {
	OldPrimary string
	NewPrimary string
	StartTime  *metav1.MicroTime
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseConnectOptions are the query parameters of POST
// mydatabases/<name>/connect.
type MyDatabaseConnectOptions struct {
	metav1.TypeMeta

	// Instance is primary (or empty), replica, or an instance's name.
	Instance string
}

// The instances mydatabases/connect leads to by role.
const (
	ConnectToPrimary = "primary"
	ConnectToReplica = "replica"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// MyDatabaseCredentialRequest is the body and the answer of POST
// mydatabases/<name>/credentials: a short-lived database user. It is not
// stored.
type MyDatabaseCredentialRequest struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Spec   MyDatabaseCredentialRequestSpec
	Status MyDatabaseCredentialRequestStatus
}

// CredentialRole is what a short-lived user may do.
type CredentialRole string

// The roles of short-lived users.
const (
	CredentialRoleReadOnly  CredentialRole = "readonly"
	CredentialRoleReadWrite CredentialRole = "readwrite"
)

// MyDatabaseCredentialRequestSpec says which role, for how long.
type MyDatabaseCredentialRequestSpec struct {
	Role              CredentialRole
	ExpirationSeconds *int64
}

// MyDatabaseCredentialRequestStatus is the credential and where to use it.
type MyDatabaseCredentialRequestStatus struct {
	Username            string
	Password            string
	ExpirationTimestamp metav1.Time
	Database            string
	Host                string
	ReadOnlyHost        string
	Port                int32
	CACertificate       string
	Instance            string
	ServerName          string
}
