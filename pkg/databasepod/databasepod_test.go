package databasepod

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestSpecNamesAndSizesTheContainers(t *testing.T) {
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}
	spec := Spec(resources,
		corev1.Container{Name: "ignored", Image: "mydb", Resources: resources},
		corev1.Container{Image: "postgres"})
	want := corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: InitContainerName, Image: "mydb", Resources: InitContainerResources()}},
		Containers:     []corev1.Container{{Name: DatabaseContainerName, Image: "postgres", Resources: resources}},
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("Spec (-want +got):\n%s", diff)
	}
	spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	if q := resources.Limits[corev1.ResourceCPU]; q.String() != "1" {
		t.Errorf("the pod shares the caller's resources: its limit became %s", q.String())
	}
	if diff := cmp.Diff(want, Pod(resources).Spec, cmp.Transformer("images", func(c corev1.Container) corev1.Container {
		c.Image = ""
		return c
	})); diff != "" {
		t.Errorf("Pod is not Spec's containers alone (-want +got):\n%s", diff)
	}
}
