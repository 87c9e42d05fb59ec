// Package validation checks MyDatabase objects on create and update.
package validation

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/parameters"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const (
	// MaxNameLength leaves room for the suffixes of the children's names
	// (such as "-headless" and a StatefulSet's pod ordinals and revision
	// hashes) within the 63 characters of a DNS label.
	MaxNameLength = 45
	// MaxReplicas bounds spec.replicas.
	MaxReplicas = 9
	// maxMessageLength bounds the messages of status.instances, as
	// metav1.Condition bounds its own.
	maxMessageLength = 32768
)

var (
	// MaxStorageSize bounds spec.storageSize.
	MaxStorageSize = resource.MustParse("64Ti")
	// minMemoryLimit is below what either engine can start with.
	minMemoryLimit = resource.MustParse("256Mi")

	supportedDeletionPolicies = []string{string(example.DeletionPolicyRetain), string(example.DeletionPolicyDelete)}
	supportedReplicationModes = []string{string(example.ReplicationModeAsync), string(example.ReplicationModeSync)}
	supportedResources        = map[corev1.ResourceName]bool{
		corev1.ResourceCPU: true, corev1.ResourceMemory: true, corev1.ResourceEphemeralStorage: true,
	}
	// maxResources are the largest figures a kubelet can hold (an int64 of
	// millicores or of bytes). They also keep quantities below 1e21, from
	// which resource.Quantity's String() writes a different number ("1000E"
	// becomes "1"), so a larger figure would change when it is stored.
	maxResources = map[corev1.ResourceName]resource.Quantity{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(math.MaxInt64, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(math.MaxInt64, resource.BinarySI),
	}
)

// ValidateMyDatabaseName checks a MyDatabase's name: its children's names are
// made from it, and Service names must be DNS-1035 labels.
func ValidateMyDatabaseName(name string, prefix bool) []string {
	errs := apimachineryvalidation.NameIsDNS1035Label(name, prefix)
	if len(name) > MaxNameLength {
		errs = append(errs, validation.MaxLenError(MaxNameLength))
	}
	// A generated name gets a random suffix, so only whole names can collide.
	if suffix := names.ReservedSuffix(name); suffix != "" && !prefix {
		errs = append(errs, fmt.Sprintf("may not end in %q: it names a child of the database %q", suffix, strings.TrimSuffix(name, suffix)))
	}
	return errs
}

// ValidateMyDatabase checks a MyDatabase on create.
func ValidateMyDatabase(db *example.MyDatabase) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&db.ObjectMeta, true, ValidateMyDatabaseName, field.NewPath("metadata"))
	allErrs = append(allErrs, validateLabelsSize(db.Labels, field.NewPath("metadata", "labels"))...)
	allErrs = append(allErrs, validateMetadataTimes(&db.ObjectMeta, field.NewPath("metadata"))...)
	allErrs = append(allErrs, validateSpec(&db.Spec, field.NewPath("spec"))...)
	allErrs = append(allErrs, validateTLS(db.Name, &db.Spec, field.NewPath("spec", "tls"))...)
	allErrs = append(allErrs, validateRolesAndDatabases(db.Name, &db.Spec, field.NewPath("spec"))...)
	return allErrs
}

// validateTLS checks spec.tls: clientTLS is one of its modes; a server
// certificate of the user's own names a Secret that may hold one, for
// PostgreSQL.
func validateTLS(db string, spec *example.MyDatabaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.TLS == nil {
		return nil
	}
	switch mode := spec.TLS.ClientTLS; mode {
	case "", example.ClientTLSPreferred, example.ClientTLSRequired:
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("clientTLS"), mode, []example.ClientTLSMode{example.ClientTLSPreferred, example.ClientTLSRequired}))
	}
	if spec.TLS.ServerCertificateSecret == "" {
		return allErrs
	}
	p := fldPath.Child("serverCertificateSecret")
	name := spec.TLS.ServerCertificateSecret
	for _, msg := range apimachineryvalidation.NameIsDNSSubdomain(name, false) {
		allErrs = append(allErrs, field.Invalid(p, name, msg))
	}
	if slices.Contains([]string{names.Secret(db), names.InstanceSecret(db), names.CASecret(db), names.CertificatesSecret(db),
		names.CABundleSecret(db), names.CASecretCopy(db)}, name) {
		allErrs = append(allErrs, field.Invalid(p, name, "may not be one of the database's own Secrets, which mydb makes"))
	}
	return allErrs
}

