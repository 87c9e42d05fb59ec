// Package manager runs mydb's controllers inside the API server: it builds
// their clients, informers and event recorder, elects one replica with a
// Lease, and runs every controller while that replica leads. The informers
// run on every replica, so a new leader starts from warm caches.
package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/mydb-dev/mydb/pkg/access"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	backupcontroller "github.com/mydb-dev/mydb/pkg/controller/backup"
	"github.com/mydb-dev/mydb/pkg/controller/backupschedule"
	mydbcontroller "github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/databaseca"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbscheme "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/scheme"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/scope"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	// Registers the leader election metrics (leader_election_master_status).
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection"
	// Registers client-go's request metrics (rest_client_requests_total by
	// host, method and code): what the controllers ask of the main cluster.
	_ "k8s.io/component-base/metrics/prometheus/restclient"
)

// Config configures the controllers.
type Config struct {
	// KubeConfig reaches the main cluster, where the children live.
	KubeConfig *rest.Config
	// Workers is the number of objects each controller reconciles at once.
	Workers int
	// ResyncPeriod is how often every object is reconciled with no event.
	ResyncPeriod time.Duration
	// LeaderElection decides which replica of the server reconciles.
	LeaderElection componentbaseconfig.LeaderElectionConfiguration
	// Identity names this replica in the Lease; empty means hostname_uuid.
	Identity string
	// Databases configures the MyDatabase controller.
	Databases mydbcontroller.Config
	// Namespaces are where databases are served; empty is everywhere.
	// With a list, Secrets are read only in those namespaces.
	Namespaces scope.Namespaces
	// Gate, when set, holds the controllers while mydb's etcd is not the
	// store the cluster knows (pkg/storeguard): acting on an emptied or
	// rolled-back store would undo what the cluster holds.
	Gate Gate
}

// Gate tells whether the controllers may act.
type Gate interface {
	// Verified tells whether they may, and returns a channel closed when
	// that changes.
	Verified() (bool, <-chan struct{})
}

// controller is what the manager needs of each controller it runs.
type controller interface {
	Run(ctx context.Context, workers int) error
	Close()
}

// Manager runs the controllers.
type Manager struct {
	config Config
	// kubeClient is the controllers' client of the main cluster; events
	// and the Lease have clients of their own, so neither waits in the
	// workers' rate limiter, nor the workers behind them.
	kubeClient  kubernetes.Interface
	eventClient kubernetes.Interface
	leaseClient kubernetes.Interface
	mydbClient  clientset.Interface
	// fence holds the controllers' writes back when this replica may no
	// longer hold the lease; nil without leader election.
	fence *leaseFence

	kubeInformers informers.SharedInformerFactory
	// secretInformers read the Secrets of one namespace each, when mydb
	// serves a list of namespaces; else kubeInformers read them.
	secretInformers  []informers.SharedInformerFactory
	storageInformers informers.SharedInformerFactory
	databases        mydbcontroller.Informers
	backups          backupcontroller.Informers
	// synced are every informer the controllers read.
	synced []cache.InformerSynced

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// build makes a term's controllers; tests replace it.
	build func(ctx context.Context) (map[string]controller, error)

	// term is held while a leadership term runs its controllers, so two
	// terms never overlap in this process.
	term sync.Mutex
}

