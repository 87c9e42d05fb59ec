// Package limitrange applies a namespace's LimitRanges to MyDatabases at
// admission: kube-apiserver's LimitRanger would default and bound the pods
// and claims a database makes only when the StatefulSet controller creates
// them, and refuse them there, where nobody sees it. Here spec.resources is
// defaulted from the LimitRange and a database whose pods or claims the
// namespace would refuse is refused itself, naming the field.
package limitrange

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	"github.com/mydb-dev/mydb/pkg/scaled"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PluginName is the admission plugin's name.
const PluginName = "MyDatabaseLimitRanger"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin(), nil })
}

// Plugin defaults and bounds MyDatabases by their namespace's LimitRanges.
type Plugin struct {
	*admission.Handler
	limits corelisters.LimitRangeLister
	synced cache.InformerSynced
}

var (
	_ admission.MutationInterface   = &Plugin{}
	_ admission.ValidationInterface = &Plugin{}
)

// NewPlugin returns the plugin, to be given the kube informers.
func NewPlugin() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update)}
}

// SetExternalKubeInformerFactory gives the LimitRange informer.
func (p *Plugin) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	i := f.Core().V1().LimitRanges()
	p.limits, p.synced = i.Lister(), i.Informer().HasSynced
	p.SetReadyFunc(i.Informer().HasSynced)
}

// ValidateInitialization checks the plugin has its informer.
func (p *Plugin) ValidateInitialization() error {
	if p.limits == nil {
		return fmt.Errorf("%s: missing the LimitRange informer", PluginName)
	}
	return nil
}

var databases = example.Resource("mydatabases")

func (p *Plugin) items(namespace string) ([]corev1.LimitRangeItem, error) {
	list, err := p.limits.LimitRanges(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	// In name order, so defaults from overlapping LimitRanges are stable.
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	var items []corev1.LimitRangeItem
	for _, l := range list {
		items = append(items, l.Spec.Limits...)
	}
	return items, nil
}

// Admit fills the figures of spec.resources the user left out from the
// Container LimitRanges' default (limits) and defaultRequest (requests), as
// kube-apiserver's LimitRanger does for a pod's containers. The API's own
// defaults fill what is still missing afterwards.
func (p *Plugin) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != databases || a.GetSubresource() != "" {
		return nil
	}
	db, ok := a.GetObject().(*example.MyDatabase)
	if !ok {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, fmt.Errorf("not yet ready to handle request"))
	}
	items, err := p.items(a.GetNamespace())
	if err != nil {
		return err
	}
	Default(&db.Spec.Resources, items)
	return nil
}

// Default sets each figure of r that is missing and that a Container item
// of items defaults.
func Default(r *corev1.ResourceRequirements, items []corev1.LimitRangeItem) {
	for _, item := range items {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for name, q := range item.Default {
			if _, ok := r.Limits[name]; !ok {
				if r.Limits == nil {
					r.Limits = corev1.ResourceList{}
				}
				r.Limits[name] = q.DeepCopy()
			}
		}
		for name, q := range item.DefaultRequest {
			if _, ok := r.Requests[name]; !ok {
				if r.Requests == nil {
					r.Requests = corev1.ResourceList{}
				}
				r.Requests[name] = q.DeepCopy()
			}
		}
	}
}

// Validate refuses a database whose pods or claims the namespace's
// LimitRanges would refuse: at create, and at an update (or /scale) that
// makes pods or claims anew (more replicas, other resources or version,
// more storage). A backup makes no pod: it is not checked.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != databases {
		return nil
	}
	var db, old *example.MyDatabase
	switch a.GetSubresource() {
	case "":
		db, _ = a.GetObject().(*example.MyDatabase)
		old, _ = a.GetOldObject().(*example.MyDatabase)
	case "scale":
		s, ok := scaled.From(ctx)
		if !ok {
			return nil
		}
		db, old = s.New, s.Old
	default:
		return nil
	}
	if db == nil || (old != nil && !makesChildren(db, old)) {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, fmt.Errorf("not yet ready to handle request"))
	}
	items, err := p.items(a.GetNamespace())
	if err != nil {
		return err
	}
	if errs := Check(&db.Spec, items); len(errs) > 0 {
		return admission.NewForbidden(a, utilerrors.NewAggregate(errs))
	}
	return nil
}

func makesChildren(db, old *example.MyDatabase) bool {
	return db.Spec.Replicas > old.Spec.Replicas || db.Spec.Version != old.Spec.Version ||
		!apiequality.Semantic.DeepEqual(db.Spec.Resources, old.Spec.Resources) || db.Spec.StorageSize.Cmp(old.Spec.StorageSize) != 0
}

var (
	specPath      = field.NewPath("spec")
	resourcesPath = specPath.Child("resources")
)

