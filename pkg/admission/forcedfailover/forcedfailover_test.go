package forcedfailover

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

func TestAForcedFailoverNeedsItsOwnVerb(t *testing.T) {
	// oncall may only create switchovers; sre may also force failovers of
	// mydatabases/shop in ns.
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == "sre" && a.GetVerb() == Verb && a.GetAPIGroup() == example.GroupName &&
			a.GetResource() == "mydatabases" && a.GetNamespace() == "ns" && a.GetName() == "shop" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	})
	p := NewPlugin()
	p.SetAuthorizer(authz)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	request := func(who string, allowWriteLoss bool, sub string) admission.Attributes {
		req := &example.MyDatabaseSwitchover{Spec: example.MyDatabaseSwitchoverSpec{TargetInstance: "shop-1", AllowWriteLoss: allowWriteLoss}}
		return admission.NewAttributesRecord(req, nil, example.Kind("MyDatabaseSwitchover").WithVersion("v1"), "ns", "shop",
			example.Resource("mydatabases").WithVersion("v1"), sub, admission.Create, nil, false, &user.DefaultInfo{Name: who})
	}
	for _, tc := range []struct {
		name   string
		attrs  admission.Attributes
		refuse bool
	}{
		{"a planned switchover by on-call", request("oncall", false, "switchover"), false},
		{"a forced failover by on-call", request("oncall", true, "switchover"), true},
		{"a forced failover by an SRE granted the verb", request("sre", true, "switchover"), false},
		{"another subresource", request("oncall", true, "backup"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Validate(context.Background(), tc.attrs, nil)
			if !tc.refuse {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"forcefailover" verb`) {
				t.Fatalf("got %v, want 403 naming the verb", err)
			}
		})
	}
}
