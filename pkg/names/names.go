// Package names holds the names, labels and annotations mydb gives the
// objects it makes, so the controllers, the API server and the kubectl plugin
// agree on them without importing each other. It imports nothing of mydb's.
//
// Every child of a MyDatabase is named after it. Within one kind, a child's
// name is the database's name followed by a suffix of that kind; no suffix
// ends another one (see Suffixes), and a database's own name may not end in
// one, so the children of two databases can never share a name.
package names

import (
	"fmt"
	"strconv"
	"strings"
)

// Labels every child carries (the app.kubernetes.io recommended labels).
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelVersion   = "app.kubernetes.io/version"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// ManagedBy is the value of LabelManagedBy on every child; the
	// controllers' informers watch only objects that carry it.
	ManagedBy = "mydb"
)

// LabelRole is on every pod of a database: the controller sets it to the
// role it gave the instance, and the Services select by it.
const LabelRole = "mydb.example.com/role"

// Values of LabelRole.
const (
	RolePrimary = "primary"
	RoleReplica = "replica"
)

// Values of LabelComponent.
const (
	ComponentDatabase = "database"
)

// Prefix begins the key of every label and annotation mydb reads on its own
// objects; the controllers' caches keep no other (manager.TrimForCache).
const Prefix = "mydb.example.com/"

// Annotations and labels users and the controllers set on mydb's own objects.
const (
	// PausedAnnotation, set to "true" on a MyDatabase, stops the controller
	// from touching its children until it is removed.
	PausedAnnotation = "mydb.example.com/paused"
	// RestartedAtAnnotation on a MyDatabase (kubectl mydb restart sets it
	// to the time) is copied onto its pod template: a new value is a
	// rolling restart, primary last.
	RestartedAtAnnotation = "mydb.example.com/restarted-at"
	// RotateCAAnnotation on a MyDatabase (kubectl mydb rotate-ca sets it
	// to the time): a new value replaces the database's root CA, without a
	// restart (pkg/carotation).
	RotateCAAnnotation = "mydb.example.com/rotate-ca"
	// CARotationPhaseSinceAnnotation on a database's CA Secret is when the
	// rotation's phase began; CARotatedForAnnotation the RotateCAAnnotation
	// value the last rotation began for.
	CARotationPhaseSinceAnnotation = "mydb.example.com/ca-rotation-phase-since"
	CARotatedForAnnotation         = "mydb.example.com/ca-rotated-for"

	// ScheduleLabel marks a backup the schedule of the named database took.
	ScheduleLabel = "mydb.example.com/schedule"
	// ScheduledForAnnotation is the time a scheduled backup was due, in RFC 3339.
	ScheduledForAnnotation = "mydb.example.com/scheduled-for"
	// FinalBackupLabel marks the final backup of the named database.
	FinalBackupLabel = "mydb.example.com/final-backup-of"
)

// Suffixes of the names of a database's children that share a kind with the
// children of other databases. A database's own name may not end in one
// (ReservedSuffix), and none ends another, so <a><s1> == <b><s2> only when
// a == b and s1 == s2.
var Suffixes = []string{headlessSuffix, readWriteSuffix, readOnlySuffix, anyInstanceSuffix}

const (
	headlessSuffix     = "-headless"
	readWriteSuffix    = "-rw"
	readOnlySuffix     = "-ro"
	anyInstanceSuffix  = "-r"
	instanceSuffix     = "-instance"
	secretSuffix       = "-credentials"
	caSuffix           = "-ca"
	instanceSecrets    = "-instance-secrets"
	certificatesSuffix = "-certificates"
	caBundleSuffix     = "-ca-bundle"
	caCopySuffix       = "-ca-copy"
	finalSuffix        = "-final"
	dataVolume         = "data"
)

// ReservedSuffix returns the suffix of Suffixes that name ends in, or "".
func ReservedSuffix(name string) string {
	for _, s := range Suffixes {
		if strings.HasSuffix(name, s) {
			return s
		}
	}
	return ""
}

// Names of a database's children, from the database's name.

// Secret is the database's credentials Secret, the one applications
// mount: the application user's credentials and the CA bundle.
func Secret(db string) string { return db + secretSuffix }

// InstanceSecret is what only the database's own pods mount: all the
// credentials (superuser and replication too) and the issuer the instances
// mint their certificates with.
func InstanceSecret(db string) string { return db + instanceSecrets }

// CertificatesSecret is the issuer the instances mint their certificates
// with and the roots they trust, as a rotation of the database's CA
// changes them: only the database's pods mount it, next to the
// InstanceSecret's passwords, and the kubelet updates it in place.
func CertificatesSecret(db string) string { return db + certificatesSuffix }

// CABundleSecret is the database's CA bundle (ca.crt) for applications,
// updated in place through a rotation of the CA.
func CABundleSecret(db string) string { return db + caBundleSuffix }

// CASecret holds the database's root CA with its key: the controller
// alone reads it.
func CASecret(db string) string { return db + caSuffix }

// CASecretCopy stands in for the CA Secret while an immutable one (an
// earlier mydb's) is made again, mutable.
func CASecretCopy(db string) string { return db + caCopySuffix }

// HeadlessService gives each pod of the database a DNS name.
func HeadlessService(db string) string { return db + headlessSuffix }

// ClientService routes to the primary, like ReadWriteService: it is the
// name status.endpoint has always given clients.
func ClientService(db string) string { return db }

// ReadWriteService routes to the primary.
func ReadWriteService(db string) string { return db + readWriteSuffix }

// ReadOnlyService routes to the ready replicas.
func ReadOnlyService(db string) string { return db + readOnlySuffix }

// AnyInstanceService routes to every ready instance, primary or replica.
func AnyInstanceService(db string) string { return db + anyInstanceSuffix }

// InstanceIdentity names the ServiceAccount the database's instance managers
// run as, and the Role and RoleBinding that let them read their database.
func InstanceIdentity(db string) string { return db + instanceSuffix }

// StatefulSet runs the database's pods.
func StatefulSet(db string) string { return db }

// NetworkPolicy limits who reaches the database's pods. (A database's name
// is a DNS label; a NetworkPolicy's may hold dots.)
func NetworkPolicy(db string) string { return db }

// DumpNetworkPolicy limits who reaches the database's dump-server pods:
// the dot keeps it from ever being another database's NetworkPolicy.
func DumpNetworkPolicy(db string) string { return db + ".dump" }

// PodDisruptionBudget limits voluntary disruptions of the database's pods.
func PodDisruptionBudget(db string) string { return db }

// DataVolume is the name of the StatefulSet's claim template, so replica i's
// claim is data-<db>-<i>.
const DataVolume = dataVolume

// DataClaim is replica ordinal's data claim.
func DataClaim(db string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", dataVolume, StatefulSet(db), ordinal)
}

// FinalBackup is the backup taken before the database is deleted, at the
// deletion that began at unix seconds: a database of the same name deleted
// later gets another. (Base 36 has no "-", so the names of two databases'
// final backups never meet.)
func FinalBackup(db string, deletion int64) string {
	return db + finalSuffix + "-" + strconv.FormatInt(deletion, 36)
}