// Check returns what of items a database's pods and claims would break,
// each naming the field to change, in kube-apiserver's LimitRanger's words.
func Check(spec *example.MyDatabaseSpec, items []corev1.LimitRangeItem) []error {
	if len(items) == 0 {
		return nil // most namespaces: no pod to build for nothing to check
	}
	var errs []error
	pod := databasepod.Pod(spec.Resources)
	init := databasepod.InitContainerResources()
	for _, item := range items {
		switch item.Type {
		case corev1.LimitTypeContainer:
			errs = append(errs, bound(string(corev1.LimitTypeContainer), item, spec.Resources.Requests, spec.Resources.Limits,
				func(kind string, name corev1.ResourceName) *field.Path {
					return resourcesPath.Child(kind).Key(string(name))
				})...)
			for _, err := range bound(string(corev1.LimitTypeContainer), item, init.Requests, init.Limits, nil) {
				errs = append(errs, fmt.Errorf("mydb's init container (%s), which every database pod runs: %v", describe(init), err))
			}
		case corev1.LimitTypePod:
			requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
			limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
			errs = append(errs, bound(string(corev1.LimitTypePod), item, requests, limits,
				func(string, corev1.ResourceName) *field.Path { return resourcesPath })...)
		case corev1.LimitTypePersistentVolumeClaim:
			size := corev1.ResourceList{corev1.ResourceStorage: spec.StorageSize}
			errs = append(errs, bound(string(corev1.LimitTypePersistentVolumeClaim), item, size, nil,
				func(string, corev1.ResourceName) *field.Path { return specPath.Child("storageSize") })...)
		}
	}
	return errs
}

// bound checks requests and limits against one item's min, max and
// maxLimitRequestRatio; path names the field an error is about (nil: none).
func bound(kind string, item corev1.LimitRangeItem, requests, limits corev1.ResourceList, path func(kind string, name corev1.ResourceName) *field.Path) []error {
	var errs []error
	report := func(at string, name corev1.ResourceName, format string, args ...any) {
		err := fmt.Errorf(format, args...)
		if path != nil {
			err = fmt.Errorf("%s: %v", path(at, name), err)
		}
		errs = append(errs, err)
	}
	// The claim's size is its request; a claim has no limit.
	claim := kind == string(corev1.LimitTypePersistentVolumeClaim)
	for _, name := range sortedNames(item.Min) {
		enforced := item.Min[name]
		req, reqOK := requests[name]
		lim, limOK := limits[name]
		switch {
		case !reqOK:
			report("requests", name, "minimum %s usage per %s is %s.  No request is specified", name, kind, enforced.String())
		case less(req, enforced):
			report("requests", name, "minimum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
		case limOK && less(lim, enforced):
			report("limits", name, "minimum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
		}
	}
	for _, name := range sortedNames(item.Max) {
		enforced := item.Max[name]
		req, reqOK := requests[name]
		lim, limOK := limits[name]
		switch {
		case claim && reqOK && less(enforced, req):
			report("requests", name, "maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
		case claim:
		case !limOK:
			report("limits", name, "maximum %s usage per %s is %s.  No limit is specified", name, kind, enforced.String())
		case less(enforced, lim):
			report("limits", name, "maximum %s usage per %s is %s, but limit is %s", name, kind, enforced.String(), lim.String())
		case reqOK && less(enforced, req):
			report("requests", name, "maximum %s usage per %s is %s, but request is %s", name, kind, enforced.String(), req.String())
		}
	}
	for _, name := range sortedNames(item.MaxLimitRequestRatio) {
		enforced := item.MaxLimitRequestRatio[name]
		req, reqOK := requests[name]
		lim, limOK := limits[name]
		switch {
		case !reqOK || req.IsZero():
			report("requests", name, "%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, enforced.String())
		case !limOK || lim.IsZero():
			report("limits", name, "%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, kind, enforced.String())
		default:
			ratio := lim.AsApproximateFloat64() / req.AsApproximateFloat64()
			if ratio > enforced.AsApproximateFloat64() {
				report("limits", name, "%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, enforced.String(), ratio)
			}
		}
	}
	return errs
}

func less(a, b resource.Quantity) bool { return a.Cmp(b) < 0 }

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(l))
	for name := range l {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// describe shows a container's requests and limits as
// "requests cpu=10m,memory=32Mi, limits cpu=100m,memory=64Mi".
func describe(r corev1.ResourceRequirements) string {
	list := func(l corev1.ResourceList) string {
		parts := make([]string, 0, len(l))
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
			if q, ok := l[name]; ok {
				parts = append(parts, string(name)+"="+q.String())
			}
		}
		return strings.Join(parts, ",")
	}
	return "requests " + list(r.Requests) + ", limits " + list(r.Limits)
}
