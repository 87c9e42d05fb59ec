package limitrange

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/scaled"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = q(kv[i+1])
	}
	return l
}

func container(item corev1.LimitRangeItem) corev1.LimitRangeItem {
	item.Type = corev1.LimitTypeContainer
	return item
}

func errStrings(errs []error) []string {
	var out []string
	for _, err := range errs {
		out = append(out, err.Error())
	}
	return out
}

func TestCheck(t *testing.T) {
	defaults := *examplev1.DefaultResources.DeepCopy() // requests 250m/512Mi, limits 1/1Gi
	cases := []struct {
		name      string
		resources corev1.ResourceRequirements
		size      string
		items     []corev1.LimitRangeItem
		want      []string
	}{{
		name:      "a 1-CPU limit above a 500m max",
		resources: defaults,
		items:     []corev1.LimitRangeItem{container(corev1.LimitRangeItem{Max: list("cpu", "500m")})},
		want:      []string{"spec.resources.limits[cpu]: maximum cpu usage per Container is 500m, but limit is 1"},
	}, {
		name:      "within max",
		resources: defaults,
		items:     []corev1.LimitRangeItem{container(corev1.LimitRangeItem{Max: list("cpu", "2", "memory", "2Gi")})},
	}, {
		name:      "no limit under a max",
		resources: corev1.ResourceRequirements{Requests: list("cpu", "100m")},
		items:     []corev1.LimitRangeItem{container(corev1.LimitRangeItem{Max: list("cpu", "500m")})},
		want:      []string{"spec.resources.limits[cpu]: maximum cpu usage per Container is 500m.  No limit is specified"},
	}, {
		name:      "a request below min; mydb's init container too",
		resources: defaults,
		items:     []corev1.LimitRangeItem{container(corev1.LimitRangeItem{Min: list("cpu", "300m")})},
		want: []string{
			"spec.resources.requests[cpu]: minimum cpu usage per Container is 300m, but request is 250m",
			"mydb's init container (requests cpu=10m,memory=32Mi, limits cpu=100m,memory=64Mi), which every database pod runs: minimum cpu usage per Container is 300m, but request is 10m",
		},
	}, {
		name:      "limit to request ratio",
		resources: defaults,
		items:     []corev1.LimitRangeItem{container(corev1.LimitRangeItem{MaxLimitRequestRatio: list("cpu", "2")})},
		want: []string{
			"spec.resources.limits[cpu]: cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000",
			"mydb's init container (requests cpu=10m,memory=32Mi, limits cpu=100m,memory=64Mi), which every database pod runs: cpu max limit to request ratio per Container is 2, but provided ratio is 10.000000",
		},
	}, {
		name:      "a pod's effective limits",
		resources: defaults,
		items:     []corev1.LimitRangeItem{{Type: corev1.LimitTypePod, Max: list("memory", "512Mi")}},
		want:      []string{"spec.resources: maximum memory usage per Pod is 512Mi, but limit is 1Gi"},
	}, {
		name:      "a claim above max",
		resources: defaults,
		size:      "50Gi",
		items:     []corev1.LimitRangeItem{{Type: corev1.LimitTypePersistentVolumeClaim, Max: list("storage", "10Gi")}},
		want:      []string{"spec.storageSize: maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 50Gi"},
	}, {
		name:      "a claim below min",
		resources: defaults,
		size:      "1Gi",
		items:     []corev1.LimitRangeItem{{Type: corev1.LimitTypePersistentVolumeClaim, Min: list("storage", "5Gi")}},
		want:      []string{"spec.storageSize: minimum storage usage per PersistentVolumeClaim is 5Gi, but request is 1Gi"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			size := tc.size
			if size == "" {
				size = "1Gi"
			}
			spec := &example.MyDatabaseSpec{Replicas: 1, StorageSize: q(size), Resources: tc.resources}
			if diff := cmp.Diff(tc.want, errStrings(Check(spec, tc.items))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	items := []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Max: list("cpu", "4")},
		container(corev1.LimitRangeItem{Default: list("cpu", "500m", "memory", "768Mi"), DefaultRequest: list("cpu", "200m")}),
	}
	cases := []struct {
		name string
		in   corev1.ResourceRequirements
		want corev1.ResourceRequirements
	}{{
		name: "empty",
		want: corev1.ResourceRequirements{Limits: list("cpu", "500m", "memory", "768Mi"), Requests: list("cpu", "200m")},
	}, {
		name: "what the user set stays",
		in:   corev1.ResourceRequirements{Limits: list("cpu", "300m"), Requests: list("cpu", "300m")},
		want: corev1.ResourceRequirements{Limits: list("cpu", "300m", "memory", "768Mi"), Requests: list("cpu", "300m")},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.in
			Default(&r, items)
			if diff := cmp.Diff(tc.want, r); diff != "" {
				t.Errorf("defaulted (-want +got):\n%s", diff)
			}
		})
	}
}

// The plugin as the server runs it: LimitRange defaults first, the API's
// after (the strategy), then the bounds.
func TestPlugin(t *testing.T) {
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "cpu"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		container(corev1.LimitRangeItem{Max: list("cpu", "500m"), Default: list("cpu", "500m"), DefaultRequest: list("cpu", "500m")}),
	}}}
	factory := informers.NewSharedInformerFactory(kubefake.NewClientset(lr), 0)
	p := NewPlugin()
	p.SetExternalKubeInformerFactory(factory)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	cache.WaitForCacheSync(stop, p.synced)

	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "mydatabases"}
	attrs := func(obj, old runtime.Object, sub string) admission.Attributes {
		op := admission.Create
		if old != nil || sub != "" {
			op = admission.Update
		}
		return admission.NewAttributesRecord(obj, old, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "MyDatabase"},
			"team", "shop", gvr, sub, op, nil, false, nil)
	}
	ctx := context.Background()

	empty := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shop"}, Spec: example.MyDatabaseSpec{Replicas: 1, StorageSize: q("1Gi")}}
	if err := p.Admit(ctx, attrs(empty, nil, ""), nil); err != nil {
		t.Fatal(err)
	}
	examplev1.SetDefaultResources(&empty.Spec.Resources) // PrepareForCreate
	want := corev1.ResourceRequirements{Limits: list("cpu", "500m", "memory", "1Gi"), Requests: list("cpu", "500m", "memory", "512Mi")}
	if diff := cmp.Diff(want, empty.Spec.Resources); diff != "" {
		t.Errorf("an empty database (-want +got):\n%s", diff)
	}
	if err := p.Validate(ctx, attrs(empty, nil, ""), nil); err != nil {
		t.Errorf("the defaulted database: %v", err)
	}

	big := empty.DeepCopy()
	big.Spec.Resources = corev1.ResourceRequirements{Limits: list("cpu", "1"), Requests: list("cpu", "1")}
	if err := p.Admit(ctx, attrs(big, nil, ""), nil); err != nil {
		t.Fatal(err)
	}
	wantErr := `mydatabases.example.com "shop" is forbidden: spec.resources.limits[cpu]: maximum cpu usage per Container is 500m, but limit is 1`
	if err := p.Validate(ctx, attrs(big, nil, ""), nil); err == nil || err.Error() != wantErr {
		t.Errorf("a 1-CPU database: %v, want %s", err, wantErr)
	}

	// An old database that breaks a newer LimitRange may change what makes no
	// pods, but not scale up.
	relabelled := big.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	if err := p.Validate(ctx, attrs(relabelled, big, ""), nil); err != nil {
		t.Errorf("relabelling: %v", err)
	}
	up := big.DeepCopy()
	up.Spec.Replicas = 2
	scaleCtx := scaled.With(ctx, scaled.Databases{New: up, Old: big})
	if err := p.Validate(scaleCtx, attrs(&metav1.Status{}, &metav1.Status{}, "scale"), nil); err == nil || err.Error() != wantErr {
		t.Errorf("scaling up through /scale: %v, want %s", err, wantErr)
	}
}
