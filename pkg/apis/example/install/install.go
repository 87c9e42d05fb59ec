// Package install registers the example.com API group in a scheme.
package install

import (
	"github.com/mydb-dev/mydb/pkg/apis/example"
	v1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// Install registers the API group and adds its types to a scheme.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(example.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1.SchemeGroupVersion))
}
