package mydatabase

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"github.com/mydb-dev/mydb/pkg/names"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// containerName is the database container's name.
const containerName = "database"

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
		ObjectMeta: childMeta(db, names.Secret(db.Name)),
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
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(db, names.HeadlessService(db.Name)),
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
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(db, names.ClientService(db.Name)),
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
	return fmt.Sprintf("%s.%s.svc:%d", names.ClientService(db.Name), db.Namespace, eng.Port)
}

func newStatefulSet(db *examplev1.MyDatabase, eng engine.Engine, restore *restoreSource) *appsv1.StatefulSet {
	whenDeleted := appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if db.Spec.DeletionPolicy == examplev1.DeletionPolicyDelete {
		whenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	}
	meta := childMeta(db, names.StatefulSet(db.Name))
	meta.Labels = versionedLabels(db)
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(desiredReplicas(db)),
			ServiceName:         names.HeadlessService(db.Name),
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

func podSpec(db *examplev1.MyDatabase, eng engine.Engine, restore *restoreSource) corev1.PodSpec {
	mounts := []corev1.VolumeMount{{Name: names.DataVolume, MountPath: eng.DataPath}}
	var volumes []corev1.Volume
	for i, path := range eng.ScratchPaths {
		name := fmt.Sprintf("scratch-%d", i)
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path})
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	spec := corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              eng.PodSecurityContext(),
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
			Env:       eng.Env(names.Secret(db.Name)),
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
			SecurityContext: engine.ContainerSecurityContext(),
		}},
		Volumes: volumes,
	}
	withRestore(&spec, restore)
	return spec
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
func desiredReplicas(db *examplev1.MyDatabase) int32 {
	return ptr.Deref(db.Spec.Replicas, 1)
}
