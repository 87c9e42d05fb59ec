// Package quota lets the ResourceQuota admission plugin of k8s.io/apiserver
// enforce "count/mydatabases.example.com" in a namespace's ResourceQuota:
// mydb admits its own objects, so it must count them itself.
package quota

import (
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	admissioninitializer "k8s.io/apiserver/pkg/admission/initializer"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

// NewInitializer returns the admission initializer that hands the quota
// plugin an evaluator counting MyDatabases from informer.
func NewInitializer(informer exampleinformers.MyDatabaseInformer) admission.PluginInitializer {
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
	return initializer{config: generic.NewConfiguration([]quotav1.Evaluator{count}, nil)}
}

type initializer struct {
	config quotav1.Configuration
}

// Initialize gives the quota configuration to the plugins that want it.
func (i initializer) Initialize(plugin admission.Interface) {
	if wants, ok := plugin.(admissioninitializer.WantsQuotaConfiguration); ok {
		wants.SetQuotaConfiguration(i.config)
	}
}