// New builds the controllers' clients and informers. own are the informers
// on mydb's own API, which the server also reads for admission; loopback
// reaches mydb's own API.
func New(config Config, own mydbinformers.SharedInformerFactory, loopback *rest.Config) (*Manager, error) {
	if config.KubeConfig == nil {
		return nil, errors.New("the controllers need a kubeconfig of the main cluster")
	}
	if config.Identity == "" {
		host, _ := os.Hostname()
		config.Identity = host + "_" + uuid.NewString()
	}
	kubeConfig := withReplica(config.KubeConfig, config.Identity)
	ownConfig := withReplica(rest.AddUserAgent(rest.CopyConfig(loopback), "mydb-controller"), config.Identity)
	ownConfig.ContentType = runtime.ContentTypeProtobuf
	var fence *leaseFence
	if config.LeaderElection.LeaderElect {
		// The controllers' clients only: the Lease must be renewed
		// whatever the fence says. Reads, the informers' too, pass.
		fence = newLeaseFence(clock.RealClock{})
		kubeConfig.Wrap(fence.wrap)
		ownConfig.Wrap(fence.wrap)
	}
	kubeClient, err := kubernetes.NewForConfig(kubeConfig)
	if err != nil {
		return nil, err
	}
	eventClient, err := kubernetes.NewForConfig(withReplica(config.KubeConfig, config.Identity))
	if err != nil {
		return nil, err
	}
	leaseConfig := rest.CopyConfig(config.KubeConfig)
	// Renewals are one request per retry period: a small budget of its own
	// is ample, and a burst of reconciles can never delay one.
	leaseConfig.RateLimiter, leaseConfig.QPS, leaseConfig.Burst = nil, 5, 10
	leaseClient, err := kubernetes.NewForConfig(withReplica(rest.AddUserAgent(leaseConfig, "leader-election"), config.Identity))
	if err != nil {
		return nil, err
	}
	mydbClient, err := clientset.NewForConfig(ownConfig)
	if err != nil {
		return nil, err
	}

	managed := labels.SelectorFromSet(labels.Set{names.LabelManagedBy: names.ManagedBy}).String()
	// The caches never need managedFields: dropping them saves a large share
	// of the memory they take.
	kubeInformers := informers.NewSharedInformerFactoryWithOptions(kubeClient, config.ResyncPeriod,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }),
		informers.WithTransform(StripManagedFields))
	// StorageClasses are few and carry no mydb label.
	storageInformers := informers.NewSharedInformerFactoryWithOptions(kubeClient, config.ResyncPeriod, informers.WithTransform(StripManagedFields))
	secrets := scope.AllNamespaces(kubeInformers.Core().V1().Secrets())
	var secretInformers []informers.SharedInformerFactory
	if len(config.Namespaces) > 0 {
		byNamespace := map[string]coreinformers.SecretInformer{}
		for _, ns := range config.Namespaces {
			f := informers.NewSharedInformerFactoryWithOptions(kubeClient, config.ResyncPeriod, informers.WithNamespace(ns),
				informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }),
				informers.WithTransform(StripManagedFields))
			byNamespace[ns] = f.Core().V1().Secrets()
			secretInformers = append(secretInformers, f)
		}
		secrets = scope.PerNamespace(byNamespace)
	}

	broadcaster := record.NewBroadcaster(record.WithCorrelatorOptions(record.CorrelatorOptions{SpamKeyFunc: spamKeyByReason}))
	m := &Manager{
		config:           config,
		kubeClient:       kubeClient,
		eventClient:      eventClient,
		leaseClient:      leaseClient,
		mydbClient:       mydbClient,
		fence:            fence,
		kubeInformers:    kubeInformers,
		secretInformers:  secretInformers,
		storageInformers: storageInformers,
		databases:        mydbcontroller.NewInformers(kubeInformers, storageInformers, own),
		backups:          backupcontroller.NewInformers(kubeInformers, own),
		broadcaster:      broadcaster,
		recorder:         broadcaster.NewRecorder(mydbscheme.Scheme, corev1.EventSource{Component: "mydb-controller"}),
	}
	m.databases.Secrets, m.backups.Secrets = secrets, secrets
	m.build = m.newControllers
	// Each Informer() call registers the informer with its factory, which
	// starts every registered one.
	for _, inf := range append(m.databases.All(), m.backups.All()...) {
		m.synced = append(m.synced, inf.HasSynced)
	}
	mydbcontroller.RegisterMetrics()
	return m, nil
}

// Run runs the informers on the main cluster (the server starts those on
// its own API), and the controllers whenever this replica leads, until ctx
// is done.
func (m *Manager) Run(ctx context.Context) {
	m.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.eventClient.CoreV1().Events("")})
	defer m.broadcaster.Shutdown()
	m.kubeInformers.Start(ctx.Done())
	m.storageInformers.Start(ctx.Done())
	defer m.kubeInformers.Shutdown()
	defer m.storageInformers.Shutdown()
	for _, f := range m.secretInformers {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}

	if !m.config.LeaderElection.LeaderElect {
		if err := m.lead(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "The controllers stopped")
		}
		return
	}
	m.runElected(ctx)
}

