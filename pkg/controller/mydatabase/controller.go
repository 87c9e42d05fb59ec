// Package mydatabase is the controller that turns every MyDatabase into a
// running database: a credentials Secret, a headless and a client Service,
// a StatefulSet whose replicas each own a volume, and a PodDisruptionBudget,
// and reports what it sees through /status.
package mydatabase

import (
	"context"
	"fmt"
	"time"

	"github.com/mydb-dev/mydb/pkg/scope"

	"github.com/mydb-dev/mydb/pkg/names"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/runner"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	"github.com/mydb-dev/mydb/pkg/engine"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	examplelisters "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/rollout"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	appsinformers "k8s.io/client-go/informers/apps/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	policyinformers "k8s.io/client-go/informers/policy/v1"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Event reasons.
const (
	ReasonCreated              = "Created"
	ReasonUpdated              = "Updated"
	ReasonDeleted              = "Deleted"
	ReasonResourceExists       = "ErrResourceExists"
	ReasonResizingVolume       = "ResizingVolume"
	ReasonExpansionUnsupported = "StorageExpansionUnsupported"
	ReasonNamespaceNotServed   = "NamespaceNotServed"
	ReasonCredentialsOwned     = "CredentialsOwned"
)

// Informers are the shared informers the controller reads from. The ones
// from the main cluster should be filtered to objects labelled
// app.kubernetes.io/managed-by=mydb, but StorageClasses.
type Informers struct {
	MyDatabases            exampleinformers.MyDatabaseInformer
	StatefulSets           appsinformers.StatefulSetInformer
	Services               coreinformers.ServiceInformer
	Secrets                scope.SecretInformer
	PersistentVolumeClaims coreinformers.PersistentVolumeClaimInformer
	PodDisruptionBudgets   policyinformers.PodDisruptionBudgetInformer
	NetworkPolicies        networkinginformers.NetworkPolicyInformer
	ServiceAccounts        coreinformers.ServiceAccountInformer
	Roles                  rbacinformers.RoleInformer
	RoleBindings           rbacinformers.RoleBindingInformer
	// Pods are read for their addresses, and labelled with their roles.
	Pods           coreinformers.PodInformer
	StorageClasses storageinformers.StorageClassInformer
	// Backups are read for spec.restoreFrom.
	Backups exampleinformers.MyDatabaseBackupInformer
}

// NewInformers takes the controller's informers from factories: kube for the
// children (filtered to mydb's label), storage for StorageClasses, own for
// mydb's API.
func NewInformers(kube, storage informers.SharedInformerFactory, own mydbinformers.SharedInformerFactory) Informers {
	return Informers{
		MyDatabases:            own.Example().V1().MyDatabases(),
		StatefulSets:           kube.Apps().V1().StatefulSets(),
		Services:               kube.Core().V1().Services(),
		Secrets:                scope.AllNamespaces(kube.Core().V1().Secrets()),
		PersistentVolumeClaims: kube.Core().V1().PersistentVolumeClaims(),
		PodDisruptionBudgets:   kube.Policy().V1().PodDisruptionBudgets(),
		NetworkPolicies:        kube.Networking().V1().NetworkPolicies(),
		ServiceAccounts:        kube.Core().V1().ServiceAccounts(),
		Roles:                  kube.Rbac().V1().Roles(),
		RoleBindings:           kube.Rbac().V1().RoleBindings(),
		Pods:                   kube.Core().V1().Pods(),
		StorageClasses:         storage.Storage().V1().StorageClasses(),
		Backups:                own.Example().V1().MyDatabaseBackups(),
	}
}

// children are the informers of the objects a MyDatabase owns.
func (i Informers) children() []cache.SharedIndexInformer {
	return append([]cache.SharedIndexInformer{
		i.StatefulSets.Informer(), i.Services.Informer(),
		i.PersistentVolumeClaims.Informer(), i.PodDisruptionBudgets.Informer(), i.NetworkPolicies.Informer(),
		i.ServiceAccounts.Informer(), i.Roles.Informer(), i.RoleBindings.Informer(), i.Pods.Informer(),
	}, i.Secrets.Informers()...)
}

// All are every informer the controller reads.
func (i Informers) All() []cache.SharedIndexInformer {
	return append(i.children(), i.MyDatabases.Informer(), i.StorageClasses.Informer(), i.Backups.Informer())
}

// Config are the controller's settings.
type Config struct {
	// InstanceImage ships mydb-instance, which an init container copies
	// into every database pod.
	InstanceImage string
	// EngineImages replace the pinned images of some engine versions
	// (--engine-image).
	EngineImages engine.ImageOverrides
	// PollInterval is how often every instance manager is read, and how
	// soon after its health stream says something changed that a poll
	// need not act on at once.
	PollInterval time.Duration
	// ResyncInterval is how often an instance manager is read while every
	// instance of its database streams its health and says nothing
	// changed (below PollInterval: PollInterval).
	ResyncInterval time.Duration
	// PollOnly opens no health streams: every instance is polled every
	// PollInterval, and failoverDelay counts from the poll that saw a loss.
	PollOnly bool
	// CARotationOverlap is how long a rotation of a database's CA trusts
	// both roots before the new one signs (carotation.Input.MinOverlap).
	CARotationOverlap time.Duration
	// Statuses reads the instance managers' status, and Restores asks
	// them for restores; nil is an api.Client, tests fake them.
	Statuses StatusReader
	Restores RestoreStarter
	// Archives tells the managers where their WAL archive is; nil is an
	// api.Client. Pruner deletes archived WAL past the recovery window;
	// nil is S3ArchivePruner.
	Archives ArchiveSetter
	Pruner   ArchivePruner
	// Objects gives the primaries' managers the spec's databases and
	// roles; nil is an api.Client.
	Objects ObjectsReconciler
	// Authority gives the credentials the managers are called with; nil
	// is one of the controller's own.
	Authority *databaseca.Authority
	// SwitchoverTimeout bounds a switchover (failover.DefaultSwitchoverTimeout when 0).
	SwitchoverTimeout time.Duration
	// MaxConcurrentRollouts bounds how many databases roll out a new pod
	// template at once (0: no bound).
	MaxConcurrentRollouts int
	// Store, when set, covers a spec in mydb's store guard before the
	// cluster is changed to follow it (pkg/storeguard).
	Store StoreCoverage
	// Namespaces are where databases are served; empty is everywhere. A
	// database elsewhere (made before the list) is left as it is.
	Namespaces scope.Namespaces
	// ServerNamespace is mydb's own namespace, whose pods the databases'
	// NetworkPolicies let reach the instance managers.
	ServerNamespace string
}

// StoreCoverage is what the controller needs of mydb's store guard.
type StoreCoverage interface {
	// Cover returns once a snapshot of mydb's store without the write at
	// revision can no longer pass for the current store.
	Cover(ctx context.Context, revision int64) error
}

// Controller reconciles MyDatabases.
type Controller struct {
	// kubeClient writes children in the main cluster.
	kubeClient kubernetes.Interface
	// mydbClient writes MyDatabase status through mydb's own API.
	mydbClient clientset.Interface

	dbLister     examplelisters.MyDatabaseLister
	backupLister examplelisters.MyDatabaseBackupLister
	stsLister    appslisters.StatefulSetLister
	svcLister    corelisters.ServiceLister
	secretLister corelisters.SecretLister
	pvcLister    corelisters.PersistentVolumeClaimLister
	pdbLister    policylisters.PodDisruptionBudgetLister
	netpolLister networkinglisters.NetworkPolicyLister
	saLister     corelisters.ServiceAccountLister
	roleLister   rbaclisters.RoleLister
	bindLister   rbaclisters.RoleBindingLister
	podLister    corelisters.PodLister
	scLister     storagelisters.StorageClassLister
	// informers feed the listers; handlers are this controller's event
	// handlers on them, removed by Close.
	informers Informers
	handlers  runner.Handlers

	// queue holds the MyDatabases to reconcile, rate limited per key so a
	// failing one backs off without holding up the others.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// recorder writes Events to the main cluster.
	recorder record.EventRecorder
	// clock stamps conditions; tests inject a fake one.
	clock clock.PassiveClock
	// config holds the settings; statuses and restores call the instance
	// managers.
	config   Config
	statuses StatusReader
	restores RestoreStarter
	archives ArchiveSetter
	pruner   ArchivePruner
	objects  ObjectsReconciler
	// passwords keeps the roles' password Secrets as last read.
	passwords passwordSecrets
	// archivePrunes paces the pruning of each database's archive.
	archivePrunes paceTimes
	// archiveCredentialChecks paces the reads of each database's archive
	// credentials, which find a rotated key.
	archiveCredentialChecks paceTimes
	authority               *databaseca.Authority
	// incidents remembers the primaries that are not ready, for failover.
	incidents incidents
	// health streams each instance's health, to look at a database as
	// soon as an instance changes or is lost.
	health healthWatches
	// positions are the instances' last reported positions.
	positions positionMemory
	// replaced are the pods a rolling update deleted last, and
	// rolloutSlots the databases rolling out now.
	replaced     replacedPods
	rolloutSlots *rollout.Slots
}

// NewController returns a controller reading from informers; it does nothing
// until Run.
func NewController(ctx context.Context, kubeClient kubernetes.Interface, mydbClient clientset.Interface,
	informers Informers, recorder record.EventRecorder, clk clock.PassiveClock, config Config) (*Controller, error) {
	if config.InstanceImage == "" || config.PollInterval <= 0 {
		return nil, fmt.Errorf("the MyDatabase controller needs an instance image and a poll interval")
	}
	statuses, restores := config.Statuses, config.Restores
	if statuses == nil {
		statuses = &api.Client{Timeout: statusTimeout}
	}
	if restores == nil {
		restores = &api.Client{}
	}
	archives := config.Archives
	if archives == nil {
		archives = &api.Client{}
	}
	pruner := config.Pruner
	if pruner == nil {
		pruner = S3ArchivePruner{}
	}
	objects := config.Objects
	if objects == nil {
		objects = &api.Client{}
	}
	c := &Controller{
		kubeClient:   kubeClient,
		rolloutSlots: &rollout.Slots{Max: config.MaxConcurrentRollouts, Stale: rolloutSlotStale},
		mydbClient:   mydbClient,
		dbLister:     informers.MyDatabases.Lister(),
		backupLister: informers.Backups.Lister(),
		stsLister:    informers.StatefulSets.Lister(),
		svcLister:    informers.Services.Lister(),
		secretLister: informers.Secrets.Lister(),
		pvcLister:    informers.PersistentVolumeClaims.Lister(),
		pdbLister:    informers.PodDisruptionBudgets.Lister(),
		netpolLister: informers.NetworkPolicies.Lister(),
		saLister:     informers.ServiceAccounts.Lister(),
		roleLister:   informers.Roles.Lister(),
		bindLister:   informers.RoleBindings.Lister(),
		podLister:    informers.Pods.Lister(),
		scLister:     informers.StorageClasses.Lister(),
		informers:    informers,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "mydatabase"}),
		recorder:  recorder,
		clock:     clk,
		config:    config,
		statuses:  statuses,
		restores:  restores,
		archives:  archives,
		objects:   objects,
		pruner:    pruner,
		authority: config.Authority,
	}
	if c.authority == nil {
		c.authority = &databaseca.Authority{Secrets: c.secretLister, Clock: clk}
	}
	if !config.PollOnly {
		c.health.client, _ = statuses.(HealthWatcher)
	}
	c.health.now = func() time.Time { return c.clock.Now() }
	c.health.enqueue = func(key cache.ObjectName) { c.queue.Add(key) }
	c.health.soon = func(key cache.ObjectName) { c.queue.AddAfter(key, config.PollInterval) }
	c.health.lag = series.observeLag

	logger := klog.FromContext(ctx)
	if err := c.handlers.Add(informers.MyDatabases.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, err
	}
	children := cache.ResourceEventHandlerFuncs{
		AddFunc: c.handleChild,
		UpdateFunc: func(old, obj interface{}) {
			if old.(metav1.Object).GetResourceVersion() == obj.(metav1.Object).GetResourceVersion() {
				return // a resync; the MyDatabase's own resync covers it
			}
			c.handleChild(obj)
		},
		DeleteFunc: c.handleChild,
	}
	if err := c.handlers.Add(informers.Backups.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.handleBackup,
		UpdateFunc: func(_, obj interface{}) { c.handleBackup(obj) },
	}); err != nil {
		c.Close()
		return nil, err
	}
	for _, inf := range informers.children() {
		if err := c.handlers.Add(inf, children); err != nil {
			c.Close()
			return nil, err
		}
	}
	logger.V(4).Info("MyDatabase controller set up")
	return c, nil
}

