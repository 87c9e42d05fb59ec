package apiserver

import (
	"context"
	"fmt"
	"github.com/mydb-dev/mydb/pkg/names"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	backupcontroller "github.com/mydb-dev/mydb/pkg/controller/backup"
	"github.com/mydb-dev/mydb/pkg/controller/backupschedule"
	mydbcontroller "github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbscheme "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/scheme"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	// Registers the leader election metrics (leader_election_master_status).
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
)

// ControllerConfig configures the in-process MyDatabase controller.
type ControllerConfig struct {
	// KubeConfig reaches the main cluster, where the children live; the
	// controller is off when it is nil.
	KubeConfig *rest.Config
	// Workers is the number of MyDatabases reconciled at once.
	Workers int
	// ResyncPeriod is how often every MyDatabase is reconciled with no event.
	ResyncPeriod time.Duration
	// LeaderElection decides which replica of the server reconciles.
	LeaderElection LeaderElectionConfig
}

// LeaderElectionConfig configures the Lease that elects the reconciling replica.
type LeaderElectionConfig struct {
	Enabled   bool
	Namespace string
	Name      string
	// Identity names this replica in the Lease; empty means hostname_uuid.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// controllerRunner runs the controller while this replica leads. Informers
// run on every replica, so a new leader starts from a warm cache.
type controllerRunner struct {
	config      ControllerConfig
	kubeClient  kubernetes.Interface
	eventClient kubernetes.Interface
	mydbClient  clientset.Interface
	kubeInf     informers.SharedInformerFactory
	storageInf  informers.SharedInformerFactory
	mydbInf     mydbinformers.SharedInformerFactory
	informers   mydbcontroller.Informers
	backups     backupcontroller.Informers
	recorder    record.EventRecorder
	broadcast   record.EventBroadcaster
}

// newControllerRunner builds the controllers' clients and informers; mydbInf
// are the informers on mydb's own API the server already runs for admission.
func newControllerRunner(config ControllerConfig, mydbInf mydbinformers.SharedInformerFactory, loopback *rest.Config) (*controllerRunner, error) {
	kubeClient, err := kubernetes.NewForConfig(config.KubeConfig)
	if err != nil {
		return nil, err
	}
	// Events get a client of their own, so a burst of them never waits in
	// the workers' rate limiter, nor the workers behind them.
	eventClient, err := kubernetes.NewForConfig(rest.CopyConfig(config.KubeConfig))
	if err != nil {
		return nil, err
	}
	own := rest.CopyConfig(loopback)
	own.ContentType = runtime.ContentTypeProtobuf
	mydbClient, err := clientset.NewForConfig(own)
	if err != nil {
		return nil, err
	}
	managed := labels.SelectorFromSet(labels.Set{names.LabelManagedBy: names.ManagedBy}).String()
	// The caches never need managedFields: dropping them saves a large share
	// of the memory they take.
	kubeInf := informers.NewSharedInformerFactoryWithOptions(kubeClient, config.ResyncPeriod,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }),
		informers.WithTransform(StripManagedFields))
	// StorageClasses are few and carry no mydb label.
	storageInf := informers.NewSharedInformerFactoryWithOptions(kubeClient, config.ResyncPeriod, informers.WithTransform(StripManagedFields))

	broadcast := record.NewBroadcaster()
	r := &controllerRunner{
		config:      config,
		kubeClient:  kubeClient,
		eventClient: eventClient,
		mydbClient:  mydbClient,
		kubeInf:     kubeInf,
		storageInf:  storageInf,
		mydbInf:     mydbInf,
		informers:   mydbcontroller.NewInformers(kubeInf, storageInf, mydbInf),
		backups:     backupcontroller.NewInformers(kubeInf, mydbInf),
		broadcast:   broadcast,
		recorder:    broadcast.NewRecorder(mydbscheme.Scheme, corev1.EventSource{Component: "mydb-controller"}),
	}
	// Asking for each informer registers it, so the factories start it.
	r.informers.HasSynced()
	r.backups.HasSynced()
	return r, nil
}

// start runs the informers on the main cluster (the server's post-start hook
// runs those on mydb's own API), and the controller whenever this replica leads,
// until ctx is done.
func (r *controllerRunner) start(ctx context.Context) {
	r.broadcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.eventClient.CoreV1().Events("")})
	r.kubeInf.Start(ctx.Done())
	r.storageInf.Start(ctx.Done())
	go r.runElected(ctx)
	go func() {
		<-ctx.Done()
		r.broadcast.Shutdown()
	}()
}

func (r *controllerRunner) runElected(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if !r.config.LeaderElection.Enabled {
		r.lead(ctx)
		return
	}
	le := r.config.LeaderElection
	id := le.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + uuid.NewString()
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name,
		r.kubeClient.CoreV1(), r.kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: r.recorder})
	if err != nil {
		logger.Error(err, "Cannot build the leader election lock; the controller does not run")
		return
	}
	// Each term runs a fresh controller; losing the lease ends the term and
	// this replica stands for election again, still serving the API.
	for ctx.Err() == nil {
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            le.Name,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: r.lead,
				OnStoppedLeading: func() { logger.Info("Lost the lease; the controller stops", "identity", id) },
				OnNewLeader:      func(leader string) { logger.Info("Controller leader", "identity", leader) },
			},
		})
		if err != nil {
			logger.Error(err, "Cannot elect a leader; the controller does not run")
			return
		}
		elector.Run(ctx)
	}
}

// lead runs one controller term until ctx ends: the MyDatabase, backup and
// backup schedule controllers, each with its own workers.
func (r *controllerRunner) lead(ctx context.Context) {
	logger := klog.FromContext(ctx)
	dbs, err := mydbcontroller.NewController(ctx, r.kubeClient, r.mydbClient, r.informers, r.recorder, clock.RealClock{})
	if err != nil {
		logger.Error(err, "Cannot build the MyDatabase controller")
		return
	}
	defer dbs.Close()
	backups, err := backupcontroller.NewController(r.kubeClient, r.mydbClient, r.backups, r.recorder, clock.RealClock{})
	if err != nil {
		logger.Error(err, "Cannot build the backup controller")
		return
	}
	defer backups.Close()
	schedules, err := backupschedule.NewController(r.mydbClient, r.backups.MyDatabases, r.backups.Backups, clock.RealClock{})
	if err != nil {
		logger.Error(err, "Cannot build the backup schedule controller")
		return
	}
	defer schedules.Close()

	var wg sync.WaitGroup
	for name, run := range map[string]func(context.Context, int) error{
		"MyDatabase": dbs.Run, "backup": backups.Run, "backup schedule": schedules.Run,
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx, r.config.Workers); err != nil {
				logger.Error(err, "Controller stopped", "controller", name)
			}
		}()
	}
	wg.Wait()
}

// readyzCheck fails until every informer has synced, so a replica takes
// traffic only once its controller could lead.
func (r *controllerRunner) readyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("mydb-controller-informers-synced", func(*http.Request) error {
		if !r.informers.HasSynced() || !r.backups.HasSynced() {
			return fmt.Errorf("informers have not synced")
		}
		return nil
	})
}

// StripManagedFields drops managedFields from objects entering a cache; an
// update that omits them keeps the stored ones.
func StripManagedFields(obj interface{}) (interface{}, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
