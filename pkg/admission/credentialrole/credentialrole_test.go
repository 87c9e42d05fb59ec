package credentialrole

import (
	"context"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

func TestEachRoleNeedsItsOwnVerb(t *testing.T) {
	// analyst may have readonly credentials of ns/shop; dev both roles.
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetAPIGroup() != example.GroupName || a.GetResource() != "mydatabases" || a.GetSubresource() != Subresource ||
			a.GetNamespace() != "ns" || a.GetName() != "shop" {
			return authorizer.DecisionNoOpinion, "", nil
		}
		switch {
		case a.GetUser().GetName() == "analyst" && a.GetVerb() == "readonly",
			a.GetUser().GetName() == "dev" && (a.GetVerb() == "readonly" || a.GetVerb() == "readwrite"):
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	p := NewPlugin()
	p.SetAuthorizer(authz)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	request := func(who string, role example.CredentialRole, sub string) admission.Attributes {
		req := &example.MyDatabaseCredentialRequest{Spec: example.MyDatabaseCredentialRequestSpec{Role: role}}
		return admission.NewAttributesRecord(req, nil, example.Kind("MyDatabaseCredentialRequest").WithVersion("v1"), "ns", "shop",
			example.Resource("mydatabases").WithVersion("v1"), sub, admission.Create, nil, false, &user.DefaultInfo{Name: who})
	}
	for _, tc := range []struct {
		name   string
		attrs  admission.Attributes
		refuse string
	}{
		{"readonly for an analyst", request("analyst", example.CredentialRoleReadOnly, Subresource), ""},
		{"readwrite for an analyst", request("analyst", example.CredentialRoleReadWrite, Subresource), `"readwrite" verb`},
		{"readwrite for a developer", request("dev", example.CredentialRoleReadWrite, Subresource), ""},
		{"readonly for someone with create only", request("intern", example.CredentialRoleReadOnly, Subresource), `"readonly" verb`},
		{"another subresource", request("intern", example.CredentialRoleReadWrite, "switchover"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Validate(context.Background(), tc.attrs, nil)
			if tc.refuse == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.refuse) {
				t.Fatalf("got %v, want 403 naming %s", err, tc.refuse)
			}
		})
	}
}
