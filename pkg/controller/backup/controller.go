// Package backup is the controller that runs every MyDatabaseBackup: it
// picks the instance its target asks for, has that instance's manager
// stream a backup to the database's destination (POST /v1/backups), follows
// it until it ends and reports how it went through the backup's /status.
// Deleting a backup deletes its dump from the bucket first.
package backup

import (
	"context"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/controller/runner"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	examplelisters "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/scope"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Event reasons.
const (
	ReasonBackupStarted   = "BackupStarted"
	ReasonBackupSucceeded = "BackupSucceeded"
	ReasonBackupFailed    = "BackupFailed"
	ReasonDumpDeleted     = "DumpDeleted"
	ReasonDumpKept        = "DumpNotDeleted"
)

// Informers are the shared informers the controller reads from; Secrets
// should be filtered to app.kubernetes.io/managed-by=mydb (the controller
// reads only the databases' own credentials through them).
type Informers struct {
	Backups     exampleinformers.MyDatabaseBackupInformer
	MyDatabases exampleinformers.MyDatabaseInformer
	Secrets     scope.SecretInformer
	// Pods and PersistentVolumeClaims are the dump-server pods and dump
	// claims of volume backups (filtered like Secrets).
	Pods                   coreinformers.PodInformer
	PersistentVolumeClaims coreinformers.PersistentVolumeClaimInformer
}

// NewInformers takes the controller's informers from factories: kube
// filtered to mydb's label, own for mydb's API.
func NewInformers(kube informers.SharedInformerFactory, own mydbinformers.SharedInformerFactory) Informers {
	return Informers{
		Backups:     own.Example().V1().MyDatabaseBackups(),
		MyDatabases: own.Example().V1().MyDatabases(),
		Secrets:     scope.AllNamespaces(kube.Core().V1().Secrets()),
		Pods:        kube.Core().V1().Pods(),
		// The same informer as the MyDatabase controller's.
		PersistentVolumeClaims: kube.Core().V1().PersistentVolumeClaims(),
	}
}

// All are every informer the controller reads.
func (i Informers) All() []cache.SharedIndexInformer {
	return append([]cache.SharedIndexInformer{i.Backups.Informer(), i.MyDatabases.Informer(),
		i.Pods.Informer(), i.PersistentVolumeClaims.Informer()}, i.Secrets.Informers()...)
}

// ObjectStores deletes objects from buckets.
type ObjectStores interface {
	Delete(ctx context.Context, cfg objectstore.Config, key string) error
}

// Buckets deletes through the objectstore package.
type Buckets struct{}

// Delete implements ObjectStores.
func (Buckets) Delete(ctx context.Context, cfg objectstore.Config, key string) error {
	s, err := objectstore.New(cfg)
	if err != nil {
		return err
	}
	return s.Delete(ctx, key)
}

// Managers starts backups on the instance managers (POST /v1/backups) and
// reads how they go (GET /v1/backups/{id}): *api.Client, or a test's fake.
type Managers interface {
	StartBackup(ctx context.Context, host string, auth api.Auth, req api.BackupRequest) (*api.Operation, error)
	Backup(ctx context.Context, host string, auth api.Auth, id string) (*api.Operation, error)
}

// Options are the controller's connections to the instance managers and
// the buckets; tests inject fakes, nil fields are the real ones.
type Options struct {
	Managers Managers
	Stores   ObjectStores
	// PollInterval is how often a running backup is read; 0 is 5s.
	PollInterval time.Duration
	// InstanceImage ships mydb-instance, which the dump-server pods of
	// volume backups run.
	InstanceImage string
	// Namespaces are where backups are served; empty is everywhere.
	Namespaces scope.Namespaces
	// Authority gives the credentials the managers are called with; nil
	// is one of the controller's own.
	Authority *databaseca.Authority
}

// Controller runs backups.
type Controller struct {
	// kubeClient reads the destinations' Secrets in the main cluster.
	kubeClient kubernetes.Interface
	// mydbClient writes backups through mydb's own API.
	mydbClient clientset.Interface

	backupLister examplelisters.MyDatabaseBackupLister
	dbLister     examplelisters.MyDatabaseLister
	secretLister corelisters.SecretLister
	podLister    corelisters.PodLister
	claimLister  corelisters.PersistentVolumeClaimLister
	informers    Informers
	handlers     runner.Handlers

	managers     Managers
	authority    *databaseca.Authority
	stores       ObjectStores
	pollInterval time.Duration
	// instanceImage is what dump-server pods run.
	instanceImage string
	namespaces    scope.Namespaces

	// queue holds the backups to look at.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// recorder writes Events to the main cluster.
	recorder record.EventRecorder
	// clock stamps the backups' times; tests inject a fake one.
	clock clock.PassiveClock
}

// NewController returns a controller reading from informers; it does nothing until Run.
func NewController(kubeClient kubernetes.Interface, mydbClient clientset.Interface, informers Informers,
	recorder record.EventRecorder, clk clock.PassiveClock, opts Options) (*Controller, error) {
	if opts.Managers == nil {
		opts.Managers = &api.Client{}
	}
	if opts.Authority == nil {
		opts.Authority = &databaseca.Authority{Secrets: informers.Secrets.Lister(), Clock: clk}
	}
	if opts.Stores == nil {
		opts.Stores = Buckets{}
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 5 * time.Second
	}
	c := &Controller{
		kubeClient:    kubeClient,
		mydbClient:    mydbClient,
		backupLister:  informers.Backups.Lister(),
		dbLister:      informers.MyDatabases.Lister(),
		secretLister:  informers.Secrets.Lister(),
		podLister:     informers.Pods.Lister(),
		claimLister:   informers.PersistentVolumeClaims.Lister(),
		informers:     informers,
		managers:      opts.Managers,
		authority:     opts.Authority,
		stores:        opts.Stores,
		pollInterval:  opts.PollInterval,
		instanceImage: opts.InstanceImage,
		namespaces:    opts.Namespaces,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "mydatabasebackup"}),
		recorder: recorder,
		clock:    clk,
	}
	if err := c.handlers.Add(informers.Backups.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	// A dump-server pod that comes to serve lets its backup start.
	if err := c.handlers.Add(informers.Pods.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { c.enqueueOwnerOf(obj) },
	}); err != nil {
		c.Close()
		return nil, err
	}
	// A database whose deletion policy changes changes who owns its
	// backups; one whose instances change may let a pending backup start.
	if err := c.handlers.Add(informers.MyDatabases.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj interface{}) {
			db := obj.(*examplev1.MyDatabase)
			c.enqueueBackupsOf(db, old.(*examplev1.MyDatabase).Spec.DeletionPolicy != db.Spec.DeletionPolicy)
		},
	}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close removes the controller's handlers from the shared informers.
