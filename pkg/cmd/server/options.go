// Package server holds the mydb-apiserver command: its options and how
// they become a running server.
package server

import (
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/mydb-dev/mydb/pkg/access"
	"github.com/mydb-dev/mydb/pkg/admission/credentialrole"
	"github.com/mydb-dev/mydb/pkg/admission/forcedfailover"
	"github.com/mydb-dev/mydb/pkg/admission/limitrange"
	"github.com/mydb-dev/mydb/pkg/admission/namespaces"
	quotaadmission "github.com/mydb-dev/mydb/pkg/admission/quota"
	"github.com/mydb-dev/mydb/pkg/admission/recoverywindow"
	"github.com/mydb-dev/mydb/pkg/admission/secretaccess"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apiserver"
	"github.com/mydb-dev/mydb/pkg/controller/manager"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	generatedopenapi "github.com/mydb-dev/mydb/pkg/generated/openapi"
	"github.com/mydb-dev/mydb/pkg/scope"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	storagefactory "k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	basecompatibility "k8s.io/component-base/compatibility"
	netutils "k8s.io/utils/net"
)

// etcdPathPrefix is where objects live in mydb's etcd.
const etcdPathPrefix = "/registry/mydb"

// Options are the command-line options of mydb-apiserver.
type Options struct {
	// RecommendedOptions are the generic API server's options: serving,
	// delegated authentication and authorization, etcd, audit, admission.
	RecommendedOptions *genericoptions.RecommendedOptions
	// ServerRun are the server's limits and timeouts: requests in flight,
	// request timeout, shutdown delays.
	ServerRun *genericoptions.ServerRunOptions
	// ComponentGlobalsRegistry holds the effective version and feature gates.
	ComponentGlobalsRegistry basecompatibility.ComponentGlobalsRegistry
	// Controller are the flags of the in-process MyDatabase controller.
	Controller *ControllerOptions
	// StoreGuard are the flags of the guard against an emptied, replaced
	// or rolled-back etcd.
	StoreGuard *StoreGuardOptions
	// AlternateDNS are extra names for the self-signed serving certificate
	// made when no certificate is given.
	AlternateDNS []string

	StdOut io.Writer
	StdErr io.Writer
}

// NewOptions returns options with mydb's defaults: objects stored in etcd
// under /registry/mydb as example.com/v1 protobuf.
func NewOptions(out, errOut io.Writer) *Options {
	o := &Options{
		// The storage codec depends on --storage-media-type, so Complete sets it.
		RecommendedOptions:       genericoptions.NewRecommendedOptions(etcdPathPrefix, nil),
		ServerRun:                genericoptions.NewServerRunOptions(),
		ComponentGlobalsRegistry: compatibility.DefaultComponentGlobalsRegistry,
		Controller:               NewControllerOptions(),
		StoreGuard:               NewStoreGuardOptions(),
		StdOut:                   out,
		StdErr:                   errOut,
	}
	o.RecommendedOptions.Etcd.DefaultStorageMediaType = runtime.ContentTypeProtobuf
	// Config adds the etcd checks to /readyz alone (addEtcdReadyzChecks).
	o.RecommendedOptions.Etcd.SkipHealthEndpoints = true
	return o
}

// Flags returns the options' flags, in named sets for --help.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.RecommendedOptions.AddFlags(fss.FlagSet("generic"))
	// Also adds the version and feature gate flags of ComponentGlobalsRegistry.
	o.ServerRun.AddUniversalFlags(fss.FlagSet("server"))
	o.Controller.AddFlags(fss.FlagSet("controller"))
	o.StoreGuard.AddFlags(fss.FlagSet("storage guard"))
	fss.FlagSet("generic").StringSliceVar(&o.AlternateDNS, "alternate-dns", o.AlternateDNS,
		"Extra DNS names of the self-signed serving certificate made when --tls-cert-file is not set.")
	return fss
}

// Complete fills in what the flags left out: the codec objects are stored
// with, in the media type --storage-media-type names. It still reads objects
// stored in any other media type, so the flag can change on a live etcd.
func (o *Options) Complete() error {
	if err := o.ServerRun.Complete(); err != nil {
		return err
	}
	if admission := o.RecommendedOptions.Admission; admission != nil {
		// The cluster's ResourceQuotas apply to MyDatabases, after every
		// other plugin has had its say, as in kube-apiserver.
		// MyDatabaseResourceQuota then refuses a database whose claims and
		// pods would not fit (pkg/admission/quota).
		resourcequota.Register(admission.Plugins)
		quotaadmission.Register(admission.Plugins)
		// The namespace's LimitRanges default and bound spec.resources
		// right after NamespaceLifecycle, as LimitRanger does for pods, so
		// webhooks and policies see the defaults.
		limitrange.Register(admission.Plugins)
		// Before either: a create where mydb serves no databases is
		// refused whatever it asks for.
		namespaces.Register(admission.Plugins, func() scope.Namespaces { return o.Controller.DatabaseNamespaces })
		// A spec may name only Secrets and ConfigMaps its writer may read:
		// mydb reads them for the database.
		secretaccess.Register(admission.Plugins)
		// A forced failover needs a verb of its own, not only the
		// switchover's.
		forcedfailover.Register(admission.Plugins)
		// Each role of a short-lived database user needs a verb of its own.
		credentialrole.Register(admission.Plugins)
		// A restore to a point its source's archive cannot reach is a 422.
		recoverywindow.Register(admission.Plugins)
		order := admission.RecommendedPluginOrder
		admission.RecommendedPluginOrder = append(append(append([]string{}, order[:1]...),
			namespaces.PluginName, secretaccess.PluginName, forcedfailover.PluginName, credentialrole.PluginName, recoverywindow.PluginName, limitrange.PluginName), order[1:]...)
		admission.RecommendedPluginOrder = append(admission.RecommendedPluginOrder, resourcequota.PluginName, quotaadmission.PluginName)
	}
	etcd := o.RecommendedOptions.Etcd
	codec, versioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  etcd.DefaultStorageMediaType,
		StorageSerializer: apiserver.Codecs,
		StorageVersion:    examplev1.SchemeGroupVersion,
		MemoryVersion:     example.SchemeGroupVersion,
	})
	if err != nil {
		return fmt.Errorf("--storage-media-type: %w", err)
	}
	etcd.StorageConfig.Codec = codec
	etcd.StorageConfig.EncodeVersioner = versioner
	return nil
}

