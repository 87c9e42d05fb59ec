// Package quota lets the ResourceQuota admission plugin of k8s.io/apiserver
// enforce "count/mydatabases.example.com" in a namespace's ResourceQuota:
// mydb admits its own objects, so it must count them itself. Its own plugin,
// MyDatabaseResourceQuota (plugin.go), refuses databases whose children
// (claims, pods) would exceed the namespace's quotas, and charges
// "count/mydatabasebackups.example.com" for the /backup action.
package quota

import (
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	admissioninitializer "k8s.io/apiserver/pkg/admission/initializer"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

// NewInitializer returns the admission initializer that hands the quota
// plugins an evaluator counting MyDatabases from factory's informer, and
// MyDatabaseResourceQuota the informers themselves.
func NewInitializer(factory exampleinformers.SharedInformerFactory) admission.PluginInitializer {
	informer := factory.Example().V1().MyDatabases()
	lister := informer.Lister()
	hasSynced := informer.Informer().HasSynced
	count := generic.NewObjectCountEvaluator(examplev1.Resource("mydatabases"), func(namespace string) ([]runtime.Object, error) {
		// Counting from an empty cache would admit past the quota.
		if !hasSynced() {
			return nil, fmt.Errorf("the MyDatabase cache has not synced yet")
		}
		dbs, err := lister.MyDatabases(namespace).List(labels.Everything())
		if err != nil {
			return nil, err
		}
		objs := make([]runtime.Object, 0, len(dbs))
		for _, db := range dbs {
			objs = append(objs, db)
		}
		return objs, nil
	}, "")
	return initializer{config: generic.NewConfiguration([]quotav1.Evaluator{count}, nil), factory: factory}
}

type initializer struct {
	config  quotav1.Configuration
	factory exampleinformers.SharedInformerFactory
}

// Initialize gives the quota configuration to the plugins that want it.
func (i initializer) Initialize(plugin admission.Interface) {
	if wants, ok := plugin.(admissioninitializer.WantsQuotaConfiguration); ok {
		wants.SetQuotaConfiguration(i.config)
	}
	if wants, ok := plugin.(WantsMyDatabaseInformers); ok {
		wants.SetMyDatabaseInformers(i.factory)
	}
}
