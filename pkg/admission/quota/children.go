package quota

import (
	"fmt"
	"strings"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	"github.com/mydb-dev/mydb/pkg/names"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	quota "k8s.io/apiserver/pkg/quota/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
)

// Shape is what of a MyDatabase decides what its children use.
type Shape struct {
	Name             string
	Replicas         int32
	StorageSize      resource.Quantity
	StorageClassName *string
	Resources        corev1.ResourceRequirements
	// Deleting databases create nothing more.
	Deleting bool
}

// ShapeOf is the shape of an internal MyDatabase (what admission sees).
func ShapeOf(db *example.MyDatabase) Shape {
	return Shape{
		Name: db.Name, Replicas: db.Spec.Replicas, StorageSize: db.Spec.StorageSize, StorageClassName: db.Spec.StorageClassName,
		Resources: db.Spec.Resources, Deleting: db.DeletionTimestamp != nil,
	}
}

// ShapeOfV1 is the shape of a versioned MyDatabase (what the informer holds).
func ShapeOfV1(db *examplev1.MyDatabase) Shape {
	return Shape{
		Name: db.Name, Replicas: ptr.Deref(db.Spec.Replicas, 1), StorageSize: db.Spec.StorageSize, StorageClassName: db.Spec.StorageClassName,
		Resources: db.Spec.Resources, Deleting: db.DeletionTimestamp != nil,
	}
}

// PodUsage is what kube-apiserver's quota charges for a pod that is not
// terminal: one pod, and its effective requests and limits (for each
// resource the larger of the biggest init container and the sum of the
// containers, plus overhead), under both the plain and the requests. names.
func PodUsage(pod *corev1.Pod) corev1.ResourceList {
	usage := corev1.ResourceList{
		corev1.ResourcePods:               resource.MustParse("1"),
		corev1.ResourceName("count/pods"): resource.MustParse("1"),
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	for _, r := range []struct{ plain, req, lim corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[r.plain]; ok {
			usage[r.plain] = q.DeepCopy()
			usage[r.req] = q.DeepCopy()
		}
		if q, ok := limits[r.plain]; ok {
			usage[r.lim] = q.DeepCopy()
		}
	}
	return usage
}

// storageClassSuffix is how quota names a StorageClass's own resources:
// <class>.storageclass.storage.k8s.io/requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

// ClaimUsage is what kube-apiserver's quota charges for a claim of size in
// class ("" for none).
func ClaimUsage(class string, size resource.Quantity) corev1.ResourceList {
	usage := corev1.ResourceList{
		corev1.ResourcePersistentVolumeClaims:               resource.MustParse("1"),
		corev1.ResourceName("count/persistentvolumeclaims"): resource.MustParse("1"),
		corev1.ResourceRequestsStorage:                      size.DeepCopy(),
	}
	if class != "" {
		usage[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims))] = resource.MustParse("1")
		usage[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourceRequestsStorage))] = size.DeepCopy()
	}
	return usage
}

// existingClaimUsage charges a claim as kube-apiserver does: its request, or
// what was allocated to it if that is more.
func existingClaimUsage(pvc *corev1.PersistentVolumeClaim) corev1.ResourceList {
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if allocated, ok := pvc.Status.AllocatedResources[corev1.ResourceStorage]; ok && allocated.Cmp(size) > 0 {
		size = allocated
	}
	return ClaimUsage(ptr.Deref(pvc.Spec.StorageClassName, ""), size)
}

// podCharged says whether quota counts a pod: terminal pods are not.
func podCharged(pod *corev1.Pod) bool {
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// Children are the claims and pods that exist in a namespace, by name, and
// the class a claim without one gets (the default StorageClass, "" if none).
type Children struct {
	Claims       map[string]*corev1.PersistentVolumeClaim
	Pods         map[string]*corev1.Pod
	DefaultClass string
}

func (s Shape) class(c Children) string {
	if s.StorageClassName != nil {
		return *s.StorageClassName
	}
	return c.DefaultClass
}

// Pending is what a database's children will still be charged beyond what
// the existing ones already are (and so is in the quota's status.used):
// for each replica, its claim and its pod, each less what exists of it
// (backups stream to object storage: they use neither). Never negative: a claim larger than the spec (or a pod bigger) frees nothing.
func Pending(s Shape, c Children) corev1.ResourceList {
	pending := corev1.ResourceList{}
	if s.Deleting {
		return pending
	}
	class := s.class(c)
	wantClaim := ClaimUsage(class, s.StorageSize)
	wantPod := PodUsage(databasepod.Pod(s.Resources))
	for i := 0; i < int(s.Replicas); i++ {
		claim := wantClaim
		if pvc, ok := c.Claims[names.DataClaim(s.Name, i)]; ok {
			claim = quota.SubtractWithNonNegativeResult(wantClaim, existingClaimUsage(pvc))
		}
		pod := wantPod
		if p, ok := c.Pods[fmt.Sprintf("%s-%d", names.StatefulSet(s.Name), i)]; ok && podCharged(p) {
			pod = quota.SubtractWithNonNegativeResult(wantPod, PodUsage(p))
		}
		pending = quota.Add(pending, quota.Add(claim, pod))
	}
	return quota.RemoveZeros(pending)
}

// chargedResources are the quota resources a database's children are charged.
var chargedResources = map[corev1.ResourceName]bool{
	corev1.ResourcePods: true, "count/pods": true,
	corev1.ResourceCPU: true, corev1.ResourceRequestsCPU: true, corev1.ResourceLimitsCPU: true,
	corev1.ResourceMemory: true, corev1.ResourceRequestsMemory: true, corev1.ResourceLimitsMemory: true,
	corev1.ResourceEphemeralStorage: true, corev1.ResourceRequestsEphemeralStorage: true, corev1.ResourceLimitsEphemeralStorage: true,
	corev1.ResourcePersistentVolumeClaims: true, "count/persistentvolumeclaims": true, corev1.ResourceRequestsStorage: true,
}

// matchingResources are the names among input that children are charged.
func matchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range input {
		if chargedResources[name] || strings.HasSuffix(string(name), storageClassSuffix+string(corev1.ResourceRequestsStorage)) ||
			strings.HasSuffix(string(name), storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims)) {
			out = append(out, name)
		}
	}
	return out
}
