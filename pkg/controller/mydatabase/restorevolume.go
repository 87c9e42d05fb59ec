package mydatabase

import (
	"context"
	"fmt"
	"slices"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// restoreDumpServer makes the pod that serves db's primary the dump of the
// volume backup b, mounting b's claim read-only, and says where it serves
// once it does (or what the restore waits for). A claim is mounted by one
// pod at a time: a restore waits while another pod (a second restore from
// the same backup) mounts it, so a ReadWriteOnce claim never needs two
// nodes.
func (c *Controller) restoreDumpServer(ctx context.Context, db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) (*api.VolumeObject, string, error) {
	claimName := b.Status.Location.Volume.ClaimName
	claim, err := c.pvcLister.PersistentVolumeClaims(b.Namespace).Get(claimName)
	if apierrors.IsNotFound(err) {
		return nil, "", fmt.Errorf("the claim %q of MyDatabaseBackup %q does not exist", claimName, b.Name)
	}
	if err != nil {
		return nil, "", err
	}
	if !dump.OwnsClaim(claim, b) {
		return nil, "", fmt.Errorf("the claim %q is not MyDatabaseBackup %q's", claimName, b.Name)
	}
	name := dump.RestorePod(db.Name)
	mounting, err := c.podLister.Pods(db.Namespace).List(labels.SelectorFromSet(labels.Set{dump.LabelClaim: claimName}))
	if err != nil {
		return nil, "", err
	}
	if i := slices.IndexFunc(mounting, func(p *corev1.Pod) bool { return p.Name != name }); i >= 0 {
		return nil, fmt.Sprintf("waiting for the pod %s to release the claim %s of MyDatabaseBackup %q", mounting[i].Name, claimName, b.Name), nil
	}
	pod, err := c.podLister.Pods(db.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		owner := *metav1.NewControllerRef(db, examplev1.SchemeGroupVersion.WithKind("MyDatabase"))
		owner.BlockOwnerDeletion = nil
		desired := dump.NewServerPod(name, db.Namespace, db.Name, claimName, c.config.InstanceImage, true, owner)
		pod, err = c.kubeClient.CoreV1().Pods(db.Namespace).Create(ctx, desired, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Sprintf("waiting for the pod %s to be cached", name), nil
		}
	}
	if err != nil {
		return nil, "", err
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != db.UID || pod.Labels[dump.LabelClaim] != claimName {
		return nil, "", fmt.Errorf("the pod %q exists and is not this restore's", name)
	}
	creds, err := c.authority.Credentials(db.Namespace, db.Name)
	if err != nil {
		return nil, "waiting for the database's CA: " + err.Error(), nil
	}
	volume, err := dump.ServerAddress(ctx, pod, creds)
	if err != nil {
		return nil, err.Error(), nil
	}
	volume.Claim = claimName
	return volume, "", nil
}

// removeRestorePod deletes the pod that served db its restore, once the
// restore is over.
func (c *Controller) removeRestorePod(ctx context.Context, db *examplev1.MyDatabase) error {
	pod, err := c.podLister.Pods(db.Namespace).Get(dump.RestorePod(db.Name))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(pod); pod.DeletionTimestamp != nil || ref == nil || ref.UID != db.UID {
		return nil
	}
	err = c.kubeClient.CoreV1().Pods(db.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
