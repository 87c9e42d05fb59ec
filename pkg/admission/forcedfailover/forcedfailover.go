// Package forcedfailover makes a forced failover (POST
// mydatabases/<name>/switchover with allowWriteLoss) need a verb of its own,
// forcefailover on mydatabases, beyond create on mydatabases/switchover: a
// planned switchover loses nothing, a forced failover discards the writes
// only a lost replica acknowledged, and the two are not the same grant (the
// switchover verb is the one docs offer to on-call roles).
package forcedfailover

import (
	"context"
	"fmt"
	"io"

	"github.com/mydb-dev/mydb/pkg/admission/authorizing"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// PluginName is the admission plugin's name.
const PluginName = "MyDatabaseForcedFailover"

// Verb is the RBAC verb on mydatabases that a forced failover needs.
const Verb = "forcefailover"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin(), nil })
}

// Plugin refuses a forced failover its requester may not force.
type Plugin struct {
	*admission.Handler
	authorizing.Authorizer
}

var (
	_ admission.ValidationInterface = &Plugin{}
	_ initializer.WantsAuthorizer   = &Plugin{}
)

// NewPlugin returns the plugin; the server's initializer gives it the
// authorizer.
func NewPlugin() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create), Authorizer: authorizing.Authorizer{Plugin: PluginName}}
}

// Validate refuses, with 403, a switchover request with allowWriteLoss
// from a user who may not forcefailover the database.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != example.Resource("mydatabases") || a.GetSubresource() != "switchover" {
		return nil
	}
	req, ok := a.GetObject().(*example.MyDatabaseSwitchover)
	if !ok || !req.Spec.AllowWriteLoss {
		return nil
	}
	allowed, why := p.Allowed(ctx, authorizer.AttributesRecord{
		User: a.GetUserInfo(), Verb: Verb, Namespace: a.GetNamespace(), Name: a.GetName(),
		APIGroup: example.GroupName, APIVersion: a.GetResource().Version, Resource: "mydatabases", ResourceRequest: true,
	})
	if allowed {
		return nil
	}
	msg := fmt.Sprintf("allowWriteLoss forces a failover that discards acknowledged writes: it needs the %q verb on mydatabases "+
		"in group %s, beyond create on mydatabases/switchover", Verb, example.GroupName)
	if why != "" {
		msg += " (" + why + ")"
	}
	return admission.NewForbidden(a, fmt.Errorf("%s", msg))
}