// ValidateMyDatabaseUpdate checks an update of a MyDatabase's spec and metadata.
func ValidateMyDatabaseUpdate(db, old *example.MyDatabase) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&db.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateLabelsSize(db.Labels, field.NewPath("metadata", "labels"))...)
	allErrs = append(allErrs, validateMetadataTimes(&db.ObjectMeta, field.NewPath("metadata"))...)
	specPath := field.NewPath("spec")
	allErrs = append(allErrs, validateSpec(&db.Spec, specPath)...)
	allErrs = append(allErrs, validateTLS(db.Name, &db.Spec, specPath.Child("tls"))...)
	allErrs = append(allErrs, validateRolesAndDatabases(db.Name, &db.Spec, specPath)...)
	allErrs = append(allErrs, validateRolesAndDatabasesUpdate(&db.Spec, &old.Spec, specPath)...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(db.Spec.Engine, old.Spec.Engine, specPath.Child("engine"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(db.Spec.StorageClassName, old.Spec.StorageClassName, specPath.Child("storageClassName"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(db.Spec.RestoreFrom, old.Spec.RestoreFrom, specPath.Child("restoreFrom"))...)
	if db.Spec.StorageSize.Cmp(old.Spec.StorageSize) < 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("storageSize"),
			fmt.Sprintf("may not be less than the current size %s: volumes can grow but not shrink", old.Spec.StorageSize.String())))
	}
	if db.Spec.Engine == old.Spec.Engine && compareVersions(db.Spec.Version, old.Spec.Version) < 0 {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("version"),
			fmt.Sprintf("may not be downgraded from %s: %s cannot read data written by a newer version", old.Spec.Version, db.Spec.Engine)))
	}
	if db.Spec.Engine == example.EnginePostgres && old.Spec.Engine == example.EnginePostgres && compareVersions(db.Spec.Version, old.Spec.Version) > 0 &&
		db.Spec.Backup != nil && db.Spec.Backup.PointInTimeRecovery != nil {
		// The upgraded data is a new PostgreSQL system (pg_upgrade's
		// initdb), whose WAL and timeline history may not share the old
		// system's archive: a restore would follow the old one's timelines.
		allErrs = append(allErrs, field.Forbidden(specPath.Child("version"),
			fmt.Sprintf("may not change from %s to %s while spec.backup.pointInTimeRecovery is set: the upgraded database is a new PostgreSQL system whose WAL may not share the old one's archive; "+
				"unset pointInTimeRecovery, upgrade, then set it again with a new spec.backup.destination.s3.prefix (docs/operations.md#major-versions)",
				old.Spec.Version, db.Spec.Version)))
	}
	if db.Spec.Replicas > 1 {
		for _, name := range parameters.Lowered(string(db.Spec.Engine), old.Spec.Parameters, db.Spec.Parameters) {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("parameters").Key(name),
				"may not be lowered while the database has replicas: a PostgreSQL standby needs at least the primary's value, and a rolling update replaces the replicas first; "+
					"scale to 1 replica, lower it, then scale back"))
		}
	}
	return allErrs
}

