package mydatabase

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// SelectorLabels select a database's pods; none of them may change over
// the database's life (the engine is immutable).
func SelectorLabels(db *examplev1.MyDatabase) map[string]string {
	return map[string]string{
		names.LabelName:      string(db.Spec.Engine),
		names.LabelInstance:  db.Name,
		names.LabelManagedBy: names.ManagedBy,
	}
}

func childLabels(db *examplev1.MyDatabase) map[string]string {
	labels := SelectorLabels(db)
	labels[names.LabelComponent] = names.ComponentDatabase
	return labels
}

// versionedLabels are the labels of what runs a version: the StatefulSet
// and its pods. The other children keep theirs across upgrades.
func versionedLabels(db *examplev1.MyDatabase) map[string]string {
	labels := childLabels(db)
	labels[names.LabelVersion] = db.Spec.Version
	return labels
}

func childMeta(db *examplev1.MyDatabase, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       db.Namespace,
		Labels:          childLabels(db),
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(db, examplev1.SchemeGroupVersion.WithKind("MyDatabase"))},
	}
}

// dataChildMeta is the metadata of a child that holds what the data needs:
// the credentials. It carries no owner reference, so the garbage collector
// never deletes it because its MyDatabase reads as absent (an emptied or
// rolled-back etcd); the controller deletes it itself when the database is
// deleted under deletionPolicy Delete (finalize). The claims, made by the
// StatefulSet, carry none either (its retention policy is Retain).
func dataChildMeta(db *examplev1.MyDatabase, name string) metav1.ObjectMeta {
	meta := childMeta(db, name)
	meta.OwnerReferences = nil
	return meta
}

func randomPassword() ([]byte, error) {
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return nil, fmt.Errorf("generating a password: %w", err)
	}
	return []byte(base64.RawURLEncoding.EncodeToString(buf)), nil
}

// newServices returns the database's Services: the headless one gives
// every pod a DNS name; the others route by the role label the controller
// puts on the pods. <name> is the same as <name>-rw: it is the endpoint
// clients have always been given.
func newServices(db *examplev1.MyDatabase, eng engine.Spec) []*corev1.Service {
	service := func(name string, role string, headless bool) *corev1.Service {
		selector := SelectorLabels(db)
		if role != "" {
			selector[names.LabelRole] = role
		}
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: childMeta(db, name),
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Selector: selector, Ports: servicePorts(eng)},
		}
		if headless {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
			// Replicas must reach the primary before they are ready.
			svc.Spec.PublishNotReadyAddresses = true
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: engine.StatusPortName,
				Port: api.Port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(engine.StatusPortName)})
		}
		return svc
	}
	return []*corev1.Service{
		service(names.HeadlessService(db.Name), "", true),
		service(names.ClientService(db.Name), names.RolePrimary, false),
		service(names.ReadWriteService(db.Name), names.RolePrimary, false),
		service(names.ReadOnlyService(db.Name), names.RoleReplica, false),
		service(names.AnyInstanceService(db.Name), "", false),
	}
}

func servicePorts(eng engine.Spec) []corev1.ServicePort {
	return []corev1.ServicePort{{
		Name: eng.Name, Port: eng.Port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(eng.Name),
	}}
}

// endpoint is where clients reach the database.
func endpoint(db *examplev1.MyDatabase, eng engine.Spec) string {
	return fmt.Sprintf("%s.%s.svc:%d", names.ClientService(db.Name), db.Namespace, eng.Port)
}

