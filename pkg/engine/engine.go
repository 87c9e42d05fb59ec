// Package engine holds everything the controller and the API server know
// about a database engine: supported versions, images, ports, paths,
// credentials and probes, one file per engine. An engine needs more than
// its file here: docs/instance.md ("Adding an engine") lists every place.
package engine

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Keys of the credentials Secret mydb generates for every database; each
// becomes a file of the same name in SecretsDir.
const (
	// SecretKeyUsername and SecretKeyPassword are the application's user,
	// which owns SecretKeyDatabase and is not a superuser.
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	SecretKeyDatabase = "database"
	// SecretKeySuperuserPassword is the engine's administrator's (postgres,
	// root) password, for the tools that need one.
	SecretKeySuperuserPassword = "superuser-password"
	// SecretKeyReplicationPassword is the replication user's, with which
	// replicas clone and follow the primary.
	SecretKeyReplicationPassword = "replication-password"
	// SecretKeyCA is the database's root CA certificate (PEM), which the
	// engines' certificates chain to: clients verify the server with it.
	SecretKeyCA = "ca.crt"
)

// ApplicationUser and ApplicationDatabase are the application's user and
// database mydb makes in every new database (the credentials Secret names
// them).
const (
	ApplicationUser     = "app"
	ApplicationDatabase = "app"
)

// Where the instance manager lives and works in every database pod.
const (
	// InstanceDirectory is the emptyDir an init container copies
	// mydb-instance into; the database container runs it from there.
	InstanceDirectory = "/mydb"
	// InstanceManager is mydb-instance's path in the database container.
	InstanceManager = InstanceDirectory + "/mydb-instance"
	// SecretsDir is where the credentials Secret is mounted, one file a key.
	SecretsDir = "/etc/mydb/secrets"
	// RunDir holds the engine's sockets and the manager's scratch files.
	RunDir = "/run/mydb"
	// StatusPortName names the instance manager's port (pkg/instance/api's
	// Port) in pod specs.
	StatusPortName = "status"
	// MetricsPortName names the instance manager's metrics port
	// (pkg/instance/api's MetricsPort) in pod specs, for PodMonitors.
	MetricsPortName = "metrics"
	// AdminPortName names the admin interface (Spec.AdminPort).
	AdminPortName = "admin"
)

// InitDirectory is where both engines' images load *.sql files when they
// initialize an empty data directory, before the server first accepts
// connections (and so before a replica is ready).
const InitDirectory = "/docker-entrypoint-initdb.d"

// Spec describes one database engine: what mydb runs it with.
type Spec struct {
	// Name is the value of spec.engine.
	Name string
	// DefaultVersion is the version a MyDatabase gets when spec.version is empty.
	DefaultVersion string
	// Images maps every supported version (a release line such as "8.4") to
	// the image pinned for it, so a version never floats like ":latest".
	Images map[string]string
	// Deprecated maps a supported version that users should move off to why.
	Deprecated map[string]string
	// Port is the port clients connect to.
	Port int32
	// AdminPort, when set, is the admin interface (MySQL's own; for
	// MariaDB the instance manager's relay), where replicas and clones
	// connect while clients get a server certificate of the user's own:
	// it serves the instance's certificate. Only the database's own pods
	// reach it (the NetworkPolicy).
	AdminPort int32
	// DataPath is where the data volume is mounted; the instance manager
	// keeps the engine's files one directory below it, so a lost+found at
	// the volume's root is harmless.
	DataPath string
	// UID is the user the engine's image runs as.
	UID int64
}

var engines = map[string]Spec{}

func register(e Spec) { engines[e.Name] = e }

// Lookup returns the spec of the engine with the given name.
func Lookup(name string) (Spec, bool) {
	e, ok := engines[name]
	return e, ok
}

// Names returns the names of all engines, sorted.
func Names() []string {
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Versions returns the supported versions of the engine, sorted.
func (e Spec) Versions() []string {
	versions := make([]string, 0, len(e.Images))
	for v := range e.Images {
		versions = append(versions, v)
	}
	sort.Strings(versions)
	return versions
}

// Supports tells whether version is one of the engine's supported versions.
func (e Spec) Supports(version string) bool {
	_, ok := e.Images[version]
	return ok
}

// fromSecret is an environment variable read from a key of a Secret.
func fromSecret(name, secretName, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: key},
	}}
}

// PodSecurityContext runs the engine's pods as its image's user, never root.
func (e Spec) PodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(e.UID),
		RunAsGroup:     ptr.To(e.UID),
		FSGroup:        ptr.To(e.UID),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// ContainerSecurityContext is the restricted context of every container mydb runs.
func ContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
