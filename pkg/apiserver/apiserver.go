// Package apiserver assembles mydb's API server: the example.com group's
// storage on a generic API server.
package apiserver

import (
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/registry/example/mydatabase"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
)

// Config is the configuration of the server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
}

// Server is mydb's API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
}

// CompletedConfig is a Config with every default filled in; only it can
// build a Server.
type CompletedConfig struct {
	*completedConfig
}

// Complete fills in the defaults of the configuration.
func (cfg *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{GenericConfig: cfg.GenericConfig.Complete()}}
}

// New builds the server and installs the example.com API group.
func (c completedConfig) New() (*Server, error) {
	genericServer, err := c.GenericConfig.New("mydb-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}

	apiGroupInfo := genericapiserver.NewDefaultAPIGroupInfo(example.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	dbStorage, err := mydatabase.NewStorage(Scheme, c.GenericConfig.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	apiGroupInfo.VersionedResourcesStorageMap["v1"] = map[string]rest.Storage{
		"mydatabases":        dbStorage.MyDatabase,
		"mydatabases/status": dbStorage.Status,
		"mydatabases/scale":  dbStorage.Scale,
	}
	if err := genericServer.InstallAPIGroup(&apiGroupInfo); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: genericServer}, nil
}