// NewStatefulSet is the StatefulSet of db: its pods run the engine's image
// with mydb-instance copied in by an init container. (Exported for the e2e
// test of the admission policy, which checks that the very StatefulSet
// mydb makes is admitted and that anything more is not.)
func NewStatefulSet(db *examplev1.MyDatabase, eng engine.Spec, images engine.ImageOverrides, instanceImage string, restore bool) *appsv1.StatefulSet {
	meta := childMeta(db, names.StatefulSet(db.Name))
	meta.Labels = versionedLabels(db)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(desiredReplicas(db)),
			ServiceName: names.HeadlessService(db.Name),
			Selector:    &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
			// Replicas wait for the primary themselves, and a primary that
			// fails must not hold back the others' pods.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			// The controller replaces the pods itself, primary last
			// (rollout.go): the StatefulSet's own rolling update would
			// restart the primary whenever its ordinal came.
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			// The claims are never owned: with WhenDeleted Delete the
			// StatefulSet would own them, and the garbage collector would
			// take them with it whenever the MyDatabase reads as absent.
			// Under deletionPolicy Delete the controller deletes them when
			// the database is deleted (finalize). Scaling down keeps them,
			// so scaling back up finds the data.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: versionedLabels(db), Annotations: restartedAt(db)},
				Spec:       podSpec(db, eng, images.Image(eng, db.Spec.Version), instanceImage, restore),
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: names.DataVolume, Labels: SelectorLabels(db)},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: db.Spec.StorageClassName,
					Resources: corev1.VolumeResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceStorage: db.Spec.StorageSize},
					},
				},
			}},
		},
	}
}

// restartedAt is the pod template's annotation of a restart asked for
// (nil when none was).
func restartedAt(db *examplev1.MyDatabase) map[string]string {
	if at := db.Annotations[names.RestartedAtAnnotation]; at != "" {
		return map[string]string{names.RestartedAtAnnotation: at}
	}
	return nil
}

// Volumes of a database pod besides its data claim.
const (
	instanceVolume = "instance-manager"
	secretsVolume  = "credentials"
	runVolume      = "run"
	tmpVolume      = "tmp"
)

// podSpec runs the engine's official image with mydb-instance as its
// entrypoint: an init container copies the manager out of mydb's image into
// an emptyDir, and the manager bootstraps or clones, runs and follows the
// engine, taking its role from the database's status.
func podSpec(db *examplev1.MyDatabase, eng engine.Spec, image, instanceImage string, restore bool) corev1.PodSpec {
	emptyDir := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	statusProbe := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString(engine.StatusPortName), Scheme: corev1.URISchemeHTTPS}}
	}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	init := corev1.Container{
		Image:           instanceImage,
		Command:         []string{"/mydb-instance", "copy", engine.InstanceDirectory},
		VolumeMounts:    []corev1.VolumeMount{{Name: instanceVolume, MountPath: engine.InstanceDirectory}},
		SecurityContext: engine.ContainerSecurityContext(),
	}
	database := corev1.Container{
		Image:   image,
		Command: []string{engine.InstanceManager},
		Args: []string{
			"--engine=" + eng.Name,
			"--database=" + db.Name,
			fmt.Sprintf("--port=%d", eng.Port),
			"--data-root=" + eng.DataPath,
			"--run-dir=" + engine.RunDir,
			"--secrets-dir=" + engine.SecretsDir,
			fmt.Sprintf("--status-address=:%d", api.Port),
			fmt.Sprintf("--metrics-address=:%d", api.MetricsPort),
			// The pod's loopback is its own: kubectl port-forward connects there.
			"--listen-loopback",
		},
		Env: []corev1.EnvVar{
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("POD_IP", "status.podIP"),
			// The manager reports it: a pod made anew under this name (a
			// rolling update) is told apart from the process of the old one.
			fieldEnv("POD_UID", "metadata.uid"),
		},
		Ports: []corev1.ContainerPort{
			{Name: eng.Name, ContainerPort: eng.Port, Protocol: corev1.ProtocolTCP},
			{Name: engine.StatusPortName, ContainerPort: api.Port, Protocol: corev1.ProtocolTCP},
			{Name: engine.MetricsPortName, ContainerPort: api.MetricsPort, Protocol: corev1.ProtocolTCP},
		},
		// Ready means the instance serves its role: a primary accepts
		// writes, a replica streams within the lag bound.
		ReadinessProbe: &corev1.Probe{ProbeHandler: statusProbe(api.PathReadyz), PeriodSeconds: 5, TimeoutSeconds: 3, FailureThreshold: 2},
		// The manager answers /healthz while it supervises the engine,
		// through crash recovery and clones alike; one that stopped
		// answering is restarted, engine and all, before a failover
		// could promote another instance (livenessProbe).
		LivenessProbe: livenessProbe(statusProbe(api.PathHealthz), failover.Delay(db.Spec)),
		VolumeMounts: []corev1.VolumeMount{
			{Name: names.DataVolume, MountPath: eng.DataPath},
			{Name: instanceVolume, MountPath: engine.InstanceDirectory, ReadOnly: true},
			{Name: secretsVolume, MountPath: engine.SecretsDir, ReadOnly: true},
			{Name: runVolume, MountPath: engine.RunDir},
			{Name: tmpVolume, MountPath: "/tmp"},
		},
		SecurityContext: engine.ContainerSecurityContext(),
	}
	if eng.AdminPort != 0 {
		database.Args = append(database.Args, fmt.Sprintf("--admin-port=%d", eng.AdminPort))
		database.Ports = append(database.Ports, corev1.ContainerPort{Name: engine.AdminPortName, ContainerPort: eng.AdminPort, Protocol: corev1.ProtocolTCP})
	}
	// The containers, their names and their resources are the ones quota
	// and LimitRange admission charged and bounded (databasepod).
	spec := databasepod.Spec(db.Spec.Resources, init, database)
	// The manager reads its MyDatabase with this identity, nothing else.
	spec.ServiceAccountName = names.InstanceIdentity(db.Name)
	spec.AutomountServiceAccountToken = ptr.To(true)
	spec.SecurityContext = eng.PodSecurityContext()
	// Longer than the manager's own stop timeout, so a clean shutdown is
	// never cut short.
	spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	// Spread replicas over nodes, so one node's loss takes one replica.
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew:           1,
		TopologyKey:       corev1.LabelHostname,
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
	}}
	spec.Volumes = []corev1.Volume{
		{Name: instanceVolume, VolumeSource: emptyDir},
		{Name: secretsVolume, VolumeSource: secretsVolumeSource(db.Name)},
		{Name: runVolume, VolumeSource: emptyDir},
		{Name: tmpVolume, VolumeSource: emptyDir},
	}
	withRestore(&spec, restore)
	withArchive(&spec, db)
	withStartParameters(&spec, db)
	withClientTLS(&spec, db)
	return spec
}