// runElected stands for election until ctx is done; each won term runs the
// controllers until the lease is lost or a controller fails.
func (m *Manager) runElected(ctx context.Context) {
	logger := klog.FromContext(ctx)
	le := m.config.LeaderElection
	id := m.config.Identity
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		m.leaseClient.CoreV1(), m.leaseClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id, EventRecorder: m.recorder})
	if err != nil {
		logger.Error(err, "Cannot build the leader election lock; the controllers do not run")
		return
	}
	if m.fence != nil {
		lock = &fencedLock{Interface: lock, fence: m.fence, renewDeadline: le.RenewDeadline.Duration}
	}
	for ctx.Err() == nil {
		// The previous term's controllers must have stopped before this
		// replica may lead again.
		m.term.Lock()
		m.term.Unlock()

		termCtx, endTerm := context.WithCancel(ctx)
		var failed atomic.Bool
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            le.ResourceName,
			LeaseDuration:   le.LeaseDuration.Duration,
			RenewDeadline:   le.RenewDeadline.Duration,
			RetryPeriod:     le.RetryPeriod.Duration,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leadCtx context.Context) {
					if m.fence != nil {
						go m.fence.endWhenShut(leadCtx, func() {
							logger.Info("The lease was not renewed in time; the controllers stop", "identity", id)
							endTerm()
						})
					}
					if err := m.lead(leadCtx); err != nil {
						logger.Error(err, "A controller failed; giving up the lease", "identity", id)
						m.recorder.Eventf(&corev1.ObjectReference{Kind: "Lease", Namespace: le.ResourceNamespace, Name: le.ResourceName},
							corev1.EventTypeWarning, "ControllerFailed", "%s gave up the lease: %v", id, err)
						failed.Store(true)
						endTerm()
					}
				},
				OnStoppedLeading: func() { logger.Info("Not leading; the controllers stop", "identity", id) },
				OnNewLeader:      func(leader string) { logger.Info("Controller leader", "identity", leader) },
			},
		})
		if err != nil {
			endTerm()
			logger.Error(err, "Cannot elect a leader; the controllers do not run")
			return
		}
		elector.Run(termCtx)
		if m.fence != nil {
			m.fence.close()
		}
		endTerm()
		if failed.Load() && ctx.Err() == nil {
			// Give another replica the first chance at the lease.
			select {
			case <-ctx.Done():
			case <-time.After(le.LeaseDuration.Duration):
			}
		}
	}
}

// lead runs one term: the MyDatabase, backup and backup schedule
// controllers, each with its own workers, until ctx ends or one of them
// fails, which ends them all and is returned. While the gate is closed the
// controllers do not run; they stop when it closes and start anew when it
// opens.
func (m *Manager) lead(ctx context.Context) error {
	m.term.Lock()
	defer m.term.Unlock()
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		if m.config.Gate == nil {
			return m.runControllers(ctx)
		}
		open, changed := m.config.Gate.Verified()
		if !open {
			logger.Info("The controllers wait: mydb's storage is not verified (see /readyz)")
			select {
			case <-ctx.Done():
			case <-changed:
			}
			continue
		}
		gateCtx, closeGate := context.WithCancel(ctx)
		go func() {
			select {
			case <-changed:
				logger.Info("The controllers stop: mydb's storage is no longer verified (see /readyz)")
				closeGate()
			case <-gateCtx.Done():
			}
		}()
		err := m.runControllers(gateCtx)
		closeGate()
		if err != nil {
			return err
		}
	}
	return nil
}