// ValidateMyDatabaseStatusUpdate checks an update through /status.
func ValidateMyDatabaseStatusUpdate(db, old *example.MyDatabase) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&db.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	statusPath := field.NewPath("status")
	s := db.Status
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(s.ObservedGeneration, statusPath.Child("observedGeneration"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(s.Replicas), statusPath.Child("replicas"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateNonnegativeField(int64(s.ReadyReplicas), statusPath.Child("readyReplicas"))...)
	if s.ReadyReplicas > s.Replicas {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("readyReplicas"), s.ReadyReplicas, "may not be greater than status.replicas"))
	}
	allErrs = append(allErrs, metav1validation.ValidateConditions(s.Conditions, statusPath.Child("conditions"))...)
	allErrs = append(allErrs, validateConditionTimes(s.Conditions, statusPath.Child("conditions"))...)
	allErrs = append(allErrs, validateTimePtr(s.LastScheduleTime, statusPath.Child("lastScheduleTime"))...)
	if s.TargetPrimaryTime != nil {
		allErrs = append(allErrs, validateTime(s.TargetPrimaryTime.Time, statusPath.Child("targetPrimaryTime"))...)
	}
	allErrs = append(allErrs, validateInstances(s, statusPath)...)
	return allErrs
}

// validateInstances checks the instance list: a bounded list of pods by
// unique name, with known roles, at most one primary, which must be
// status.currentPrimary.
func validateInstances(s example.MyDatabaseStatus, statusPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	instancesPath := statusPath.Child("instances")
	// Scaling down leaves the removed pods' entries until they are gone.
	if max := 2 * MaxReplicas; len(s.Instances) > max {
		return append(allErrs, field.TooMany(instancesPath, len(s.Instances), max))
	}
	seen := map[string]bool{}
	primaries := 0
	for i, in := range s.Instances {
		p := instancesPath.Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(in.Name) {
			allErrs = append(allErrs, field.Invalid(p.Child("name"), in.Name, msg))
		}
		if seen[in.Name] {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), in.Name))
		}
		seen[in.Name] = true
		if in.Address != "" {
			for _, msg := range validation.IsValidIP(p.Child("address"), in.Address) {
				allErrs = append(allErrs, msg)
			}
		}
		switch in.Role {
		case "", example.InstanceRoleReplica:
		case example.InstanceRolePrimary:
			primaries++
			if in.Name != s.CurrentPrimary {
				allErrs = append(allErrs, field.Invalid(p.Child("role"), in.Role, "only status.currentPrimary may be the primary"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("role"), in.Role, []example.InstanceRole{example.InstanceRolePrimary, example.InstanceRoleReplica}))
		}
		if pos := in.Position; pos != nil {
			if len(pos.LSN) > example.MaxPositionLength {
				allErrs = append(allErrs, field.TooLong(p.Child("position", "lsn"), "", example.MaxPositionLength))
			}
			if len(pos.GTID) > example.MaxPositionLength {
				allErrs = append(allErrs, field.TooLong(p.Child("position", "gtid"), "", example.MaxPositionLength))
			}
		}
		if len(in.Message) > maxMessageLength {
			allErrs = append(allErrs, field.TooLong(p.Child("message"), "", maxMessageLength))
		}
	}
	if primaries > 1 {
		allErrs = append(allErrs, field.Invalid(instancesPath, primaries, "may have at most one primary"))
	}
	if s.CurrentPrimary != "" && !seen[s.CurrentPrimary] {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("currentPrimary"), s.CurrentPrimary, "must be one of status.instances"))
	}
	if s.TargetPrimary != "" && !seen[s.TargetPrimary] {
		allErrs = append(allErrs, field.Invalid(statusPath.Child("targetPrimary"), s.TargetPrimary, "must be one of status.instances"))
	}
	switch s.TargetPrimaryReason {
	case "", example.TargetPrimaryReasonSwitchover, example.TargetPrimaryReasonFailover, example.TargetPrimaryReasonForcedFailover, example.TargetPrimaryReasonRollingUpdate:
	default:
		allErrs = append(allErrs, field.NotSupported(statusPath.Child("targetPrimaryReason"), s.TargetPrimaryReason,
			[]string{example.TargetPrimaryReasonSwitchover, example.TargetPrimaryReasonFailover, example.TargetPrimaryReasonForcedFailover, example.TargetPrimaryReasonRollingUpdate}))
	}
	return allErrs
}

