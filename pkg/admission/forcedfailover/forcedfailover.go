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
	authorizer authorizer.Authorizer
}

var (
	_ admission.ValidationInterface = &Plugin{}
	_ initializer.WantsAuthorizer   = &Plugin{}
)

// NewPlugin returns the plugin; the server's initializer gives it the
// authorizer.
func NewPlugin() *Plugin { return &Plugin{Handler: admission.NewHandler(admission.Create)} }

// SetAuthorizer implements initializer.WantsAuthorizer.
func (p *Plugin) SetAuthorizer(a authorizer.Authorizer) { p.authorizer = a }

// ValidateInitialization checks the plugin has its authorizer.
func (p *Plugin) ValidateInitialization() error {
	if p.authorizer == nil {
		return fmt.Errorf("%s needs an authorizer", PluginName)
	}
	return nil
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
	decision, reason, err := p.authorizer.Authorize(ctx, authorizer.AttributesRecord{
		User: a.GetUserInfo(), Verb: Verb, Namespace: a.GetNamespace(), Name: a.GetName(),
		APIGroup: example.GroupName, APIVersion: a.GetResource().Version, Resource: "mydatabases", ResourceRequest: true,
	})
	if err == nil && decision == authorizer.DecisionAllow {
		return nil
	}
	msg := fmt.Sprintf("allowWriteLoss forces a failover that discards acknowledged writes: it needs the %q verb on mydatabases "+
		"in group %s, beyond create on mydatabases/switchover", Verb, example.GroupName)
	if err != nil {
		msg += fmt.Sprintf(" (%v)", err)
	} else if reason != "" {
		msg += " (" + reason + ")"
	}
	return admission.NewForbidden(a, fmt.Errorf("%s", msg))
}