// Close removes the controller's event handlers from the shared informers,
// which outlive it (a replica that loses the lease keeps its caches warm).
func (c *Controller) Close() {
	c.handlers.RemoveAll()
	// A replica that does not lead reads no instance: its figures would go stale.
	series.reset()
}

// Run waits for the informers to sync, then reconciles with workers
// goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	c.health.start(ctx)
	return runner.Run(ctx, c.queue, workers, c.timedSync, func() ([]cache.ObjectName, error) {
		dbs, err := c.dbLister.List(labels.Everything())
		return runner.Keys(dbs), err
	}, c.informers.All()...)
}

// timedSync is sync, measured for /metrics.
func (c *Controller) timedSync(ctx context.Context, key cache.ObjectName) error {
	start := c.clock.Now()
	err := c.sync(ctx, key)
	observeReconcile(c.clock.Since(start), err)
	return err
}

func (c *Controller) enqueue(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	name, err := cache.ObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(name)
}

// handleChild enqueues the MyDatabase that controls a child.
func (c *Controller) handleChild(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	child, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	owner := metav1.GetControllerOf(child)
	if owner == nil || owner.Kind != "MyDatabase" || owner.APIVersion != examplev1.SchemeGroupVersion.String() {
		// A PVC belongs to its StatefulSet: find the database by label.
		if instance := child.GetLabels()[names.LabelInstance]; instance != "" {
			c.queue.Add(cache.ObjectName{Namespace: child.GetNamespace(), Name: instance})
		}
		return
	}
	c.queue.Add(cache.ObjectName{Namespace: child.GetNamespace(), Name: owner.Name})
}
