package mydatabase

import (
	"context"
	"fmt"
	"github.com/mydb-dev/mydb/pkg/names"
	"sort"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// findings are what a reconcile saw that the status must report.
type findings struct {
	// conflicts name children that exist but belong to someone else.
	conflicts []string
	// storageProblems say why volumes cannot grow to spec.storageSize.
	storageProblems []string
	// restoreWait says why the database waits for its restore source.
	restoreWait string
}

// sync makes the children of one MyDatabase match its spec and reports what
// it sees. It is level-driven: it reads the current state from the caches
// every time, writes only differences, and never changes cached objects.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "mydatabase", key.String())
	ctx = klog.NewContext(ctx, logger)

	db, err := c.dbLister.MyDatabases(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// Deleted: the garbage collector removes the children it owned.
		return nil
	}
	if err != nil {
		return err
	}
	if db.DeletionTimestamp != nil {
		return nil
	}
	eng, ok := engine.Lookup(string(db.Spec.Engine))
	if !ok {
		// Validation admits no such object; nothing can be built for it.
		return nil
	}
	if db.Annotations[names.PausedAnnotation] == "true" {
		return c.updateStatus(ctx, db, eng, nil, findings{}, true)
	}

	var f findings
	if err := c.reconcileSecret(ctx, db, &f); err != nil {
		return err
	}
	for _, svc := range []*corev1.Service{newHeadlessService(db, eng), newClientService(db, eng)} {
		if err := c.reconcileService(ctx, db, svc, &f); err != nil {
			return err
		}
	}
	sts, err := c.reconcileStatefulSet(ctx, db, eng, &f)
	if err != nil {
		return err
	}
	if err := c.reconcilePodDisruptionBudget(ctx, db, &f); err != nil {
		return err
	}
	if err := c.reconcileVolumes(ctx, db, sts, &f); err != nil {
		return err
	}
	return c.updateStatus(ctx, db, eng, sts, f, false)
}

// owned tells whether db controls child; when something else does, it
// records the conflict and warns, and the child is left alone.
func (c *Controller) owned(db *examplev1.MyDatabase, child metav1.Object, kind string, f *findings) bool {
	if metav1.IsControlledBy(child, db) {
		return true
	}
	msg := fmt.Sprintf("%s %q already exists and is not managed by MyDatabase %q", kind, child.GetName(), db.Name)
	f.conflicts = append(f.conflicts, msg)
	c.recorder.Event(db, corev1.EventTypeWarning, ReasonResourceExists, msg)
	return false
}

// reconcileSecret creates the credentials once; they are never overwritten,
// so a password never changes under a running database.
func (c *Controller) reconcileSecret(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	existing, err := c.secretLister.Secrets(db.Namespace).Get(names.Secret(db.Name))
	if err == nil {
		c.owned(db, existing, "Secret", f)
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	secret, err := newSecret(db)
	if err != nil {
		return err
	}
	_, err = c.kubeClient.CoreV1().Secrets(db.Namespace).Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Someone else's Secret the cache has not seen yet: next pass decides.
		return fmt.Errorf("secret %s/%s appeared while creating it", db.Namespace, secret.Name)
	}
	if err != nil {
		return err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCreated, "Created Secret %q", secret.Name)
	return nil
}

func (c *Controller) reconcileService(ctx context.Context, db *examplev1.MyDatabase, desired *corev1.Service, f *findings) error {
	existing, err := c.svcLister.Services(db.Namespace).Get(desired.Name)
	if apierrors.IsNotFound(err) {
		if _, err := c.kubeClient.CoreV1().Services(db.Namespace).Create(ctx, desired, metav1.CreateOptions{}); err != nil {
			return err
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCreated, "Created Service %q", desired.Name)
		return nil
	}
	if err != nil {
		return err
	}
	if !c.owned(db, existing, "Service", f) {
		return nil
	}
	same, err := converged(desired.ObjectMeta, desired.Spec, existing.ObjectMeta, existing.Spec)
	if err != nil || same {
		return err
	}
	updated := existing.DeepCopy()
	updated.Labels = mergeLabels(updated.Labels, desired.Labels)
	// ClusterIP and its kin are the cluster's to allocate: keep them.
	updated.Spec.Selector = desired.Spec.Selector
	updated.Spec.Ports = desired.Spec.Ports
	updated.Spec.PublishNotReadyAddresses = desired.Spec.PublishNotReadyAddresses
	if _, err := c.kubeClient.CoreV1().Services(db.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonUpdated, "Updated Service %q", desired.Name)
	return nil
}

