// Package databasepod is the one description of the pod every replica of a
// MyDatabase runs, as far as what it costs: which containers it has, their
// names, and their resources. The controller dresses it into the
// StatefulSet's pod template (images, commands, probes, volumes); quota
// and LimitRange admission charge and bound it as it is, so what admission
// counts is what the pods will be. It imports nothing of mydb's.
package databasepod

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The containers' names.
const (
	// InitContainerName copies mydb-instance out of mydb's image into the pod.
	InitContainerName = "copy-instance-manager"
	// DatabaseContainerName runs mydb-instance, which runs the engine.
	DatabaseContainerName = "database"
)

// InitContainerResources are those of the init container, which every
// database pod runs: LimitRange bounds them and quota charges them too.
func InitContainerResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
}

// Spec is the pod of a database whose spec.resources is resources: init
// as mydb's init container and database as the database container, each
// named and given its resources here (what either says of its name or its
// resources is replaced), and nothing else.
func Spec(resources corev1.ResourceRequirements, init, database corev1.Container) corev1.PodSpec {
	init.Name, init.Resources = InitContainerName, InitContainerResources()
	database.Name, database.Resources = DatabaseContainerName, *resources.DeepCopy()
	return corev1.PodSpec{InitContainers: []corev1.Container{init}, Containers: []corev1.Container{database}}
}

// Pod is the pod of a database whose spec.resources is resources, as quota
// and LimitRange look at it: its containers' names and resources alone.
func Pod(resources corev1.ResourceRequirements) *corev1.Pod {
	return &corev1.Pod{Spec: Spec(resources, corev1.Container{}, corev1.Container{})}
}
