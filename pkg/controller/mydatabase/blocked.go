package mydatabase

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fieldselector "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Reasons a rollout is blocked, for the Degraded condition.
const (
	ReasonStorageClassNotFound = "StorageClassNotFound"
	ReasonNoDefaultStorage     = "NoDefaultStorageClass"
	ReasonImagePullFailed      = "ImagePullFailed"
	ReasonCrashLooping         = "CrashLooping"
	ReasonContainerFailed      = "ContainerCreateFailed"
	ReasonUnschedulable        = "Unschedulable"
	ReasonFailedCreate         = "FailedCreate"
	ReasonPrimaryNotServing    = "PrimaryNotServing"
)

// blockage is one reason the database cannot reach its spec.
type blockage struct {
	reason, message string
}

// defaultStorageClassAnnotation marks the cluster's default StorageClass.
const defaultStorageClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// claimBindGrace is how long a pod the scheduler holds back because of its
// volumes ("pod has unbound immediate PersistentVolumeClaims", "bound to
// non-existent persistentvolume") is taken to wait, as every new pod does,
// for its new claims to be bound; a claim that waits for a StorageClass that
// is not there is reported at once, by claimBlockage.
const claimBindGrace = 30 * time.Second

// failedCreateWindow is how old a FailedCreate event of the StatefulSet may
// be to still count: the StatefulSet controller retries, and says so again.
const failedCreateWindow = 10 * time.Minute

// blockages finds what keeps the database's pods from running: claims
// waiting for a StorageClass that is not there, containers that cannot
// start, pods that cannot be scheduled, and pods or claims the StatefulSet
// controller failed to create (quota, admission), which only its Events tell.
func (c *Controller) blockages(ctx context.Context, db *examplev1.MyDatabase, sts *appsv1.StatefulSet) ([]blockage, error) {
	var out []blockage
	selector := labels.SelectorFromSet(SelectorLabels(db))
	claims, err := c.pvcLister.PersistentVolumeClaims(db.Namespace).List(selector)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(claims, func(a, b *corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
	for _, claim := range claims {
		if claim.Status.Phase != corev1.ClaimPending {
			continue
		}
		if b, ok := c.claimBlockage(claim); ok {
			out = append(out, b)
		}
	}

	pods, err := c.podLister.Pods(db.Namespace).List(selector)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, pod := range pods {
		out = append(out, podBlockages(pod, c.clock.Now())...)
	}

	if sts != nil && sts.Status.ObservedGeneration >= sts.Generation && sts.Status.Replicas < desiredReplicas(db) {
		b, err := c.failedCreate(ctx, sts)
		if err != nil {
			return nil, err
		}
		if b != nil {
			out = append(out, *b)
		}
	}
	return out, nil
}

// primaryServeGrace is how long a primary whose pod Kubernetes reads as
// Ready may go without its manager reporting that it serves before that is
// a problem: a new instance bootstraps (initdb, a clone) and a new primary
// promotes within it. On a node the pod's readiness is the manager's own
// /readyz, so the two disagree for longer only where the pod's readiness
// means nothing (kwok runs no container) or mydb cannot reach the manager.
const primaryServeGrace = 30 * time.Second

// primaryNotServing says that the pod of the primary has been Ready for
// primaryServeGrace (or the primary was chosen that long ago) while its
// manager does not report a writable primary: the database reads Ready to
// Kubernetes and serves nobody. pod is the primary's (nil: none).
func primaryNotServing(status examplev1.MyDatabaseStatus, pod *corev1.Pod, now time.Time) (blockage, bool) {
	if pod == nil || status.CurrentPrimary == "" || (status.TargetPrimary != "" && status.TargetPrimary != status.CurrentPrimary) {
		return blockage{}, false
	}
	in := instanceNamed(status.Instances, status.CurrentPrimary)
	if in == nil || in.Ready {
		return blockage{}, false
	}
	var since time.Time
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			since = cond.LastTransitionTime.Time
		}
	}
	if since.IsZero() {
		return blockage{}, false // the pod says it is not ready: nothing disagrees
	}
	if t := status.TargetPrimaryTime; t != nil && t.After(since) {
		since = t.Time
	}
	if now.Sub(since) < primaryServeGrace {
		return blockage{}, false
	}
	why := in.Message
	if why == "" {
		why = "it does not serve"
	}
	return blockage{ReasonPrimaryNotServing, fmt.Sprintf("pod %q is Ready, but the primary does not serve: %s", pod.Name, why)}, true
}

