package quota

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	examplelisters "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/scaled"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
)

// PluginName is the admission plugin that charges a MyDatabase against its
// namespace's ResourceQuotas for what its children will use.
const PluginName = "MyDatabaseResourceQuota"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin() })
}

// ledgerTTL bounds how long an admitted change counts before mydb's own
// informer shows it: far longer than a watch event takes, short enough that
// a write that failed after admission holds back little for long.
const ledgerTTL = 30 * time.Second

// syncTimeout is how long a request waits for the caches after a restart.
const syncTimeout = 10 * time.Second

// Plugin refuses a MyDatabase create, update or /scale whose children would
// exceed a ResourceQuota of the namespace, at once, instead of the
// StatefulSet controller failing on the claim that does not fit.
//
// kube-apiserver charges the children themselves when they are created, so
// this plugin charges nothing: it checks, per quota,
//
//	status.used + pending(every other database) + pending(this one) <= hard
//
// where pending is what a database's claims and pods will be charged beyond
// what exists of them (Pending), so nothing that exists counts twice. It
// also charges count/mydatabasebackups.example.com for POST
// mydatabases/<name>/backup, which the ResourceQuota plugin skips as a
// subresource, through a ResourceQuota plugin of its own.
type Plugin struct {
	*admission.Handler

	counts       *resourcequota.QuotaAdmission
	stopCh       <-chan struct{}
	kubeClient   kubernetes.Interface
	kubeFactory  informers.SharedInformerFactory
	quotaConfig  quota.Configuration
	childFactory informers.SharedInformerFactory

	quotas    corelisters.ResourceQuotaLister
	classes   storagelisters.StorageClassLister
	claims    corelisters.PersistentVolumeClaimLister
	pods      corelisters.PodLister
	databases examplelisters.MyDatabaseLister
	synced    []cache.InformerSynced

	// lock makes decisions one at a time, so each sees the ones before it
	// through the ledger: databases admitted here whose writes mydb's
	// informer may not show yet.
	lock   sync.Mutex
	ledger map[ledgerKey]ledgerEntry
	now    func() time.Time
}

type ledgerKey struct{ namespace, name string }

type ledgerEntry struct {
	shape   Shape
	expires time.Time
}

// WantsMyDatabaseInformers is a plugin that reads mydb's own objects.
type WantsMyDatabaseInformers interface {
	SetMyDatabaseInformers(exampleinformers.SharedInformerFactory)
}

var (
	_ admission.ValidationInterface = &Plugin{}
	_ WantsMyDatabaseInformers      = &Plugin{}
)

// NewPlugin returns the plugin, to be initialized by the server.
func NewPlugin() (*Plugin, error) {
	counts, err := resourcequota.NewResourceQuota(nil, 2)
	if err != nil {
		return nil, err
	}
	return &Plugin{
		Handler: admission.NewHandler(admission.Create, admission.Update),
		counts:  counts,
		ledger:  map[ledgerKey]ledgerEntry{},
		now:     time.Now,
	}, nil
}

// SetDrainedNotification is when the server stops admitting.
func (p *Plugin) SetDrainedNotification(stopCh <-chan struct{}) { p.stopCh = stopCh }

// SetExternalKubeClientSet gives the client the plugin's informers on
// mydb's children use.
func (p *Plugin) SetExternalKubeClientSet(c kubernetes.Interface) { p.kubeClient = c }

// SetExternalKubeInformerFactory gives the shared informers (quotas, classes).
func (p *Plugin) SetExternalKubeInformerFactory(f informers.SharedInformerFactory) {
	p.kubeFactory = f
	p.quotas = f.Core().V1().ResourceQuotas().Lister()
	p.classes = f.Storage().V1().StorageClasses().Lister()
	p.synced = append(p.synced, f.Core().V1().ResourceQuotas().Informer().HasSynced, f.Storage().V1().StorageClasses().Informer().HasSynced)
}

// SetQuotaConfiguration gives the evaluators the backup count is charged with.
func (p *Plugin) SetQuotaConfiguration(c quota.Configuration) { p.quotaConfig = c }

// SetMyDatabaseInformers gives the informers on mydb's own API.
func (p *Plugin) SetMyDatabaseInformers(f exampleinformers.SharedInformerFactory) {
	i := f.Example().V1().MyDatabases()
	p.databases = i.Lister()
	p.synced = append(p.synced, i.Informer().HasSynced)
}

