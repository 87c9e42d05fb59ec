package server

import (
	"fmt"
	"time"

	"github.com/mydb-dev/mydb/pkg/controller/manager"
	mydbcontroller "github.com/mydb-dev/mydb/pkg/controller/mydatabase"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/scope"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"
	componentbasevalidation "k8s.io/component-base/config/validation"
)

// ControllerOptions are the flags of the in-process controllers.
type ControllerOptions struct {
	Enabled      bool
	Workers      int
	ResyncPeriod time.Duration
	KubeAPIQPS   float32
	KubeAPIBurst int

	LeaderElection      componentbaseconfig.LeaderElectionConfiguration
	LeaderElectIdentity string

	InstanceImage string
	// PrintManagedImages prints ManagedImages and exits;
	// PrintManagedImagesPolicy prints ManagedImagesPolicy of them.
	PrintManagedImages       bool
	PrintManagedImagesPolicy bool
	InstancePollInterval     time.Duration
	InstanceResyncInterval   time.Duration
	InstanceHealthStreams    bool
	MaxConcurrentRollouts    int
	CARotationOverlap        time.Duration
	// EngineImages are ENGINE:VERSION=IMAGE overrides of the pinned
	// engine images.
	EngineImages []string

	// DatabaseNamespaces are where databases may be made; empty is every
	// namespace.
	DatabaseNamespaces []string
}

// NewControllerOptions returns the defaults: on, leader-elected, with the
// lease timings kube-controller-manager uses. A new database takes about
// five writes, so 200 QPS creates some 40 databases a second (docs/benchmarks.md
// measured the 50 QPS of before as the bound).
func NewControllerOptions() *ControllerOptions {
	return &ControllerOptions{
		Enabled:      true,
		Workers:      4,
		ResyncPeriod: 10 * time.Minute,
		KubeAPIQPS:   200,
		KubeAPIBurst: 400,
		// The image this server runs from ships mydb-instance too.
		InstanceImage:        "mydb-apiserver:dev",
		InstancePollInterval: 10 * time.Second,
		// The health streams say every change; a resync is a safety net.
		InstanceResyncInterval: time.Minute,
		InstanceHealthStreams:  true,
		// A new mydb is a new template for every database: two at a time.
		MaxConcurrentRollouts: 2,
		// Long enough for the kubelet to update a mounted CA bundle (about
		// a minute) and for clients that read it per connection to do so.
		CARotationOverlap: 10 * time.Minute,
		LeaderElection: componentbaseconfig.LeaderElectionConfiguration{
			LeaderElect:       true,
			LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
			ResourceLock:      resourcelock.LeasesResourceLock,
			ResourceName:      "mydb-controller",
			ResourceNamespace: "mydb-system",
		},
	}
}

// AddFlags adds the controllers' flags to fs.
func (o *ControllerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "controller", o.Enabled, "Run the controllers in this server (they need --kubeconfig or in-cluster credentials).")
	fs.IntVar(&o.Workers, "controller-workers", o.Workers, "Objects each controller reconciles at once.")
	fs.DurationVar(&o.ResyncPeriod, "controller-resync-period", o.ResyncPeriod, "How often every object is reconciled with no change seen.")
	fs.Float32Var(&o.KubeAPIQPS, "controller-kube-api-qps", o.KubeAPIQPS, "Queries per second the controllers may send to the main cluster.")
	fs.IntVar(&o.KubeAPIBurst, "controller-kube-api-burst", o.KubeAPIBurst, "Burst of queries the controllers may send to the main cluster.")
	fs.StringVar(&o.InstanceImage, "instance-image", o.InstanceImage, "Image that ships mydb-instance; an init container copies it into every database pod.")
	fs.BoolVar(&o.PrintManagedImages, "print-managed-images", false,
		"Print the images database pods may run with these flags (--instance-image and every engine version's, after --engine-image), one per line, and exit.")
	fs.BoolVar(&o.PrintManagedImagesPolicy, "print-managed-images-policy", false,
		"Print the ValidatingAdmissionPolicy (and binding) that lets mydb-apiserver's identity run only those images, and exit: apply it with the server's flags (artifacts/deploy/managed-images.yaml is it for the Deployment's).")
	fs.StringSliceVar(&o.EngineImages, "engine-image", o.EngineImages,
		"ENGINE:VERSION=IMAGE: run that engine version from IMAGE instead of the pinned official image (a private registry mirror, images built in-house); repeatable, e.g. postgres:17=registry.example.com/postgres:17.6.")
	fs.DurationVar(&o.InstancePollInterval, "instance-poll-interval", o.InstancePollInterval,
		"How often the controller reads an instance manager's status while its database is not settled (an instance without a live health stream), and how soon after a stream says something changed that need not be acted on at once.")
	fs.DurationVar(&o.InstanceResyncInterval, "instance-resync-interval", o.InstanceResyncInterval,
		"How often the controller reads an instance manager's status while every instance of its database streams its health and says nothing changed: a safety net, at least --instance-poll-interval.")
	fs.BoolVar(&o.InstanceHealthStreams, "instance-health-streams", o.InstanceHealthStreams,
		"Keep a health stream (GET /v1/health) open to every instance manager, so a lost primary is seen when it is lost and a settled database is read only every --instance-resync-interval. false: every instance is read every --instance-poll-interval, and failoverDelay counts from the read that found a loss.")
	fs.IntVar(&o.MaxConcurrentRollouts, "max-concurrent-rollouts", o.MaxConcurrentRollouts,
		"How many databases may roll out a new pod template at once (replicas, a switchover, then the primary); the others wait their turn. 0: no bound.")
	fs.DurationVar(&o.CARotationOverlap, "ca-rotation-overlap", o.CARotationOverlap,
		"How long a rotation of a database's CA trusts the old and the new root before the new one signs: applications that read the CA bundle (the <db>-ca-bundle Secret) must read the new one within it.")
	componentbaseoptions.BindLeaderElectionFlags(&o.LeaderElection, fs)
	fs.StringVar(&o.LeaderElectIdentity, "leader-elect-identity", o.LeaderElectIdentity, "This replica's name in the Lease; defaults to the hostname and a random suffix.")
	fs.StringSliceVar(&o.DatabaseNamespaces, "database-namespaces", o.DatabaseNamespaces,
		"Namespaces MyDatabases and MyDatabaseBackups may be created in (admission refuses others with 403), and the only ones the controllers read Secrets in, "+
			"so that mydb's Secret permissions can be Roles in them (artifacts/namespaced). Empty: every namespace.")
}