// primaryBlockage is primaryNotServing for what this sync found.
func (c *Controller) primaryBlockage(db *examplev1.MyDatabase, f findings) (blockage, bool) {
	if f.primary == "" {
		return blockage{}, false
	}
	pod, err := c.podLister.Pods(db.Namespace).Get(f.primary)
	if err != nil {
		return blockage{}, false
	}
	status := *db.Status.DeepCopy()
	status.CurrentPrimary, status.Instances = f.primary, f.instances
	return primaryNotServing(status, pod, c.clock.Now())
}

// instanceNamed is the instance of that name in instances, or nil.
func instanceNamed(instances []examplev1.InstanceStatus, name string) *examplev1.InstanceStatus {
	for i := range instances {
		if instances[i].Name == name {
			return &instances[i]
		}
	}
	return nil
}

// claimBlockage says why a pending claim waits, when mydb can tell.
func (c *Controller) claimBlockage(claim *corev1.PersistentVolumeClaim) (blockage, bool) {
	if claim.Spec.StorageClassName != nil && *claim.Spec.StorageClassName != "" {
		_, err := c.scLister.Get(*claim.Spec.StorageClassName)
		if apierrors.IsNotFound(err) {
			return blockage{ReasonStorageClassNotFound, fmt.Sprintf("PersistentVolumeClaim %q waits for StorageClass %q, which does not exist",
				claim.Name, *claim.Spec.StorageClassName)}, true
		}
		return blockage{}, false
	}
	classes, err := c.scLister.List(labels.Everything())
	if err != nil {
		return blockage{}, false
	}
	for _, sc := range classes {
		if sc.Annotations[defaultStorageClassAnnotation] == "true" {
			return blockage{}, false
		}
	}
	return blockage{ReasonNoDefaultStorage, fmt.Sprintf("PersistentVolumeClaim %q names no StorageClass and the cluster has no default one: set spec.storageClassName", claim.Name)}, true
}

// podBlockages are the reasons a pod does not run that the kubelet and the
// scheduler report in its status.
func podBlockages(pod *corev1.Pod, now time.Time) []blockage {
	var out []blockage
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			if strings.Contains(strings.ToLower(cond.Message), "persistentvolume") && now.Sub(cond.LastTransitionTime.Time) < claimBindGrace {
				continue // every new pod waits so for its new claims
			}
			out = append(out, blockage{ReasonUnschedulable, fmt.Sprintf("pod %q cannot be scheduled: %s", pod.Name, cond.Message)})
		}
	}
	for _, cs := range append(slices.Clone(pod.Status.InitContainerStatuses), pod.Status.ContainerStatuses...) {
		w := cs.State.Waiting
		if w == nil {
			continue
		}
		var reason string
		switch w.Reason {
		case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
			reason = ReasonImagePullFailed
		case "CrashLoopBackOff":
			reason = ReasonCrashLooping
		case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
			reason = ReasonContainerFailed
		default:
			continue
		}
		msg := fmt.Sprintf("container %q of pod %q: %s", cs.Name, pod.Name, w.Reason)
		if w.Message != "" {
			msg += ": " + w.Message
		}
		out = append(out, blockage{reason, msg})
	}
	return out
}

// failedCreate is the StatefulSet controller's latest FailedCreate event for
// sts, if it is recent: the only place a refused pod or claim (an exceeded
// quota, an admission webhook) shows.
func (c *Controller) failedCreate(ctx context.Context, sts *appsv1.StatefulSet) (*blockage, error) {
	events, err := c.kubeClient.CoreV1().Events(sts.Namespace).List(ctx, metav1.ListOptions{FieldSelector: fieldselector.Set{
		"involvedObject.kind": "StatefulSet",
		"involvedObject.name": sts.Name,
		"involvedObject.uid":  string(sts.UID),
		"reason":              "FailedCreate",
	}.AsSelector().String()})
	if err != nil {
		return nil, err
	}
	var newest *corev1.Event
	for i := range events.Items {
		e := &events.Items[i]
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil || c.clock.Since(eventTime(newest)) > failedCreateWindow {
		return nil, nil
	}
	return &blockage{ReasonFailedCreate, fmt.Sprintf("StatefulSet %q: %s", sts.Name, newest.Message)}, nil
}

// eventTime is when an event last happened, in either of its forms.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