func validateSpec(spec *example.MyDatabaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	eng, known := engine.Lookup(string(spec.Engine))
	switch {
	case spec.Engine == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("engine"), fmt.Sprintf("must be one of %s", quoted(engine.Names()))))
	case !known:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("engine"), spec.Engine, engine.Names()))
	}
	// Versions belong to an engine: with no known engine, its error says it all.
	switch {
	case !known:
	case spec.Version == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("version"), "must name a supported version"))
	case !eng.Supports(spec.Version):
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("version"), spec.Version, eng.Versions()))
	}
	if spec.Replicas < 1 || spec.Replicas > MaxReplicas {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("replicas"), spec.Replicas, fmt.Sprintf("must be between 1 and %d", MaxReplicas)))
	}
	allErrs = append(allErrs, validateStorageSize(spec.StorageSize, fldPath.Child("storageSize"))...)
	if spec.StorageClassName != nil {
		for _, msg := range validation.IsDNS1123Subdomain(*spec.StorageClassName) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("storageClassName"), *spec.StorageClassName, msg))
		}
	}
	allErrs = append(allErrs, validateResources(&spec.Resources, fldPath.Child("resources"))...)
	if !slices.Contains(supportedDeletionPolicies, string(spec.DeletionPolicy)) {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("deletionPolicy"), spec.DeletionPolicy, supportedDeletionPolicies))
	}
	if spec.Backup != nil {
		allErrs = append(allErrs, validateBackupPolicy(spec.Backup, spec.Engine, fldPath.Child("backup"))...)
	}
	if d := spec.FailoverDelay; d != nil && (d.Duration < MinFailoverDelay || d.Duration > MaxFailoverDelay) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("failoverDelay"), d.Duration.String(),
			fmt.Sprintf("must be between %s and %s", MinFailoverDelay, MaxFailoverDelay)))
	}
	if known {
		allErrs = append(allErrs, validateParameters(spec.Engine, spec.Parameters, fldPath.Child("parameters"))...)
	}
	if r := spec.Replication; r != nil {
		p := fldPath.Child("replication", "mode")
		switch r.Mode {
		case "", example.ReplicationModeAsync:
		case example.ReplicationModeSync:
			// With no replica a synchronous commit could never return.
			if spec.Replicas < 2 {
				allErrs = append(allErrs, field.Invalid(p, r.Mode,
					"Sync needs replicas of 2 or more: a commit waits for a replica to have it"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p, r.Mode, supportedReplicationModes))
		}
	}
	if r := spec.RestoreFrom; r != nil {
		p := fldPath.Child("restoreFrom", "backupName")
		switch {
		case r.BackupName == "" && r.DatabaseName == "":
			allErrs = append(allErrs, field.Required(p, "must name a MyDatabaseBackup in this namespace (or databaseName, with pointInTime)"))
		case r.BackupName != "" && r.DatabaseName != "":
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("restoreFrom", "databaseName"), "may not be set with backupName"))
		case r.DatabaseName != "" && r.PointInTime == nil:
			allErrs = append(allErrs, field.Required(fldPath.Child("restoreFrom", "pointInTime"), "must be set with databaseName: mydb picks the backup before it"))
		}
		if r.BackupName != "" {
			for _, msg := range ValidateBackupName(r.BackupName, false) {
				allErrs = append(allErrs, field.Invalid(p, r.BackupName, msg))
			}
		}
		if r.DatabaseName != "" {
			for _, msg := range ValidateMyDatabaseName(r.DatabaseName, false) {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("restoreFrom", "databaseName"), r.DatabaseName, msg))
			}
		}
		allErrs = append(allErrs, validateRecoveryTarget(r.PointInTime, spec.Engine, fldPath.Child("restoreFrom", "pointInTime"))...)
	}
	return allErrs
}