func (c *Controller) reconcileStatefulSet(ctx context.Context, db *examplev1.MyDatabase, eng engine.Engine, f *findings) (*appsv1.StatefulSet, error) {
	existing, err := c.stsLister.StatefulSets(db.Namespace).Get(names.StatefulSet(db.Name))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if existing != nil && !c.owned(db, existing, "StatefulSet", f) {
		return nil, nil
	}
	restore, wait, err := c.restoreSourceOf(db, existing)
	if err != nil {
		return nil, err
	}
	if wait != "" {
		// Without its dump the database would start empty: it waits.
		f.restoreWait = wait
		return existing, nil
	}
	desired := newStatefulSet(db, eng, restore)
	if existing == nil {
		created, err := c.kubeClient.AppsV1().StatefulSets(db.Namespace).Create(ctx, desired, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCreated, "Created StatefulSet %q with %d replicas", desired.Name, desiredReplicas(db))
		return created, nil
	}
	// The claim templates and selector of a StatefulSet are immutable:
	// volumes grow through their claims (reconcileVolumes) instead.
	desired.Spec.VolumeClaimTemplates = existing.Spec.VolumeClaimTemplates
	desired.Spec.Selector = existing.Spec.Selector
	same, err := converged(desired.ObjectMeta, desired.Spec, existing.ObjectMeta, existing.Spec)
	if err != nil || same {
		return existing, err
	}
	updated := existing.DeepCopy()
	updated.Labels = mergeLabels(updated.Labels, desired.Labels)
	updated.Spec = desired.Spec
	result, err := c.kubeClient.AppsV1().StatefulSets(db.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonUpdated, "Updated StatefulSet %q", desired.Name)
	return result, nil
}

// reconcilePodDisruptionBudget keeps a budget of one unavailable replica
// while there is more than one; a single replica gets none, since a budget
// would block every node drain.
func (c *Controller) reconcilePodDisruptionBudget(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	desired := newPodDisruptionBudget(db)
	existing, err := c.pdbLister.PodDisruptionBudgets(db.Namespace).Get(desired.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	want := desiredReplicas(db) > 1
	switch {
	case existing == nil && !want:
		return nil
	case existing == nil:
		if _, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(db.Namespace).Create(ctx, desired, metav1.CreateOptions{}); err != nil {
			return err
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCreated, "Created PodDisruptionBudget %q", desired.Name)
		return nil
	case !c.owned(db, existing, "PodDisruptionBudget", f):
		return nil
	case !want:
		err := c.kubeClient.PolicyV1().PodDisruptionBudgets(db.Namespace).Delete(ctx, existing.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &existing.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonDeleted, "Deleted PodDisruptionBudget %q: one replica needs none", existing.Name)
		return nil
	}
	same, err := converged(desired.ObjectMeta, desired.Spec, existing.ObjectMeta, existing.Spec)
	if err != nil || same {
		return err
	}
	updated := existing.DeepCopy()
	updated.Labels = mergeLabels(updated.Labels, desired.Labels)
	updated.Spec = desired.Spec
	if _, err := c.kubeClient.PolicyV1().PodDisruptionBudgets(db.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonUpdated, "Updated PodDisruptionBudget %q", desired.Name)
	return nil
}

// reconcileVolumes grows every replica's claim to spec.storageSize, when the
// claim's StorageClass allows expansion.
func (c *Controller) reconcileVolumes(ctx context.Context, db *examplev1.MyDatabase, sts *appsv1.StatefulSet, f *findings) error {
	if sts == nil {
		return nil
	}
	claims, err := c.pvcLister.PersistentVolumeClaims(db.Namespace).List(labels.SelectorFromSet(SelectorLabels(db)))
	if err != nil {
		return err
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, claim := range claims {
		current := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if current.Cmp(db.Spec.StorageSize) >= 0 {
			continue
		}
		if problem := c.expansionProblem(claim); problem != "" {
			f.storageProblems = append(f.storageProblems, problem)
			continue
		}
		updated := claim.DeepCopy()
		updated.Spec.Resources.Requests[corev1.ResourceStorage] = db.Spec.StorageSize.DeepCopy()
		if _, err := c.kubeClient.CoreV1().PersistentVolumeClaims(db.Namespace).Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
			return err
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonResizingVolume, "Resizing PersistentVolumeClaim %q from %s to %s",
			claim.Name, current.String(), db.Spec.StorageSize.String())
	}
	if len(f.storageProblems) > 0 {
		c.recorder.Event(db, corev1.EventTypeWarning, ReasonExpansionUnsupported, f.storageProblems[0])
	}
	return nil
}

// expansionProblem says why claim cannot grow, or "" when it can.
func (c *Controller) expansionProblem(claim *corev1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName == "" {
		return fmt.Sprintf("PersistentVolumeClaim %q has no StorageClass, so it cannot be expanded", claim.Name)
	}
	sc, err := c.scLister.Get(*claim.Spec.StorageClassName)
	if err != nil {
		return fmt.Sprintf("StorageClass %q of PersistentVolumeClaim %q: %v", *claim.Spec.StorageClassName, claim.Name, err)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return fmt.Sprintf("StorageClass %q does not allow volume expansion, so PersistentVolumeClaim %q stays at its size", sc.Name, claim.Name)
	}
	return ""
}

// converged tells whether the existing child already has every label and
// spec field the desired one sets.
func converged(desiredMeta metav1.ObjectMeta, desiredSpec interface{}, existingMeta metav1.ObjectMeta, existingSpec interface{}) (bool, error) {
	if !labels.SelectorFromSet(desiredMeta.Labels).Matches(labels.Set(existingMeta.Labels)) {
		return false, nil
	}
	return isSubset(desiredSpec, existingSpec)
}

// mergeLabels returns have with want's labels set, keeping labels others added.
func mergeLabels(have, want map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	for k, v := range have {
		out[k] = v
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}
