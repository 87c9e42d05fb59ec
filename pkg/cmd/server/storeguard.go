package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apiserver"
	"github.com/mydb-dev/mydb/pkg/storeguard"
	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// StoreGuardOptions are the flags of the storage guard (pkg/storeguard).
type StoreGuardOptions struct {
	// Record is namespace/name of the ConfigMap that records the store in
	// the main cluster; empty turns the guard off.
	Record   string
	Interval time.Duration
}

// NewStoreGuardOptions returns the defaults: on, recorded beside the
// controller's Lease, checked every 5s.
func NewStoreGuardOptions() *StoreGuardOptions {
	return &StoreGuardOptions{Record: "mydb-system/mydb-store", Interval: 5 * time.Second}
}

// AddFlags adds the guard's flags to fs.
func (o *StoreGuardOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Record, "store-record", o.Record,
		"namespace/name of the ConfigMap in the main cluster that records which store mydb's etcd holds; mydb serves its resources only while its etcd matches it. Empty turns the guard off (not safe: a wiped etcd then reads as no databases, and the garbage collector deletes their children).")
	fs.DurationVar(&o.Interval, "store-check-interval", o.Interval, "How often mydb compares its etcd with the store record.")
}

// Validate checks the flags.
func (o *StoreGuardOptions) Validate() []error {
	if o.Record == "" {
		return nil
	}
	var errs []error
	ns, name, ok := strings.Cut(o.Record, "/")
	if !ok {
		errs = append(errs, fmt.Errorf("--store-record must be namespace/name"))
	} else {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, fmt.Errorf("--store-record namespace: %s", msg))
		}
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			errs = append(errs, fmt.Errorf("--store-record name: %s", msg))
		}
	}
	if o.Interval < time.Second {
		errs = append(errs, fmt.Errorf("--store-check-interval must be at least 1s"))
	}
	return errs
}

// apply builds the guard over mydb's etcd (storage) with the record in the
// main cluster (kubeConfig), and installs it in c: the request filter, the
// readiness check and a post-start hook that runs it. It returns nil (and
// installs nothing) when the guard is off or there is no main cluster.
func (o *StoreGuardOptions) apply(c *genericapiserver.RecommendedConfig, storage storagebackend.Config, kubeConfig *rest.Config) (*storeguard.Guard, error) {
	if o.Record == "" {
		klog.Warning("The storage guard is off (--store-record is empty): if mydb's etcd is emptied or rolled back, the garbage collector deletes the children of every database it lost")
		return nil, nil
	}
	if kubeConfig == nil {
		klog.Warning("The storage guard is off: without --kubeconfig there is no main cluster to record the store in")
		return nil, nil
	}
	ns, name, _ := strings.Cut(o.Record, "/")
	tlsInfo := transport.TLSInfo{CertFile: storage.Transport.CertFile, KeyFile: storage.Transport.KeyFile, TrustedCAFile: storage.Transport.TrustedCAFile}
	etcdConfig := clientv3.Config{Endpoints: storage.Transport.ServerList, DialTimeout: 10 * time.Second}
	if tlsInfo.CertFile != "" || tlsInfo.TrustedCAFile != "" {
		tlsConfig, err := tlsInfo.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("the storage guard's etcd TLS: %w", err)
		}
		etcdConfig.TLS = tlsConfig
	}
	etcdClient, err := clientv3.New(etcdConfig)
	if err != nil {
		return nil, fmt.Errorf("the storage guard's etcd client: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(rest.AddUserAgent(rest.CopyConfig(kubeConfig), "mydb-store-guard"))
	if err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster()
	guard := storeguard.New(
		storeguard.EtcdStore{Client: etcdClient, Key: storeguard.MarkerKey(storage.Prefix), Timeout: 5 * time.Second},
		storeguard.ConfigMapRecord{Client: kubeClient, Namespace: ns, Name: name,
			Recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "mydb-store-guard"})},
		o.Interval)

	build := c.BuildHandlerChainFunc
	c.BuildHandlerChainFunc = func(h http.Handler, cfg *genericapiserver.Config) http.Handler {
		return build(storeguard.WithGuard(h, guard, example.GroupName, apiserver.Codecs), cfg)
	}
	c.AddReadyzChecks(storeguard.ReadyzCheck(guard))
	if err := c.AddPostStartHook("mydb-store-guard", func(ctx genericapiserver.PostStartHookContext) error {
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events("")})
		go func() {
			defer broadcaster.Shutdown()
			guard.Run(ctx)
		}()
		// The hook's context ends when shutdown begins, but the requests
		// still in flight then, and those that arrive on open connections
		// before the clients see the server going, confirm the store
		// through this client: closed at once, they would be answered 503.
		go func() {
			<-c.DrainedNotify()
			etcdClient.Close()
		}()
		return nil
	}); err != nil {
		return nil, err
	}
	return guard, nil
}
