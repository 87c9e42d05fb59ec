package mydatabase

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	"github.com/mydb-dev/mydb/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// costing is what of a container quota and LimitRange look at.
type costing struct {
	Name      string
	Resources corev1.ResourceRequirements
}

func costings(cs []corev1.Container) []costing {
	out := make([]costing, 0, len(cs))
	for _, c := range cs {
		out = append(out, costing{c.Name, c.Resources})
	}
	return out
}

// The pods the StatefulSet makes are the pod quota and LimitRange admission
// charged and bounded (databasepod.Pod): the same containers, by name and in
// order, with the same resources, and no pod-level figure on top, for every
// engine, restored or not, whatever spec.resources says.
func TestPodTemplateIsTheAdmittedPod(t *testing.T) {
	q := resource.MustParse
	for sizes, resources := range map[string]corev1.ResourceRequirements{
		"none": {},
		"cpu and memory": {Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("512Mi")},
			Limits: corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")}},
		// Below the init container's, and ephemeral storage, which it has not.
		"small and ephemeral": {Requests: corev1.ResourceList{corev1.ResourceCPU: q("5m"), corev1.ResourceEphemeralStorage: q("1Gi")},
			Limits: corev1.ResourceList{corev1.ResourceMemory: q("48Mi"), corev1.ResourceEphemeralStorage: q("2Gi")}},
	} {
		for _, name := range engine.Names() {
			for _, restore := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s %s restore=%v", sizes, name, restore), func(t *testing.T) {
					eng, _ := engine.Lookup(name)
					db := myDatabase(func(d *examplev1.MyDatabase) {
						d.Spec.Engine, d.Spec.Version, d.Spec.Resources = examplev1.Engine(name), eng.DefaultVersion, *resources.DeepCopy()
					})
					template := NewStatefulSet(db, eng, nil, "mydb:test", restore).Spec.Template.Spec
					admitted := databasepod.Pod(resources).Spec
					if diff := cmp.Diff(costings(admitted.InitContainers), costings(template.InitContainers)); diff != "" {
						t.Errorf("init containers (-admitted +template):\n%s", diff)
					}
					if diff := cmp.Diff(costings(admitted.Containers), costings(template.Containers)); diff != "" {
						t.Errorf("containers (-admitted +template):\n%s", diff)
					}
					if template.Resources != nil || template.Overhead != nil {
						t.Errorf("the template has pod-level resources %v or overhead %v that admission does not charge", template.Resources, template.Overhead)
					}
					// What quota charges and a Pod LimitRange bounds: the effective figures.
					pod := &corev1.Pod{Spec: template}
					for what, f := range map[string]func(*corev1.Pod, resourcehelper.PodResourcesOptions) corev1.ResourceList{
						"requests": resourcehelper.PodRequests, "limits": resourcehelper.PodLimits,
					} {
						if diff := cmp.Diff(f(databasepod.Pod(resources), resourcehelper.PodResourcesOptions{}), f(pod, resourcehelper.PodResourcesOptions{})); diff != "" {
							t.Errorf("effective %s (-admitted +template):\n%s", what, diff)
						}
					}
				})
			}
		}
	}
}