func (c *Controller) Close() { c.handlers.RemoveAll() }

// Run reconciles backups with workers goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return runner.Run(ctx, c.queue, workers, c.syncAndRequeue, func() ([]cache.ObjectName, error) {
		backups, err := c.backupLister.List(labels.Everything())
		return runner.Keys(backups), err
	}, c.informers.All()...)
}

// syncAndRequeue syncs a backup and comes back to it while it runs.
func (c *Controller) syncAndRequeue(ctx context.Context, key cache.ObjectName) error {
	after, err := c.sync(ctx, key)
	if err == nil && after > 0 {
		c.queue.AddAfter(key, after)
	}
	return err
}

func (c *Controller) enqueue(obj interface{}) {
	if name, err := cache.ObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

// enqueueBackupsOf enqueues the unfinished backups of a database, or all
// of them.
func (c *Controller) enqueueBackupsOf(db *examplev1.MyDatabase, all bool) {
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range backups {
		if b.Spec.DatabaseName == db.Name && (all || !finished(b) || b.DeletionTimestamp != nil) {
			c.enqueue(b)
		}
	}
}

// enqueueOwnerOf enqueues the backup whose dump-server pod obj is.
func (c *Controller) enqueueOwnerOf(obj interface{}) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Labels[dump.LabelClaim] == "" {
		return
	}
	if ref := metav1.GetControllerOf(pod); ref != nil && ref.Kind == "MyDatabaseBackup" {
		c.queue.Add(cache.ObjectName{Namespace: pod.Namespace, Name: ref.Name})
	}
}
