package server

import (
	"fmt"
	"time"

	"github.com/mydb-dev/mydb/pkg/apiserver"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
)

// ControllerOptions are the flags of the in-process MyDatabase controller.
type ControllerOptions struct {
	Enabled      bool
	Workers      int
	ResyncPeriod time.Duration
	KubeAPIQPS   float32
	KubeAPIBurst int

	LeaderElect              bool
	LeaderElectNamespace     string
	LeaderElectLeaseName     string
	LeaderElectIdentity      string
	LeaderElectLeaseDuration time.Duration
	LeaderElectRenewDeadline time.Duration
	LeaderElectRetryPeriod   time.Duration
}

// NewControllerOptions returns the defaults: on, leader-elected, with the
// lease timings kube-controller-manager uses. A new database takes about
// five writes, so 200 QPS creates some 40 databases a second (docs/benchmarks.md
// measured the 50 QPS of before as the bound).
func NewControllerOptions() *ControllerOptions {
	return &ControllerOptions{
		Enabled:                  true,
		Workers:                  4,
		ResyncPeriod:             10 * time.Minute,
		KubeAPIQPS:               200,
		KubeAPIBurst:             400,
		LeaderElect:              true,
		LeaderElectNamespace:     "mydb-system",
		LeaderElectLeaseName:     "mydb-controller",
		LeaderElectLeaseDuration: 15 * time.Second,
		LeaderElectRenewDeadline: 10 * time.Second,
		LeaderElectRetryPeriod:   2 * time.Second,
	}
}

// AddFlags adds the controller's flags to fs.
func (o *ControllerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.Enabled, "controller", o.Enabled, "Run the MyDatabase controller in this server (it needs --kubeconfig or in-cluster credentials).")
	fs.IntVar(&o.Workers, "controller-workers", o.Workers, "MyDatabases reconciled at once.")
	fs.DurationVar(&o.ResyncPeriod, "controller-resync-period", o.ResyncPeriod, "How often every MyDatabase is reconciled with no change seen.")
	fs.Float32Var(&o.KubeAPIQPS, "controller-kube-api-qps", o.KubeAPIQPS, "Queries per second the controller may send to the main cluster.")
	fs.IntVar(&o.KubeAPIBurst, "controller-kube-api-burst", o.KubeAPIBurst, "Burst of queries the controller may send to the main cluster.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect one replica to run the controller with a Lease, so the server can run several replicas.")
	fs.StringVar(&o.LeaderElectNamespace, "leader-elect-namespace", o.LeaderElectNamespace, "Namespace of the leader election Lease.")
	fs.StringVar(&o.LeaderElectLeaseName, "leader-elect-lease-name", o.LeaderElectLeaseName, "Name of the leader election Lease.")
	fs.StringVar(&o.LeaderElectIdentity, "leader-elect-identity", o.LeaderElectIdentity, "This replica's name in the Lease; defaults to the hostname and a random suffix.")
	fs.DurationVar(&o.LeaderElectLeaseDuration, "leader-elect-lease-duration", o.LeaderElectLeaseDuration, "How long a lease holds after its last renewal; the longest failover.")
	fs.DurationVar(&o.LeaderElectRenewDeadline, "leader-elect-renew-deadline", o.LeaderElectRenewDeadline, "How long the leader keeps trying to renew before it stops leading.")
	fs.DurationVar(&o.LeaderElectRetryPeriod, "leader-elect-retry-period", o.LeaderElectRetryPeriod, "How often candidates try to take the lease.")
}

// Validate checks the flags.
func (o *ControllerOptions) Validate() []error {
	var errs []error
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--controller-workers must be at least 1"))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--controller-kube-api-qps and --controller-kube-api-burst must be positive"))
	}
	if o.LeaderElect && !(o.LeaderElectLeaseDuration > o.LeaderElectRenewDeadline && o.LeaderElectRenewDeadline > o.LeaderElectRetryPeriod) {
		errs = append(errs, fmt.Errorf("leader election timings must satisfy lease duration > renew deadline > retry period"))
	}
	return errs
}

// ApplyTo configures the controller to reach the main cluster through
// kubeConfig; with no main cluster, or --controller=false, it stays off.
func (o *ControllerOptions) ApplyTo(c *apiserver.ControllerConfig, kubeConfig *rest.Config) {
	if !o.Enabled || kubeConfig == nil {
		return
	}
	cfg := rest.CopyConfig(kubeConfig)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg = rest.AddUserAgent(cfg, "mydb-controller")
	*c = apiserver.ControllerConfig{
		KubeConfig:   cfg,
		Workers:      o.Workers,
		ResyncPeriod: o.ResyncPeriod,
		LeaderElection: apiserver.LeaderElectionConfig{
			Enabled:       o.LeaderElect,
			Namespace:     o.LeaderElectNamespace,
			Name:          o.LeaderElectLeaseName,
			Identity:      o.LeaderElectIdentity,
			LeaseDuration: o.LeaderElectLeaseDuration,
			RenewDeadline: o.LeaderElectRenewDeadline,
			RetryPeriod:   o.LeaderElectRetryPeriod,
		},
	}
}