// runControllers runs every controller until ctx ends or one fails.
func (m *Manager) runControllers(ctx context.Context) error {
	if ctx.Err() != nil {
		return nil // the term ended before it began
	}
	controllers, err := m.build(ctx)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range controllers {
			c.Close()
		}
	}()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	for name, c := range controllers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(ctx, m.config.Workers); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("the %s controller: %w", name, err))
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (m *Manager) newControllers(ctx context.Context) (map[string]controller, error) {
	controllers := map[string]controller{}
	closeAll := func() {
		for _, c := range controllers {
			c.Close()
		}
	}
	databases := m.config.Databases
	databases.Namespaces = m.config.Namespaces
	backupOptions := backupcontroller.Options{InstanceImage: m.config.Databases.InstanceImage, Namespaces: m.config.Namespaces}
	// One authority for both controllers: one client certificate per
	// database.
	authority := &databaseca.Authority{Secrets: m.databases.Secrets.Lister(), Clock: clock.RealClock{}}
	databases.Authority, backupOptions.Authority = authority, authority
	if m.fence != nil {
		// Starting a backup or a restore on an instance is a write too.
		managers := &api.Client{Wrap: m.fence.wrap}
		databases.Restores, backupOptions.Managers = managers, managers
	}
	dbs, err := mydbcontroller.NewController(ctx, m.kubeClient, m.mydbClient, m.databases, m.recorder, clock.RealClock{}, databases)
	if err != nil {
		return nil, fmt.Errorf("building the MyDatabase controller: %w", err)
	}
	controllers["MyDatabase"] = dbs
	backups, err := backupcontroller.NewController(m.kubeClient, m.mydbClient, m.backups, m.recorder, clock.RealClock{}, backupOptions)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("building the backup controller: %w", err)
	}
	controllers["backup"] = backups
	schedules, err := backupschedule.NewController(m.mydbClient, m.backups.MyDatabases, m.backups.Backups, m.config.Namespaces, clock.RealClock{})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("building the backup schedule controller: %w", err)
	}
	controllers["backup schedule"] = schedules
	return controllers, nil
}

// withReplica is a copy of c whose user agent ends in the replica's Lease
// identity: every replica acts as the same ServiceAccount, and the audit
// logs of both API servers tell them apart by it.
func withReplica(c *rest.Config, identity string) *rest.Config {
	c = rest.CopyConfig(c)
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	c.UserAgent += " replica/" + identity
	return c
}

// ReadyzCheck fails until every informer has synced, so a replica takes
// traffic only once its controllers could lead.
func (m *Manager) ReadyzCheck() healthz.HealthChecker {
	return healthz.NamedCheck("mydb-controller-informers-synced", func(*http.Request) error {
		for _, synced := range m.synced {
			if !synced() {
				return errors.New("informers have not synced")
			}
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

// TrimForCache is StripManagedFields, and makes a MyDatabase hold less
// beside the watch cache's copy of it: it drops the labels and annotations
// that are not mydb's own (mydb.example.com/...), which no controller reads
// (users' labels and annotations, kubectl's last-applied configuration),
// and a database of the default resources shares one decoded copy of them
// (two maps of quantities, the largest part of a decoded spec), as cached
// objects are read-only. So no controller may write a cached MyDatabase
// back whole (status writes keep the stored metadata; the finalizer is
// patched).
func TrimForCache(obj interface{}) (interface{}, error) {
	if db, ok := obj.(*examplev1.MyDatabase); ok {
		db.Labels, db.Annotations = ownKeys(db.Labels), ownKeys(db.Annotations)
		if apiequality.Semantic.DeepEqual(db.Spec.Resources, defaultResources) {
			db.Spec.Resources = defaultResources
		}
	}
	return StripManagedFields(obj)
}

// defaultResources are shared by the cached MyDatabases that have them.
var defaultResources = *examplev1.DefaultResources.DeepCopy()

// ownKeys is m without the keys outside mydb's prefix (nil when none is left).
func ownKeys(m map[string]string) map[string]string {
	var own map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, names.Prefix) {
			if own == nil {
				own = map[string]string{}
			}
			own[k] = v
		}
	}
	return own
}

// CredentialIssuer makes short-lived users on the databases' primaries for
// mydatabases/credentials, from this replica's informers: every replica
// answers, leader or not. Its client certificate is its own, so no request
// waits on the controllers' (or their write fence).
func (m *Manager) CredentialIssuer() *access.Issuer {
	secrets := m.databases.Secrets.Lister()
	return &access.Issuer{
		Authority: &databaseca.Authority{Secrets: secrets, Clock: clock.RealClock{}},
		Secrets:   secrets,
		Pods:      m.databases.Pods.Lister(),
		Managers:  &api.Client{},
	}
}

// spamKeyByReason is client-go's spam key (source, object, type) with the
// reason: its filter lets 25 events of a key through, then one per five
// minutes, and a new database alone makes about 15 Created events; per
// reason, those cannot crowd out a switchover or a rolling update's
// events that follow.
func spamKeyByReason(e *corev1.Event) string {
	return strings.Join([]string{e.Source.Component, e.Source.Host, e.InvolvedObject.Kind, e.InvolvedObject.Namespace,
		e.InvolvedObject.Name, string(e.InvolvedObject.UID), e.InvolvedObject.APIVersion, e.Type, e.Reason}, "\x00")
}
