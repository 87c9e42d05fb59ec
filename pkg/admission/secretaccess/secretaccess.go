// Package secretaccess closes a confused deputy: a MyDatabase names the
// Secret its S3 access key is read from, the Secret or ConfigMap of its
// CA bundle and the Secrets of its roles' passwords, and mydb's
// controllers, which may read them, send the key to the endpoint the same
// spec names, or make a role that logs in with the password. A user who
// may write MyDatabases but not read Secrets could otherwise have mydb
// read any Secret of the namespace (another database's credentials) and
// send it wherever they like, or log in with it. At
// admission the plugin asks the server's authorizer whether the requesting
// user may get each object the spec newly names, and refuses with 403 when
// not; and it refuses the database's own credentials Secret as an S3 key.
package secretaccess

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/mydb-dev/mydb/pkg/admission/authorizing"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/names"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// PluginName is the admission plugin's name.
const PluginName = "MyDatabaseSecretAccess"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin(), nil })
}

// Plugin checks the objects a MyDatabase's spec names against what its
// writer may read.
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
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update), Authorizer: authorizing.Authorizer{Plugin: PluginName}}
}

// reference is an object of the database's namespace that its spec names.
type reference struct {
	resource, name string
	path           *field.Path
}

// references lists what db's spec names that mydb reads for it.
func references(db *example.MyDatabase) []reference {
	if db == nil {
		return nil
	}
	var refs []reference
	if tls := db.Spec.TLS; tls != nil && tls.ServerCertificateSecret != "" {
		// Its key is copied where the database's pods read it.
		refs = append(refs, reference{"secrets", tls.ServerCertificateSecret, field.NewPath("spec", "tls", "serverCertificateSecret")})
	}
	for i, r := range db.Spec.Roles {
		// Its password is set on the role, which anyone who may write
		// the spec can then log in as.
		if r.PasswordSecret != nil && r.Ensure != example.EnsureAbsent {
			refs = append(refs, reference{"secrets", r.PasswordSecret.Name, field.NewPath("spec", "roles").Index(i).Child("passwordSecret", "name")})
		}
	}
	if db.Spec.Backup == nil || db.Spec.Backup.Destination == nil || db.Spec.Backup.Destination.S3 == nil {
		return refs
	}
	s3 := db.Spec.Backup.Destination.S3
	path := field.NewPath("spec", "backup", "destination", "s3")
	refs = append(refs, reference{"secrets", s3.CredentialsSecret.Name, path.Child("credentialsSecret", "name")})
	if ca := s3.CABundle; ca != nil {
		if ca.SecretName != "" {
			refs = append(refs, reference{"secrets", ca.SecretName, path.Child("caBundle", "secretName")})
		}
		if ca.ConfigMapName != "" {
			refs = append(refs, reference{"configmaps", ca.ConfigMapName, path.Child("caBundle", "configMapName")})
		}
	}
	return refs
}

// Validate refuses a create or update of a MyDatabase whose spec newly
// names a Secret or ConfigMap the requesting user may not get. A reference
// the object held before is not checked again: an update by someone else
// (or by mydb's own controllers) that leaves it as it was needs no access.
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != example.Resource("mydatabases") || a.GetSubresource() != "" {
		return nil
	}
	db, ok := a.GetObject().(*example.MyDatabase)
	if !ok {
		return nil
	}
	old, _ := a.GetOldObject().(*example.MyDatabase)
	before := map[string]bool{}
	for _, r := range references(old) {
		before[r.resource+"/"+r.name] = true
	}
	var errs field.ErrorList
	for _, r := range references(db) {
		if r.name == "" || before[r.resource+"/"+r.name] {
			continue
		}
		if r.resource == "secrets" && slices.Contains([]string{names.Secret(db.Name), names.InstanceSecret(db.Name), names.CASecret(db.Name), names.CertificatesSecret(db.Name)}, r.name) {
			errs = append(errs, field.Forbidden(r.path, fmt.Sprintf("may not be one of the database's own Secrets (%q)", r.name)))
			continue
		}
		allowed, why := p.Allowed(ctx, authorizer.AttributesRecord{
			User: a.GetUserInfo(), Verb: "get", Namespace: a.GetNamespace(),
			APIGroup: "", APIVersion: "v1", Resource: r.resource, Name: r.name, ResourceRequest: true,
		})
		if !allowed {
			msg := fmt.Sprintf("the requesting user must be allowed to get %s %q to name it: mydb reads it for this database", r.resource, r.name)
			if why != "" {
				msg += " (" + why + ")"
			}
			errs = append(errs, field.Forbidden(r.path, msg))
		}
	}
	if len(errs) > 0 {
		return admission.NewForbidden(a, errs.ToAggregate())
	}
	return nil
}
