// Package namespaces refuses, at admission, what would make a database or a
// backup in a namespace this mydb does not serve (--database-namespaces):
// its controllers could not read the Secrets there, so such an object would
// never run.
package namespaces

import (
	"context"
	"io"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/scope"
	"k8s.io/apiserver/pkg/admission"
)

// PluginName is the admission plugin's name.
const PluginName = "MyDatabaseNamespaces"

// Register registers the plugin; served returns the namespaces served when
// the plugin is built, after the flags are parsed.
func Register(plugins *admission.Plugins, served func() scope.Namespaces) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin(served()), nil })
}

// Plugin refuses creates in namespaces that are not served. Updates and
// deletes pass: what was made before the list can still be changed and
// removed.
type Plugin struct {
	*admission.Handler
	served scope.Namespaces
}

var _ admission.ValidationInterface = &Plugin{}

// NewPlugin returns the plugin for the namespaces served (empty: all).
func NewPlugin(served scope.Namespaces) *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create), served: served}
}

// Validate refuses a create of any example.com object, subresources such as
// a MyDatabase's /backup included, outside the namespaces served.
func (p *Plugin) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().Group != example.GroupName || a.GetNamespace() == "" || p.served.Serves(a.GetNamespace()) {
		return nil
	}
	return admission.NewForbidden(a, scope.NotServed(a.GetNamespace()))
}