// requireClientTLSFlag makes an instance refuse clients without TLS.
const requireClientTLSFlag = "--require-client-tls"

// withClientTLS makes the instances of a database whose clients must use
// TLS refuse the others (a pod change: toggling it rolls them out).
func withClientTLS(spec *corev1.PodSpec, db *examplev1.MyDatabase) {
	if t := db.Spec.TLS; t != nil && t.ClientTLS == examplev1.ClientTLSRequired {
		spec.Containers[0].Args = append(spec.Containers[0].Args, requireClientTLSFlag)
	}
}

// secretsVolumeSource is every credential and the certificates in one
// directory, readable by the engine's group only (fsGroup): the passwords
// of the instance Secret, which never changes, and the issuer and roots of
// the certificates Secret, which a rotation of the CA changes in place
// (the kubelet updates a projected volume; the managers see it and mint
// certificates anew).
func secretsVolumeSource(db string) corev1.VolumeSource {
	var passwords []corev1.KeyToPath
	for _, key := range []string{engine.SecretKeyUsername, engine.SecretKeyPassword, engine.SecretKeyDatabase,
		engine.SecretKeySuperuserPassword, engine.SecretKeyReplicationPassword} {
		passwords = append(passwords, corev1.KeyToPath{Key: key, Path: key})
	}
	return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o440), Sources: []corev1.VolumeProjection{
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: names.InstanceSecret(db)}, Items: passwords}},
		{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: names.CertificatesSecret(db)}}},
	}}}
}

func newPodDisruptionBudget(db *examplev1.MyDatabase) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: childMeta(db, names.PodDisruptionBudget(db.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
		},
	}
}

// desiredReplicas is spec.replicas, which the API server always defaults.
// desiredReplicas is how many pods the database runs: none while it
// hibernates.
func desiredReplicas(db *examplev1.MyDatabase) int32 {
	if db.Spec.Hibernate {
		return 0
	}
	return ptr.Deref(db.Spec.Replicas, 1)
}