// The bounds of spec.backup.pointInTimeRecovery.archiveTimeout: below 10s
// an idle database fills its bucket with a 16 MiB file every few seconds;
// above an hour its window lags too far behind.
const (
	MinArchiveTimeout = 10 * time.Second
	MaxArchiveTimeout = time.Hour
)

// The bounds of spec.backup.pointInTimeRecovery.retentionWindow.
const (
	MinRetentionWindow = time.Hour
	MaxRetentionWindow = 10 * 365 * 24 * time.Hour
)

var lsnPattern = regexp.MustCompile(`^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$`)

func validateRecoveryTarget(t *example.RecoveryTarget, engine example.Engine, fldPath *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	var allErrs field.ErrorList
	set := 0
	if t.Time != nil {
		set++
	}
	if t.LSN != "" {
		set++
		switch {
		case engine != example.EnginePostgres:
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("lsn"), fmt.Sprintf("is PostgreSQL's: a %s database is restored to a time or the latest", engine)))
		case !lsnPattern.MatchString(t.LSN):
			allErrs = append(allErrs, field.Invalid(fldPath.Child("lsn"), t.LSN, "must be a log sequence number such as 0/3000148"))
		}
	}
	if t.GTID != "" {
		set++
		allErrs = append(allErrs, validateGTIDTarget(t.GTID, engine, fldPath.Child("gtid"))...)
	}
	if t.Latest {
		set++
	}
	if set != 1 {
		allErrs = append(allErrs, field.Invalid(fldPath, "", "exactly one of time, lsn, gtid and latest must be set"))
	}
	return allErrs
}

// validateGTIDTarget checks a GTID target is one GTID as engine writes it.
func validateGTIDTarget(gtid string, engine example.Engine, fldPath *field.Path) field.ErrorList {
	g, err := binlog.ParseGTID(gtid)
	switch {
	case engine == example.EnginePostgres:
		return field.ErrorList{field.Forbidden(fldPath, "is MariaDB's and MySQL's: a postgres database is restored to a time, an LSN or the latest")}
	case engine == example.EngineMySQL && (err != nil || g.UUID == ""):
		return field.ErrorList{field.Invalid(fldPath, gtid, "must be one MySQL GTID, source_uuid:sequence, such as 3e11fa47-71ca-11e1-9e33-c80aa9429562:4711")}
	case engine == example.EngineMariaDB && (err != nil || g.UUID != ""):
		return field.ErrorList{field.Invalid(fldPath, gtid, "must be one MariaDB GTID, domain-server-sequence, such as 0-1-4711")}
	}
	return nil
}

// The bounds of spec.failoverDelay: below 5s a slow probe or a short
// network blip would promote a replica; above 10m writes stay down too long.
const (
	MinFailoverDelay = 5 * time.Second
	MaxFailoverDelay = 10 * time.Minute
)

// MaxBackupRetention bounds spec.backup.retention.
const MaxBackupRetention = 100

func validateBackupPolicy(p *example.BackupPolicy, engine example.Engine, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if p.Destination != nil {
		allErrs = append(allErrs, validateDestination(p.Destination, fldPath.Child("destination"))...)
	} else if p.Schedule != "" || p.FinalBackup {
		allErrs = append(allErrs, field.Required(fldPath.Child("destination"), "must say where backups are written when schedule or finalBackup is set"))
	}
	if pitr := p.PointInTimeRecovery; pitr != nil {
		pp := fldPath.Child("pointInTimeRecovery")
		if p.Destination == nil || p.Destination.S3 == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("destination", "s3"), "must be set with pointInTimeRecovery: the archive is kept in the bucket, next to the backups"))
		}
		if t := pitr.ArchiveTimeout; t != nil && (t.Duration < MinArchiveTimeout || t.Duration > MaxArchiveTimeout) {
			allErrs = append(allErrs, field.Invalid(pp.Child("archiveTimeout"), t.Duration.String(),
				fmt.Sprintf("must be between %s and %s", MinArchiveTimeout, MaxArchiveTimeout)))
		}
		if w := pitr.RetentionWindow; w != nil && (w.Duration < MinRetentionWindow || w.Duration > MaxRetentionWindow) {
			allErrs = append(allErrs, field.Invalid(pp.Child("retentionWindow"), w.Duration.String(),
				fmt.Sprintf("must be between %s and %s", MinRetentionWindow, MaxRetentionWindow)))
		}
	}
	if p.Schedule == "" {
		return allErrs // backups on demand and the final one only
	}
	if _, err := ParseSchedule(p.Schedule); err != nil {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("schedule"), p.Schedule, "must be a cron schedule: "+err.Error()))
	}
	if p.Retention < 1 || p.Retention > MaxBackupRetention {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("retention"), p.Retention, fmt.Sprintf("must be between 1 and %d", MaxBackupRetention)))
	}
	return allErrs
}

