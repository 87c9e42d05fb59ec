// Package backup is the controller that runs every MyDatabaseBackup as a Job
// of the engine's dump tool, writing to a volume of the database's
// namespace, and reports how it went through the backup's /status.
package backup

import (
	"context"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/runner"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	examplelisters "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Event reasons.
const (
	ReasonJobCreated       = "BackupJobCreated"
	ReasonVolumeCreated    = "BackupVolumeCreated"
	ReasonBackupSucceeded  = "BackupSucceeded"
	ReasonBackupFailed     = "BackupFailed"
	ReasonResourceConflict = "ErrResourceExists"
)

// Informers are the shared informers the controller reads from; Jobs and
// PVCs should be filtered to app.kubernetes.io/managed-by=mydb.
type Informers struct {
	Backups                exampleinformers.MyDatabaseBackupInformer
	MyDatabases            exampleinformers.MyDatabaseInformer
	Jobs                   batchinformers.JobInformer
	PersistentVolumeClaims coreinformers.PersistentVolumeClaimInformer
}

// NewInformers takes the controller's informers from factories: kube
// filtered to mydb's label, own for mydb's API.
func NewInformers(kube informers.SharedInformerFactory, own mydbinformers.SharedInformerFactory) Informers {
	return Informers{
		Backups:                own.Example().V1().MyDatabaseBackups(),
		MyDatabases:            own.Example().V1().MyDatabases(),
		Jobs:                   kube.Batch().V1().Jobs(),
		PersistentVolumeClaims: kube.Core().V1().PersistentVolumeClaims(),
	}
}

// All are every informer the controller reads.
func (i Informers) All() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{i.Backups.Informer(), i.MyDatabases.Informer(), i.Jobs.Informer(), i.PersistentVolumeClaims.Informer()}
}

// Controller runs backups.
type Controller struct {
	// kubeClient writes Jobs and volumes in the main cluster.
	kubeClient kubernetes.Interface
	// mydbClient writes backups through mydb's own API.
	mydbClient clientset.Interface

	backupLister examplelisters.MyDatabaseBackupLister
	dbLister     examplelisters.MyDatabaseLister
	jobLister    batchlisters.JobLister
	pvcLister    corelisters.PersistentVolumeClaimLister
	informers    Informers
	handlers     runner.Handlers

	// queue holds the backups to look at.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// recorder writes Events to the main cluster.
	recorder record.EventRecorder
	// clock stamps the backups' times; tests inject a fake one.
	clock clock.PassiveClock
}

// NewController returns a controller reading from informers; it does nothing until Run.
func NewController(kubeClient kubernetes.Interface, mydbClient clientset.Interface, informers Informers,
	recorder record.EventRecorder, clk clock.PassiveClock) (*Controller, error) {
	c := &Controller{
		kubeClient:   kubeClient,
		mydbClient:   mydbClient,
		backupLister: informers.Backups.Lister(),
		dbLister:     informers.MyDatabases.Lister(),
		jobLister:    informers.Jobs.Lister(),
		pvcLister:    informers.PersistentVolumeClaims.Lister(),
		informers:    informers,
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
	if err := c.handlers.Add(informers.Jobs.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.handleJob,
		UpdateFunc: func(_, obj interface{}) { c.handleJob(obj) },
		DeleteFunc: c.handleJob,
	}); err != nil {
		c.Close()
		return nil, err
	}
	// A database whose deletion policy changes changes who owns its backups.
	if err := c.handlers.Add(informers.MyDatabases.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj interface{}) {
			if old.(*examplev1.MyDatabase).Spec.DeletionPolicy != obj.(*examplev1.MyDatabase).Spec.DeletionPolicy {
				c.enqueueBackupsOf(obj.(*examplev1.MyDatabase))
			}
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
	return runner.Run(ctx, c.queue, workers, c.sync, func() ([]cache.ObjectName, error) {
		backups, err := c.backupLister.List(labels.Everything())
		return runner.Keys(backups), err
	}, c.informers.All()...)
}

func (c *Controller) enqueue(obj interface{}) {
	if name, err := cache.ObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

func (c *Controller) enqueueBackupsOf(db *examplev1.MyDatabase) {
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, b := range backups {
		if b.Spec.DatabaseName == db.Name {
			c.enqueue(b)
		}
	}
}

// handleJob enqueues the backup that controls a Job.
func (c *Controller) handleJob(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	job, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if owner := metav1.GetControllerOf(job); owner != nil && owner.Kind == "MyDatabaseBackup" && owner.APIVersion == examplev1.SchemeGroupVersion.String() {
		c.queue.Add(cache.ObjectName{Namespace: job.GetNamespace(), Name: owner.Name})
	}
}
