// Package credentialrole makes each role of a short-lived database user
// (POST mydatabases/<name>/credentials) a grant of its own: the request
// needs create on mydatabases/credentials, and the role it asks for needs
// that role's name as a verb there too (readonly, readwrite), so a team can
// be handed read-only access without read-write.
package credentialrole

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
const PluginName = "MyDatabaseCredentialRole"

// Subresource is the subresource whose requests the plugin checks.
const Subresource = "credentials"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin(), nil })
}

// Plugin refuses a credential of a role its requester may not have.
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

// Validate refuses, with 403, a credential request for a role whose verb
// its requester lacks on mydatabases/credentials.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != example.Resource("mydatabases") || a.GetSubresource() != Subresource {
		return nil
	}
	req, ok := a.GetObject().(*example.MyDatabaseCredentialRequest)
	if !ok {
		return nil
	}
	role := string(req.Spec.Role)
	allowed, why := p.Allowed(ctx, authorizer.AttributesRecord{
		User: a.GetUserInfo(), Verb: role, Namespace: a.GetNamespace(), Name: a.GetName(),
		APIGroup: example.GroupName, APIVersion: a.GetResource().Version, Resource: "mydatabases", Subresource: Subresource,
		ResourceRequest: true,
	})
	if allowed {
		return nil
	}
	msg := fmt.Sprintf("a %s credential needs the %q verb on mydatabases/%s in group %s, beyond create", role, role, Subresource, example.GroupName)
	if why != "" {
		msg += " (" + why + ")"
	}
	return admission.NewForbidden(a, fmt.Errorf("%s", msg))
}
