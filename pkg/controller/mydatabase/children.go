package mydatabase

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Labels every child carries (app.kubernetes.io recommended labels).
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelVersion   = "app.kubernetes.io/version"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// ManagedBy is the value of LabelManagedBy on every child; the
	// controller's informers watch only objects that carry it.
	ManagedBy = "mydb"

	// dataVolume is the name of the volumeClaimTemplate, so replica i's
	// claim is data-<name>-<i>.
	dataVolume = "data"
	// containerName is the database container's name.
	containerName = "database"
)

// Names of a MyDatabase's children.

// SecretName is the name of a database's credentials Secret.
func SecretName(db *examplev1.MyDatabase) string          { return db.Name + "-credentials" }
func headlessServiceName(db *examplev1.MyDatabase) string { return db.Name + "-headless" }

// ClientServiceName is the name of the Service clients connect through.
func ClientServiceName(db *examplev1.MyDatabase) string { return db.Name }
func statefulSetName(db *examplev1.MyDatabase) string   { return db.Name }
func pdbName(db *examplev1.MyDatabase) string           { return db.Name }

// SelectorLabels select a database's pods; none of them may change over
// the database's life (the engine is immutable).
func SelectorLabels(db *examplev1.MyDatabase) map[string]string {
	return map[string]string{
		LabelName:      string(db.Spec.Engine),
		LabelInstance:  db.Name,
		LabelManagedBy: ManagedBy,
	}
}

func childLabels(db *examplev1.MyDatabase) map[string]string {
	labels := SelectorLabels(db)
	labels[LabelComponent] = "database"
	return labels
}

// versionedLabels are the labels of what runs a version: the StatefulSet
// and its pods. The other children keep theirs across upgrades.
func versionedLabels(db *examplev1.MyDatabase) map[string]string {
	labels := childLabels(db)
	labels[LabelVersion] = db.Spec.Version
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

// newSecret returns the credentials Secret with fresh random passwords.
func newSecret(db *examplev1.MyDatabase) (*corev1.Secret, error) {
	password, err := randomPassword()
	if err != nil {
		return nil, err
	}
	rootPassword, err := randomPassword()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: childMeta(db, SecretName(db)),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data: map[string][]byte{
			engine.SecretKeyUsername:     []byte("app"),
			engine.SecretKeyPassword:     password,
			engine.SecretKeyRootPassword: rootPassword,
			engine.SecretKeyDatabase:     []byte("app"),
		},
	}, nil
}

func randomPassword() ([]byte, error) {
	buf := make([]byte, 24)
	if _, err := rand.Read(buf); err != nil {
		return nil, fmt.Errorf("generating a password: %w", err)
	}
	return []byte(base64.RawURLEncoding.EncodeToString(buf)), nil
}

func newHeadlessService(db *examplev1.MyDatabase, eng engine.Engine) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: childMeta(db, headlessServiceName(db)),
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  SelectorLabels(db),
			Ports:     servicePorts(eng),
			// Replicas must find each other before they are ready.
			PublishNotReadyAddresses: true,
		},
	}
}

func newClientService(db *examplev1.MyDatabase, eng engine.Engine) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: childMeta(db, ClientServiceName(db)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: SelectorLabels(db),
			Ports:    servicePorts(eng),
		},
	}
}

func servicePorts(eng engine.Engine) []corev1.ServicePort {
	return []corev1.ServicePort{{
		Name: eng.Name, Port: eng.Port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(eng.Name),
	}}
}

// endpoint is where clients reach the database.
func endpoint(db *examplev1.MyDatabase, eng engine.Engine) string {
	return fmt.Sprintf("%s.%s.svc:%d", ClientServiceName(db), db.Namespace, eng.Port)
}

func newStatefulSet(db *examplev1.MyDatabase, eng engine.Engine, restore *restoreSource) *appsv1.StatefulSet {
	whenDeleted := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if db.Spec.DeletionPolicy == examplev1.DeletionPolicyDelete {
		whenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	meta := childMeta(db, statefulSetName(db))
	meta.Labels = versionedLabels(db)
	return &appsv1.StatefulSet{
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(desiredReplicas(db)),
			ServiceName:         headlessServiceName(db),
			Selector:            &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
			PodManagementPolicy: appsv1.OrderedReadyPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			// Each replica owns its claim; spec.deletionPolicy decides whether
			// the claims outlive the database. Scaling down keeps them, so
			// scaling back up finds the data.
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: whenDeleted,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: versionedLabels(db)},
				Spec:       podSpec(db, eng, restore),
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: dataVolume, Labels: SelectorLabels(db)},
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

func podSpec(db *examplev1.MyDatabase, eng engine.Engine, restore *restoreSource) corev1.PodSpec {
	mounts := []corev1.VolumeMount{{Name: dataVolume, MountPath: eng.DataPath}}
	var volumes []corev1.Volume
	for i, path := range eng.ScratchPaths {
		name := fmt.Sprintf("scratch-%d", i)
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path})
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              PodSecurityContext(eng),
		// Spread replicas over nodes, so one node's loss takes one replica.
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelHostname,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
		}},
		Containers: []corev1.Container{{
			Name:      containerName,
			Image:     eng.Images[db.Spec.Version],
			Ports:     []corev1.ContainerPort{{Name: eng.Name, ContainerPort: eng.Port, Protocol: corev1.ProtocolTCP}},
			Env:       eng.Env(SecretName(db)),
			Resources: *db.Spec.Resources.DeepCopy(),
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: eng.ReadinessCommand}},
				PeriodSeconds:    10,
				TimeoutSeconds:   5,
				FailureThreshold: 3,
			},
			LivenessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString(eng.Name)}},
				// Recovery after a crash can take minutes; do not kill it meanwhile.
				InitialDelaySeconds: 30,
				PeriodSeconds:       10,
				TimeoutSeconds:      5,
				FailureThreshold:    6,
			},
			VolumeMounts:    mounts,
			SecurityContext: ContainerSecurityContext(),
		}},
		Volumes: volumes,
	}
	withRestore(&spec, restore)
	return spec
}

func newPodDisruptionBudget(db *examplev1.MyDatabase) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: childMeta(db, pdbName(db)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: SelectorLabels(db)},
		},
	}
}

// desiredReplicas is spec.replicas, which the API server always defaults.
func desiredReplicas(db *examplev1.MyDatabase) int32 {
	return ptr.Deref(db.Spec.Replicas, 1)
}

// PodSecurityContext runs an engine's pods as its image's user, never root.
func PodSecurityContext(eng engine.Engine) *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(eng.UID),
		RunAsGroup:     ptr.To(eng.UID),
		FSGroup:        ptr.To(eng.UID),
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