// ParseSchedule parses a standard five-field cron schedule, as CronJobs do;
// time zones are not allowed in it (schedules run in UTC).
func ParseSchedule(schedule string) (cron.Schedule, error) {
	if strings.Contains(schedule, "TZ") {
		return nil, fmt.Errorf("time zones may not be set; schedules run in UTC")
	}
	return cron.ParseStandard(schedule)
}

// validateLabelsSize bounds labels like ValidateObjectMeta bounds
// annotations, so labels alone cannot push an object past etcd's request limit.
func validateLabelsSize(labels map[string]string, fldPath *field.Path) field.ErrorList {
	total := 0
	for k, v := range labels {
		total += len(k) + len(v)
	}
	if total > apimachineryvalidation.TotalAnnotationSizeLimitB {
		return field.ErrorList{field.TooLong(fldPath, "", apimachineryvalidation.TotalAnnotationSizeLimitB)}
	}
	return nil
}

// maxQuantityExponent bounds the decimal exponent of a quantity before it is
// compared: comparing "1e16000000" with anything builds a 53-million-bit
// integer and takes seconds.
const maxQuantityExponent = 30

func quantityTooLarge(q resource.Quantity) bool {
	return q.AsDec().Scale() < -maxQuantityExponent
}

func validateStorageSize(size resource.Quantity, fldPath *field.Path) field.ErrorList {
	switch {
	case quantityTooLarge(size):
		return field.ErrorList{field.Invalid(fldPath, "", "may not be greater than "+MaxStorageSize.String())}
	case size.IsZero():
		return field.ErrorList{field.Required(fldPath, "must be a quantity of bytes greater than 0, such as 50Gi")}
	case size.Sign() < 0:
		return field.ErrorList{field.Invalid(fldPath, size.String(), "must be greater than 0")}
	case size.Cmp(MaxStorageSize) > 0:
		return field.ErrorList{field.Invalid(fldPath, size.String(), "may not be greater than "+MaxStorageSize.String())}
	}
	return nil
}

func validateResources(r *corev1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, list := range []struct {
		name  string
		items corev1.ResourceList
	}{{"requests", r.Requests}, {"limits", r.Limits}} {
		for name, q := range list.items {
			p := fldPath.Child(list.name).Key(string(name))
			if !supportedResources[name] {
				allErrs = append(allErrs, field.NotSupported(p, name, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}))
				continue
			}
			if quantityTooLarge(q) {
				allErrs = append(allErrs, field.Invalid(p, "", fmt.Sprintf("must be less than 1e%d", maxQuantityExponent)))
				continue
			}
			if q.Sign() < 0 {
				allErrs = append(allErrs, field.Invalid(p, q.String(), "must be greater than or equal to 0"))
			}
			if ceiling := maxResources[name]; q.Cmp(ceiling) > 0 {
				// Not q.String(): beyond 1e21 it is a different number.
				allErrs = append(allErrs, field.Invalid(p, "", "may not be greater than "+ceiling.String()))
			}
		}
	}
	// Comparing requests with limits needs sane quantities.
	if len(allErrs) == 0 {
		for name, request := range r.Requests {
			if limit, ok := r.Limits[name]; ok && request.Cmp(limit) > 0 {
				allErrs = append(allErrs, field.Invalid(fldPath.Child("requests").Key(string(name)), request.String(),
					fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		}
	}
	if len(r.Claims) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("claims"), "may not be set: database pods do not use dynamic resource claims"))
	}
	return allErrs
}