// ValidateInitialization completes the plugin: the claims and pods it reads
// are only mydb's (labelled app.kubernetes.io/managed-by=mydb), from
// informers of its own.
func (p *Plugin) ValidateInitialization() error {
	if p.stopCh == nil || p.kubeClient == nil || p.kubeFactory == nil || p.quotaConfig == nil || p.databases == nil {
		return fmt.Errorf("%s: missing the drained notification, kube client, kube informers, quota configuration or MyDatabase informers", PluginName)
	}
	p.counts.SetDrainedNotification(p.stopCh)
	p.counts.SetExternalKubeClientSet(p.kubeClient)
	p.counts.SetExternalKubeInformerFactory(p.kubeFactory)
	p.counts.SetQuotaConfiguration(p.quotaConfig)
	if err := p.counts.ValidateInitialization(); err != nil {
		return err
	}
	p.childFactory = informers.NewSharedInformerFactoryWithOptions(p.kubeClient, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = names.LabelManagedBy + "=" + names.ManagedBy
	}))
	claims, pods := p.childFactory.Core().V1().PersistentVolumeClaims(), p.childFactory.Core().V1().Pods()
	p.claims, p.pods = claims.Lister(), pods.Lister()
	p.synced = append(p.synced, claims.Informer().HasSynced, pods.Informer().HasSynced)
	p.childFactory.Start(p.stopCh)
	return nil
}

var (
	databasesResource = example.Resource("mydatabases")
	backupsResource   = example.Resource("mydatabasebackups")
	v1                = schema.GroupVersion{Group: example.GroupName, Version: "v1"}
)

// Validate checks the requests that change what a database's children use.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	gr, sub, op := a.GetResource().GroupResource(), a.GetSubresource(), a.GetOperation()
	switch {
	case gr == databasesResource && sub == "":
		db, ok := a.GetObject().(*example.MyDatabase)
		if !ok {
			return nil
		}
		old, _ := a.GetOldObject().(*example.MyDatabase)
		return p.checkDatabase(ctx, a, db, old)
	case gr == databasesResource && sub == "scale" && op == admission.Update:
		s, ok := scaled.From(ctx)
		if !ok {
			return nil
		}
		return p.checkDatabase(ctx, a, s.New, s.Old)
	case gr == databasesResource && sub == "backup" && op == admission.Create:
		// A backup makes no pod and no claim (the instance manager streams
		// it to object storage): only its count is charged.
		backup, ok := a.GetObject().(*example.MyDatabaseBackup)
		if !ok {
			return nil
		}
		if err := p.waitForCaches(ctx); err != nil {
			return err
		}
		return p.counts.Validate(ctx, admission.NewAttributesRecord(backup, nil, v1.WithKind("MyDatabaseBackup"),
			a.GetNamespace(), backup.Name, v1.WithResource("mydatabasebackups"), "", admission.Create,
			a.GetOperationOptions(), a.IsDryRun(), a.GetUserInfo()), o)
	}
	return nil
}

func (p *Plugin) waitForCaches(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s: the caches of quotas, MyDatabases and their claims and pods have not synced yet", PluginName))
	}
	return nil
}

func (p *Plugin) children(namespace string) (Children, error) {
	c := Children{Claims: map[string]*corev1.PersistentVolumeClaim{}, Pods: map[string]*corev1.Pod{}}
	claims, err := p.claims.PersistentVolumeClaims(namespace).List(labels.Everything())
	if err != nil {
		return c, err
	}
	for _, pvc := range claims {
		c.Claims[pvc.Name] = pvc
	}
	pods, err := p.pods.Pods(namespace).List(labels.Everything())
	if err != nil {
		return c, err
	}
	for _, pod := range pods {
		c.Pods[pod.Name] = pod
	}
	classes, err := p.classes.List(labels.Everything())
	if err != nil {
		return c, err
	}
	c.DefaultClass = DefaultClass(classes)
	return c, nil
}

// DefaultClass is the StorageClass a claim that names none gets, as
// kube-apiserver's DefaultStorageClass admission picks it: of those marked
// default, the newest (by name when created together); "" when none is.
func DefaultClass(classes []*storagev1.StorageClass) string {
	var chosen *storagev1.StorageClass
	for _, c := range classes {
		if c.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" &&
			c.Annotations["storageclass.beta.kubernetes.io/is-default-class"] != "true" {
			continue
		}
		if chosen == nil || c.CreationTimestamp.After(chosen.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&chosen.CreationTimestamp) && c.Name < chosen.Name) {
			chosen = c
		}
	}
	if chosen == nil {
		return ""
	}
	return chosen.Name
}

// pendingOthers sums what the namespace's databases other than skip will
// still be charged, counting each database admitted here but not yet in the
// informer (or older there) as admitted. Called with p.lock held.
func (p *Plugin) pendingOthers(namespace, skip string, c Children) (corev1.ResourceList, error) {
	dbs, err := p.databases.MyDatabases(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	now := p.now()
	for key, e := range p.ledger {
		if now.After(e.expires) {
			delete(p.ledger, key)
		}
	}
	total := corev1.ResourceList{}
	seen := map[string]bool{}
	for _, db := range dbs {
		if db.Name == skip {
			continue
		}
		seen[db.Name] = true
		pending := Pending(ShapeOfV1(db), c)
		if e, ok := p.ledger[ledgerKey{namespace, db.Name}]; ok {
			pending = quota.Max(pending, Pending(e.shape, c))
		}
		total = quota.Add(total, pending)
	}
	for key, e := range p.ledger {
		if key.namespace == namespace && key.name != skip && !seen[key.name] {
			total = quota.Add(total, Pending(e.shape, c))
		}
	}
	return total, nil
}

func (p *Plugin) quotasOf(namespace string) ([]corev1.ResourceQuota, error) {
	list, err := p.quotas.ResourceQuotas(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]corev1.ResourceQuota, 0, len(list))
	for _, q := range list {
		out = append(out, *q.DeepCopy())
	}
	return out, nil
}

