package backup

import (
	"context"
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/controller/internal/s3location"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// locationOf is where backup b of db goes in destination d.
func locationOf(d *examplev1.BackupDestination, db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) *examplev1.BackupLocation {
	if d.Volume != nil {
		return &examplev1.BackupLocation{Volume: &examplev1.VolumeLocation{ClaimName: dump.ClaimName(b.Name)}}
	}
	return s3location.Of(d.S3, db, b)
}

// dumpServer makes the claim of a volume backup and the pod that writes
// it, and says where the instance sends its stream once that pod serves
// (or what it waits for); a refusal error fails the backup. d is the database's volume destination, nil when
// it has another one since the backup was assigned (the claim then takes
// the database's storage size and the default class).
func (c *Controller) dumpServer(ctx context.Context, b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, d *examplev1.VolumeDestination) (*api.VolumeObject, string, error) {
	if d == nil {
		d = &examplev1.VolumeDestination{}
	}
	name := dump.ClaimName(b.Name)
	claim, err := c.claimLister.PersistentVolumeClaims(b.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		claim, err = c.kubeClient.CoreV1().PersistentVolumeClaims(b.Namespace).Create(ctx, dump.NewClaim(b, db, d), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			claim, err = c.kubeClient.CoreV1().PersistentVolumeClaims(b.Namespace).Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, "", err
	}
	if !dump.OwnsClaim(claim, b) {
		return nil, "", refusal(fmt.Sprintf("the PersistentVolumeClaim %q exists and is not this backup's: a backup's claim is its own", name))
	}
	podName := dump.BackupPod(b.Name)
	pod, err := c.podLister.Pods(b.Namespace).Get(podName)
	if apierrors.IsNotFound(err) {
		owner := metav1.OwnerReference{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "MyDatabaseBackup",
			Name: b.Name, UID: b.UID, Controller: ptr.To(true)}
		desired := dump.NewServerPod(podName, b.Namespace, db.Name, name, c.instanceImage, false, owner)
		pod, err = c.kubeClient.CoreV1().Pods(b.Namespace).Create(ctx, desired, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Sprintf("waiting for the pod %s to be cached", podName), nil
		}
	}
	if err != nil {
		return nil, "", err
	}
	if !ownedBy(pod, b.UID) {
		return nil, "", refusal(fmt.Sprintf("the pod %q exists and is not this backup's", podName))
	}
	creds, err := c.authority.Credentials(db.Namespace, db.Name)
	if err != nil {
		return nil, "waiting for the database's CA: " + err.Error(), nil
	}
	volume, err := dump.ServerAddress(ctx, pod, creds)
	if err != nil {
		return nil, err.Error(), nil
	}
	volume.Claim = name
	return volume, "", nil
}

// refusal is why a backup cannot be written, ever: it fails.
type refusal string

func (r refusal) Error() string { return string(r) }

// removeDumpPod deletes the pod that wrote a finished backup's dump: the
// claim is mounted only while a backup or restore runs.
func (c *Controller) removeDumpPod(ctx context.Context, b *examplev1.MyDatabaseBackup) error {
	if b.Status.Location == nil || b.Status.Location.Volume == nil {
		return nil
	}
	pod, err := c.podLister.Pods(b.Namespace).Get(dump.BackupPod(b.Name))
	if apierrors.IsNotFound(err) || err == nil && (pod.DeletionTimestamp != nil || !ownedBy(pod, b.UID)) {
		return nil
	}
	if err != nil {
		return err
	}
	err = c.kubeClient.CoreV1().Pods(b.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// deleteDumpClaim deletes a deleted volume backup's pod and claim (only
// the claim labelled with this backup's UID).
func (c *Controller) deleteDumpClaim(ctx context.Context, b *examplev1.MyDatabaseBackup) error {
	if err := c.removeDumpPod(ctx, b); err != nil {
		return err
	}
	name := b.Status.Location.Volume.ClaimName
	claim, err := c.kubeClient.CoreV1().PersistentVolumeClaims(b.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !dump.OwnsClaim(claim, b) {
		return nil // another's: never deleted
	}
	err = c.kubeClient.CoreV1().PersistentVolumeClaims(b.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &claim.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ownedBy(pod *corev1.Pod, uid types.UID) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.UID == uid
}
