// Package apiserver assembles mydb's API server: the example.com group's
// storage on a generic API server.
package apiserver

import (
	"fmt"
	"net/http"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/controller/manager"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"github.com/mydb-dev/mydb/pkg/livelag"
	"github.com/mydb-dev/mydb/pkg/registry/example/mydatabase"
	"github.com/mydb-dev/mydb/pkg/registry/example/mydatabasebackup"
	"github.com/mydb-dev/mydb/pkg/storagewrap"
	"github.com/mydb-dev/mydb/pkg/storeguard"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// Config is the configuration of the server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	// Controllers configures the in-process controllers; nil runs none.
	Controllers *manager.Config
	// OwnInformers watch mydb's own API through the loopback client, for the
	// quota admission plugin and the controller; the server starts them once
	// it serves.
	OwnInformers mydbinformers.SharedInformerFactory
	// StoreGate, when set, confirms mydb's etcd is the recorded store
	// after every read that may show objects as absent (pkg/storeguard).
	StoreGate storeguard.Gate
}

// Server is mydb's API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	Controllers   *manager.Config
	OwnInformers  mydbinformers.SharedInformerFactory
	StoreGate     storeguard.Gate
}

// CompletedConfig is a Config with every default filled in; only it can
// build a Server.
type CompletedConfig struct {
	*completedConfig
}

// Complete fills in the defaults of the configuration.
func (cfg *Config) Complete() CompletedConfig {
	// Patches of quantities beyond their bounds are refused before they
	// are decoded (quantities.go), inside the chain's other filters.
	chain := cfg.GenericConfig.BuildHandlerChainFunc
	maxBody := cfg.GenericConfig.MaxRequestBodyBytes
	if maxBody <= 0 {
		maxBody = 3 << 20 // the generic server's default
	}
	cfg.GenericConfig.BuildHandlerChainFunc = func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		return chain(WithBoundedQuantities(apiHandler, maxBody), c)
	}
	return CompletedConfig{&completedConfig{
		GenericConfig: cfg.GenericConfig.Complete(),
		Controllers:   cfg.Controllers,
		OwnInformers:  cfg.OwnInformers,
		StoreGate:     cfg.StoreGate,
	}}
}

// New builds the server and installs the example.com API group.
func (c completedConfig) New() (*Server, error) {
	genericServer, err := c.GenericConfig.New("mydb-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}

	// The parameter codec of this scheme, not metav1's: it decodes the
	// query of mydatabases/connect into MyDatabaseConnectOptions besides
	// the metav1 options every verb takes.
	apiGroupInfo := genericapiserver.NewDefaultAPIGroupInfo(example.GroupName, Scheme, runtime.NewParameterCodec(Scheme), Codecs)
	// Bodies whose quantities do not parse are answered with the field paths.
	apiGroupInfo.NegotiatedSerializer = fieldNamingSerializer{NegotiatedSerializer: Codecs}
	// mydb's storage wrappers (pkg/storagewrap): the watch cache's
	// MyDatabases share their resource lists (the largest part of a decoded
	// one) and their metadata's repeated strings and field sets with each
	// other; an etcd that cannot serve a request answers 504; reads that
	// may show objects as absent are confirmed by the store guard.
	optsGetter := storagewrap.Options(c.GenericConfig.RESTOptionsGetter, storagewrap.Config{
		CacheInput: map[schema.GroupResource]func(runtime.Object){
			example.Resource("mydatabases"): mydatabase.NewResourceListSharer().Share,
		},
		StoreGate: c.StoreGate,
	})
	dbStorage, err := mydatabase.NewStorage(Scheme, optsGetter)
	if err != nil {
		return nil, err
	}
	backupStorage, err := mydatabasebackup.NewStorage(Scheme, optsGetter, dbStorage.MyDatabase)
	if err != nil {
		return nil, err
	}
	apiGroupInfo.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"mydatabases":              dbStorage.MyDatabase,
		"mydatabases/status":       dbStorage.Status,
		"mydatabases/scale":        dbStorage.Scale,
		"mydatabases/backup":       backupStorage.Action,
		"mydatabases/switchover":   dbStorage.Switchover,
		"mydatabases/credentials":  dbStorage.Credentials,
		"mydatabases/connect":      dbStorage.Connect,
		"mydatabasebackups":        backupStorage.Backup,
		"mydatabasebackups/status": backupStorage.Status,
	}
	if err := genericServer.InstallAPIGroup(&apiGroupInfo); err != nil {
		return nil, err
	}
	if c.OwnInformers != nil {
		if err := genericServer.AddPostStartHook("start-mydb-informers", func(ctx genericapiserver.PostStartHookContext) error {
			c.OwnInformers.Start(ctx.Done())
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := c.installController(genericServer, dbStorage); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: genericServer}, nil
}

// installController starts the controllers after the server serves, and
// gives the credentials and connect subresources their informers and CA.
func (c completedConfig) installController(s *genericapiserver.GenericAPIServer, dbStorage mydatabase.Storage) error {
	if c.Controllers == nil {
		return nil
	}
	if c.OwnInformers == nil {
		return fmt.Errorf("the controllers need the informers on mydb's own API")
	}
	controllers, err := manager.New(*c.Controllers, c.OwnInformers, c.GenericConfig.LoopbackClientConfig)
	if err != nil {
		return err
	}
	if err := s.AddReadyzChecks(controllers.ReadyzCheck()); err != nil {
		return err
	}
	issuer := controllers.CredentialIssuer()
	dbStorage.Credentials.SetIssuer(issuer)
	dbStorage.Connect.SetTarget(issuer)
	dbStorage.SetLiveLag(&livelag.Reader{Credentials: issuer.Authority.Credentials, Managers: issuer.Managers})
	return s.AddPostStartHook("start-mydb-controllers", func(ctx genericapiserver.PostStartHookContext) error {
		go controllers.Run(ctx)
		return nil
	})
}