// withPending adds pending to each quota's status.used, for the resources
// the quota limits and already reports (a quota whose usage kube's quota
// controller has not computed yet stays unknown, and refuses, as in
// kube-apiserver).
func withPending(quotas []corev1.ResourceQuota, pending corev1.ResourceList) {
	for i := range quotas {
		used := quotas[i].Status.Used
		if used == nil {
			continue
		}
		quotas[i].Status.Used = quota.Add(used, quota.Mask(pending, quota.Intersection(quota.ResourceNames(quotas[i].Status.Hard), quota.ResourceNames(used))))
	}
}

func (p *Plugin) checkDatabase(ctx context.Context, a admission.Attributes, db, old *example.MyDatabase) error {
	if db == nil {
		return nil
	}
	if err := p.waitForCaches(ctx); err != nil {
		return err
	}
	ns := a.GetNamespace()
	quotas, err := p.quotasOf(ns)
	if err != nil || len(quotas) == 0 {
		return err
	}
	p.lock.Lock()
	defer p.lock.Unlock()
	c, err := p.children(ns)
	if err != nil {
		return err
	}
	// An update that makes nothing more (labels, finalizers, deletion,
	// scaling down) is never refused, even by a quota whose usage is not
	// computed yet or that is already exceeded.
	if old != nil && quota.IsZero(quota.SubtractWithNonNegativeResult(Pending(ShapeOf(db), c), Pending(ShapeOf(old), c))) {
		return nil
	}
	pending, err := p.pendingOthers(ns, db.Name, c)
	if err != nil {
		return err
	}
	op := admission.Create
	var oldObj runtime.Object
	if old != nil {
		op = admission.Update
		oldObj = old
		pending = quota.Add(pending, Pending(ShapeOf(old), c))
	}
	withPending(quotas, pending)
	attrs := admission.NewAttributesRecord(db, oldObj, v1.WithKind("MyDatabase"), ns, db.Name,
		v1.WithResource("mydatabases"), "", op, a.GetOperationOptions(), a.IsDryRun(), a.GetUserInfo())
	if _, err := resourcequota.CheckRequest(quotas, attrs, &Evaluator{Children: c}, nil); err != nil {
		return err
	}
	if !a.IsDryRun() {
		p.ledger[ledgerKey{ns, db.Name}] = ledgerEntry{shape: ShapeOf(db), expires: p.now().Add(ledgerTTL)}
	}
	return nil
}

// Evaluator is the quota evaluator of a MyDatabase's children: a
// database's usage is what its children will still be charged (Pending).
type Evaluator struct {
	Children Children
}

var _ quota.Evaluator = &Evaluator{}

func (e *Evaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }
func (e *Evaluator) GroupResource() schema.GroupResource                     { return databasesResource }
func (e *Evaluator) Handles(a admission.Attributes) bool {
	return a.GetOperation() == admission.Create || a.GetOperation() == admission.Update
}
func (e *Evaluator) Matches(q *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(q, item, matchingResources, matchesScope)
}
func (e *Evaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
func (e *Evaluator) UncoveredQuotaScopes([]corev1.ScopedResourceSelectorRequirement, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}
func (e *Evaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return matchingResources(input)
}
func (e *Evaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	db, ok := item.(*example.MyDatabase)
	if !ok {
		return nil, fmt.Errorf("expected a MyDatabase, got %T", item)
	}
	return Pending(ShapeOf(db), e.Children), nil
}
func (e *Evaluator) UsageStats(quota.UsageStatsOptions) (quota.UsageStats, error) {
	return quota.UsageStats{}, fmt.Errorf("the usage of MyDatabases' children is their claims' and pods'")
}

// matchesScope says whether database pods fall in a quota scope: they are
// long-running (NotTerminating), have requests (NotBestEffort) and no
// priority class.
func matchesScope(scope corev1.ScopedResourceSelectorRequirement, _ runtime.Object) (bool, error) {
	switch scope.ScopeName {
	case corev1.ResourceQuotaScopeNotTerminating, corev1.ResourceQuotaScopeNotBestEffort:
		return true, nil
	case corev1.ResourceQuotaScopePriorityClass:
		return scope.Operator == corev1.ScopeSelectorOpDoesNotExist || scope.Operator == corev1.ScopeSelectorOpNotIn, nil
	}
	return false, nil
}