// Warnings returns what is allowed in a spec but unwise, for the API's
// Warning headers; old is nil on create.
func Warnings(db, old *example.MyDatabase) []string {
	var warnings []string
	spec := &db.Spec
	if eng, ok := engine.Lookup(string(spec.Engine)); ok {
		if reason, deprecated := eng.Deprecated[spec.Version]; deprecated {
			warnings = append(warnings, "spec.version: "+reason)
		}
	}
	if limit, ok := spec.Resources.Limits[corev1.ResourceMemory]; ok && !quantityTooLarge(limit) && limit.Cmp(minMemoryLimit) < 0 {
		warnings = append(warnings, fmt.Sprintf("spec.resources.limits.memory: %s is below the %s a database engine needs to start", limit.String(), minMemoryLimit.String()))
	}
	if spec.DeletionPolicy == example.DeletionPolicyDelete && (old == nil || old.Spec.DeletionPolicy != example.DeletionPolicyDelete) {
		warnings = append(warnings, "spec.deletionPolicy: Delete removes the volumes, and all data on them, when this MyDatabase is deleted")
	}
	if spec.Replicas == 1 && old != nil && old.Spec.Replicas > 1 {
		warnings = append(warnings, "spec.replicas: a single replica has no standby and no PodDisruptionBudget; a node drain takes the database down")
	}
	return warnings
}

// compareVersions compares dotted numeric versions such as "8.4" and "17";
// a part that is not a number compares as 0.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func quoted(values []string) string {
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// Bounds and default of a credential's lifetime (spec.expirationSeconds of
// a MyDatabaseCredentialRequest).
const (
	MinCredentialSeconds     = 60
	MaxCredentialSeconds     = 24 * 60 * 60
	DefaultCredentialSeconds = 60 * 60
)

// ValidateCredentialRequest checks a MyDatabaseCredentialRequest's spec.
func ValidateCredentialRequest(req *example.MyDatabaseCredentialRequest) field.ErrorList {
	var allErrs field.ErrorList
	spec := field.NewPath("spec")
	switch req.Spec.Role {
	case example.CredentialRoleReadOnly, example.CredentialRoleReadWrite:
	case "":
		allErrs = append(allErrs, field.Required(spec.Child("role"), "must be readonly or readwrite"))
	default:
		allErrs = append(allErrs, field.NotSupported(spec.Child("role"), req.Spec.Role,
			[]example.CredentialRole{example.CredentialRoleReadOnly, example.CredentialRoleReadWrite}))
	}
	if s := req.Spec.ExpirationSeconds; s != nil && (*s < MinCredentialSeconds || *s > MaxCredentialSeconds) {
		allErrs = append(allErrs, field.Invalid(spec.Child("expirationSeconds"), *s,
			fmt.Sprintf("must be between %d and %d (24 hours)", MinCredentialSeconds, MaxCredentialSeconds)))
	}
	return allErrs
}

// MaxParameters bounds spec.parameters.
const MaxParameters = 64

// validateParameters checks each of spec.parameters against the engine's
// catalog (package parameters), in name order.
func validateParameters(eng example.Engine, params map[string]string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if len(params) > MaxParameters {
		return append(allErrs, field.TooMany(fldPath, len(params), MaxParameters))
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if msg := parameters.Check(string(eng), name, params[name]); msg != "" {
			allErrs = append(allErrs, field.Invalid(fldPath.Key(name), params[name], msg))
		}
	}
	return allErrs
}