// newInstanceIdentity returns the ServiceAccount the database's instance
// managers run as, and a Role and RoleBinding that let it read this one
// MyDatabase, where the controller writes each instance's role: the
// managers need nothing else of the cluster.
func newInstanceIdentity(db *examplev1.MyDatabase) (*corev1.ServiceAccount, *rbacv1.Role, *rbacv1.RoleBinding) {
	name := names.InstanceIdentity(db.Name)
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: childMeta(db, name),
		// Only the database's pods mount its token.
		AutomountServiceAccountToken: ptr.To(false),
	}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: childMeta(db, name),
		Rules: []rbacv1.PolicyRule{{
			APIGroups:     []string{examplev1.GroupName},
			Resources:     []string{"mydatabases"},
			ResourceNames: []string{db.Name},
			Verbs:         []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: childMeta(db, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: db.Namespace}},
	}
	return sa, role, binding
}

// livenessProbe restarts the container of a manager that stopped answering
// (stuck, or stopped with SIGSTOP) within three quarters of failoverDelay.
// Such a manager can neither fence its engine nor learn that another
// instance was promoted, while the engine it started still takes writes
// from clients that kept its address: the kubelet's kill takes the engine
// down with it (the manager is the container's PID 1). The controller
// promotes no sooner than failoverDelay after it first saw the primary
// unready, which is no sooner than the manager stopped answering, and the
// kill comes at most period*threshold + timeout + grace after that.
func livenessProbe(handler corev1.ProbeHandler, delay time.Duration) *corev1.Probe {
	budget := int64(delay * 3 / 4 / time.Second) // whole seconds
	period := min(max(budget/4, 1), 10)
	timeout := min(period, 5)
	grace := period
	threshold := min(max((budget-timeout-grace)/period, 2), 6)
	return &corev1.Probe{ProbeHandler: handler, PeriodSeconds: int32(period), TimeoutSeconds: int32(timeout),
		FailureThreshold: int32(threshold), TerminationGracePeriodSeconds: ptr.To(grace)}
}

// newNetworkPolicies are the database's NetworkPolicies. The instances'
// admits, on the managers' port, only the database's own instances and
// mydb's namespace (the controller), and on the engine's port the
// instances and any client (as without a policy: applications live where
// their owners put them), as on the metrics port; the dump servers' admits only the database's
// instances and mydb. Policies add up: to let more in, or to narrow the
// engine's port, a user adds a policy of their own (docs/security.md).
// The kubelet's probes come from the node, which NetworkPolicy
// implementations let through.
func newNetworkPolicies(db *examplev1.MyDatabase, eng engine.Spec, serverNamespace string) []*networkingv1.NetworkPolicy {
	tcp := ptr.To(corev1.ProtocolTCP)
	port := func(p int32) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: tcp, Port: ptr.To(intstr.FromInt32(p))}
	}
	instances := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: SelectorLabels(db)}}
	controller := []networkingv1.NetworkPolicyPeer{instances}
	if serverNamespace != "" {
		controller = append(controller, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: serverNamespace}}})
	}
	policy := func(name string, selector map[string]string, rules []networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: childMeta(db, name),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: selector},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     rules,
			},
		}
	}
	rules := []networkingv1.NetworkPolicyIngressRule{
		{Ports: []networkingv1.NetworkPolicyPort{port(api.Port)}, From: controller},
		{Ports: []networkingv1.NetworkPolicyPort{port(eng.Port)}},
		// Prometheus, wherever it runs: the figures hold no secret, and
		// the managers answer a flood from figures a second old.
		{Ports: []networkingv1.NetworkPolicyPort{port(api.MetricsPort)}},
	}
	if eng.AdminPort != 0 {
		// MySQL's admin interface: the database's replicas and clones.
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{port(eng.AdminPort)}, From: []networkingv1.NetworkPolicyPeer{instances}})
	}
	return []*networkingv1.NetworkPolicy{
		policy(names.NetworkPolicy(db.Name), SelectorLabels(db), rules),
		policy(names.DumpNetworkPolicy(db.Name), map[string]string{names.LabelComponent: dump.Component, dump.LabelOf: db.Name},
			[]networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port(api.Port)}, From: controller}}),
	}
}