// Validate checks the flags; hasMainCluster tells whether the server has a
// kubeconfig of the main cluster, which the controllers write to.
func (o *ControllerOptions) Validate(hasMainCluster bool) []error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if !hasMainCluster {
		errs = append(errs, fmt.Errorf("--controller needs the main cluster: give --kubeconfig, run in a cluster, or set --controller=false"))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--controller-workers must be at least 1"))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--controller-kube-api-qps and --controller-kube-api-burst must be positive"))
	}
	if o.ResyncPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--controller-resync-period must be positive"))
	}
	if o.InstanceImage == "" {
		errs = append(errs, fmt.Errorf("--instance-image may not be empty"))
	}
	if _, err := engine.ParseImageOverrides(o.EngineImages); err != nil {
		errs = append(errs, err)
	}
	if o.MaxConcurrentRollouts < 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-rollouts may not be negative"))
	}
	if o.CARotationOverlap < 0 {
		errs = append(errs, fmt.Errorf("--ca-rotation-overlap may not be negative"))
	}
	if o.InstancePollInterval < time.Second {
		errs = append(errs, fmt.Errorf("--instance-poll-interval must be at least 1s"))
	}
	if o.InstanceResyncInterval < o.InstancePollInterval {
		errs = append(errs, fmt.Errorf("--instance-resync-interval must be at least --instance-poll-interval (%s)", o.InstancePollInterval))
	}
	errs = append(errs, scope.Namespaces(o.DatabaseNamespaces).Validate()...)
	for _, err := range componentbasevalidation.ValidateLeaderElectionConfiguration(&o.LeaderElection, field.NewPath("leaderElection")) {
		errs = append(errs, err)
	}
	return errs
}

// ApplyTo returns the controllers' configuration, reaching the main cluster
// through kubeConfig; nil when --controller=false.
func (o *ControllerOptions) ApplyTo(kubeConfig *rest.Config) *manager.Config {
	if !o.Enabled || kubeConfig == nil {
		return nil
	}
	images, _ := engine.ParseImageOverrides(o.EngineImages) // Validate refused bad ones
	cfg := rest.CopyConfig(kubeConfig)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg = rest.AddUserAgent(cfg, "mydb-controller")
	return &manager.Config{
		KubeConfig:     cfg,
		Workers:        o.Workers,
		ResyncPeriod:   o.ResyncPeriod,
		LeaderElection: o.LeaderElection,
		Identity:       o.LeaderElectIdentity,
		Databases: mydbcontroller.Config{InstanceImage: o.InstanceImage, EngineImages: images, PollInterval: o.InstancePollInterval,
			ResyncInterval: o.InstanceResyncInterval, PollOnly: !o.InstanceHealthStreams,
			MaxConcurrentRollouts: o.MaxConcurrentRollouts, CARotationOverlap: o.CARotationOverlap,
			// mydb runs in the namespace of its Lease.
			ServerNamespace: o.LeaderElection.ResourceNamespace},
		Namespaces: o.DatabaseNamespaces,
	}
}

// ManagedImages are the images database pods may run with these flags.
func (o *ControllerOptions) ManagedImages() ([]string, error) {
	overrides, err := engine.ParseImageOverrides(o.EngineImages)
	if err != nil {
		return nil, err
	}
	return engine.ManagedImages(o.InstanceImage, overrides), nil
}