// Validate checks the options.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.RecommendedOptions.Validate()...)
	errs = append(errs, o.ServerRun.Validate()...)
	errs = append(errs, o.ComponentGlobalsRegistry.Validate()...)
	errs = append(errs, o.Controller.Validate(o.RecommendedOptions.CoreAPI != nil)...)
	errs = append(errs, o.StoreGuard.Validate()...)
	return utilerrors.NewAggregate(errs)
}

// Config turns the options into the server's configuration.
func (o *Options) Config() (*apiserver.Config, error) {
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts(
		"localhost", o.AlternateDNS, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}

	// One set of informers on mydb's own API serves both the quota admission
	// plugin and the controller.
	var ownInformers mydbinformers.SharedInformerFactory
	o.RecommendedOptions.ExtraAdmissionInitializers = func(c *genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
		loopback := rest.CopyConfig(c.LoopbackClientConfig)
		loopback.ContentType = runtime.ContentTypeProtobuf
		client, err := clientset.NewForConfig(loopback)
		if err != nil {
			return nil, err
		}
		ownInformers = mydbinformers.NewSharedInformerFactoryWithOptions(client, o.Controller.ResyncPeriod,
			mydbinformers.WithTransform(manager.TrimForCache))
		return []admission.PluginInitializer{quotaadmission.NewInitializer(ownInformers)}, nil
	}

	serverConfig := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	// A tunnel (mydatabases/connect) lasts as long as its client's session:
	// no request timeout, and no seat held in the in-flight limits.
	serverConfig.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch"), sets.NewString(access.TunnelSubresource))
	namer := openapi.NewDefinitionNamer(apiserver.Scheme)
	serverConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIConfig.GetOperationIDAndTags = apiserver.OperationIDs
	serverConfig.OpenAPIConfig.Info.Title = "mydb"
	serverConfig.OpenAPIConfig.Info.Version = "v1"
	serverConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIV3Config.GetOperationIDAndTags = apiserver.OperationIDs
	serverConfig.OpenAPIV3Config.Info.Title = "mydb"
	serverConfig.OpenAPIV3Config.Info.Version = "v1"
	if err := o.ServerRun.ApplyTo(&serverConfig.Config); err != nil {
		return nil, err
	}
	if err := o.RecommendedOptions.ApplyTo(serverConfig); err != nil {
		return nil, err
	}
	if err := addEtcdReadyzChecks(&serverConfig.Config, o.RecommendedOptions.Etcd.StorageConfig); err != nil {
		return nil, err
	}
	apiserver.WaitForAuthentication(&serverConfig.Config)
	guard, err := o.StoreGuard.apply(serverConfig, o.RecommendedOptions.Etcd.StorageConfig, serverConfig.ClientConfig)
	if err != nil {
		return nil, err
	}
	config := &apiserver.Config{GenericConfig: serverConfig, OwnInformers: ownInformers}
	config.Controllers = o.Controller.ApplyTo(serverConfig.ClientConfig)
	if guard != nil {
		config.StoreGate = guard
		if config.Controllers != nil {
			config.Controllers.Gate = guard
			config.Controllers.Databases.Store = guard
		}
	}
	return config, nil
}

// addEtcdReadyzChecks reports mydb's etcd in /readyz only. k8s.io/apiserver
// puts its etcd check into /livez as well, so an etcd outage would make the
// kubelet restart every mydb replica, which cannot help; unready, a replica
// only leaves the Service until etcd is back.
func addEtcdReadyzChecks(c *genericapiserver.Config, storage storagebackend.Config) error {
	health, err := storagefactory.CreateHealthCheck(storage, c.DrainedNotify())
	if err != nil {
		return err
	}
	ready, err := storagefactory.CreateReadyCheck(storage, c.DrainedNotify())
	if err != nil {
		return err
	}
	c.AddReadyzChecks(
		healthz.NamedCheck("etcd", func(*http.Request) error { return health() }),
		healthz.NamedCheck("etcd-readiness", func(*http.Request) error { return ready() }),
	)
	return nil
}
