// Package dump makes the claims and dump-server pods of volume backups.
package dump

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// A volume backup is one PersistentVolumeClaim per backup, <backup>-dump,
// which only a short-lived dump-server pod ever mounts: <backup>-dump while
// the backup is written, <database>-restore (read-only) while a database
// restores from it. The database's own pods never mount it, so no claim is
// shared by pods that live on, and none fails with Multi-Attach.

// Labels of the claims and dump-server pods of volume backups.
const (
	// LabelClaim is on a dump claim and on every pod that mounts it:
	// the claim's name. A claim is mounted by one pod at a time.
	LabelClaim = names.Prefix + "dump-claim"
	// LabelBackupUID is on a dump claim: the UID of its backup, so a claim
	// of the name that is another's is never written, read or deleted.
	LabelBackupUID = names.Prefix + "backup-uid"
	// LabelOf is on a dump-server pod: the database whose credentials
	// it mounts and whose instance ServiceAccount it runs as.
	LabelOf = names.Prefix + "dump-of"
	// Component is the component label of dump claims and pods.
	Component = "dump"
)

// ClaimName is the name of the claim of backup b.
func ClaimName(backup string) string { return backup + "-dump" }

// BackupPod is the name of the pod that writes backup's dump.
func BackupPod(backup string) string { return backup + "-dump" }

// RestorePod is the name of the pod that serves db its restore.
func RestorePod(db string) string { return db + "-restore" }

// dumpServerPort is where the dump server listens in its pod: it is
// mydb-instance too, on the instance manager's port.
const dumpServerPort = api.Port

// dumpUser runs the dump server: the instance image's nonroot user.
const dumpUser = 65532

// NewClaim is the claim of backup b of db: the destination's class,
// and its size or else the database's storage size. It has no owner:
// deleting the backup deletes it (the backup's finalizer).
func NewClaim(b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, d *examplev1.VolumeDestination) *corev1.PersistentVolumeClaim {
	size := db.Spec.StorageSize
	if d.StorageSize != nil {
		size = *d.StorageSize
	}
	name := ClaimName(b.Name)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: b.Namespace,
			Labels: map[string]string{
				names.LabelManagedBy: names.ManagedBy, names.LabelComponent: Component,
				LabelClaim: name, LabelBackupUID: string(b.UID),
			},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: d.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// NewServerPod is a pod that mounts claim (read-only for a restore) and
// serves its dump to the instances of database db over mutual TLS, with a
// certificate it mints from the issuer in db's certificates Secret (naming the
// pod), admitting only certificates of that issuer. It mounts no
// ServiceAccount token: it needs nothing of the API. It is owned by owner,
// so it goes with it.
func NewServerPod(name, namespace, db, claim, image string, readOnly bool, owner metav1.OwnerReference) *corev1.Pod {
	const dumpDir, secretsDir = "/dump", "/credentials"
	args := []string{"dump-server", "--dir=" + dumpDir, "--secrets-dir=" + secretsDir, fmt.Sprintf("--address=:%d", dumpServerPort)}
	if readOnly {
		args = append(args, "--read-only")
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels: map[string]string{
				names.LabelManagedBy: names.ManagedBy, names.LabelComponent: Component,
				LabelClaim: claim, LabelOf: db,
			},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.PodSpec{
			ServiceAccountName:           names.InstanceIdentity(db),
			AutomountServiceAccountToken: ptr.To(false),
			RestartPolicy:                corev1.RestartPolicyOnFailure,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](dumpUser), RunAsGroup: ptr.To[int64](dumpUser),
				FSGroup: ptr.To[int64](dumpUser), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Containers: []corev1.Container{{
				Name:    "dump-server",
				Image:   image,
				Command: []string{"/mydb-instance"},
				Args:    args,
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				},
				Ports: []corev1.ContainerPort{{Name: engine.StatusPortName, ContainerPort: dumpServerPort, Protocol: corev1.ProtocolTCP}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/healthz", Port: intstr.FromString(engine.StatusPortName), Scheme: corev1.URISchemeHTTPS}}, PeriodSeconds: 2},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "dump", MountPath: dumpDir, ReadOnly: readOnly},
					{Name: "credentials", MountPath: secretsDir, ReadOnly: true},
				},
				SecurityContext: engine.ContainerSecurityContext(),
			}},
			Volumes: []corev1.Volume{
				{Name: "dump", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: claim, ReadOnly: readOnly}}},
				// The issuer and the roots, current through a rotation of
				// the database's CA; none of the passwords.
				{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: names.CertificatesSecret(db), DefaultMode: ptr.To[int32](0o440)}}},
			},
		},
	}
}

// ServerAddress is where pod's dump server answers, once it does: its
// IP and port, when it runs and /healthz answers with a certificate of
// the database's (creds) that names the pod.
func ServerAddress(ctx context.Context, pod *corev1.Pod, creds *api.Credentials) (*api.VolumeObject, error) {
	if pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("the pod %s is being deleted", pod.Name)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return nil, fmt.Errorf("waiting for the pod %s to run (it is %s)", pod.Name, orPending(pod.Status.Phase))
	}
	address := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(dumpServerPort))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+address+"/healthz", nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: creds.TLSConfig(pod.Name), DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("waiting for the dump server of pod %s to answer: %v", pod.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("waiting for the dump server of pod %s: /healthz answered %s", pod.Name, resp.Status)
	}
	return &api.VolumeObject{Address: address, Server: pod.Name}, nil
}

// OwnsClaim tells whether claim is the dump claim of backup b.
func OwnsClaim(claim *corev1.PersistentVolumeClaim, b *examplev1.MyDatabaseBackup) bool {
	return claim.Labels[names.LabelManagedBy] == names.ManagedBy && claim.Labels[LabelBackupUID] == string(b.UID)
}

func orPending(p corev1.PodPhase) corev1.PodPhase {
	if p == "" {
		return corev1.PodPending
	}
	return p
}
