package namespaces

import (
	"context"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/scope"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

func TestCreatesOutsideTheServedNamespacesAreForbidden(t *testing.T) {
	attrs := func(group, resource, subresource, ns string, op admission.Operation) admission.Attributes {
		return admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{Group: group, Version: "v1"}, ns, "shop",
			schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource}, subresource, op, nil, false, nil)
	}
	for _, tc := range []struct {
		name      string
		served    scope.Namespaces
		attrs     admission.Attributes
		forbidden bool
	}{
		{"a database where served", scope.Namespaces{"team-a"}, attrs("example.com", "mydatabases", "", "team-a", admission.Create), false},
		{"a database elsewhere", scope.Namespaces{"team-a"}, attrs("example.com", "mydatabases", "", "other", admission.Create), true},
		{"a backup elsewhere", scope.Namespaces{"team-a"}, attrs("example.com", "mydatabasebackups", "", "other", admission.Create), true},
		{"POST /backup elsewhere", scope.Namespaces{"team-a"}, attrs("example.com", "mydatabases", "backup", "other", admission.Create), true},
		{"an update elsewhere", scope.Namespaces{"team-a"}, attrs("example.com", "mydatabases", "", "other", admission.Update), false},
		{"a delete elsewhere", scope.Namespaces{"team-a"}, attrs("example.com", "mydatabases", "", "other", admission.Delete), false},
		{"another group", scope.Namespaces{"team-a"}, attrs("", "configmaps", "", "other", admission.Create), false},
		{"every namespace served", nil, attrs("example.com", "mydatabases", "", "other", admission.Create), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlugin(tc.served)
			if !p.Handles(tc.attrs.GetOperation()) {
				if tc.forbidden {
					t.Fatalf("the plugin does not handle %s", tc.attrs.GetOperation())
				}
				return
			}
			err := p.Validate(context.Background(), tc.attrs, nil)
			if !tc.forbidden {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"other" is not one of them`) {
				t.Fatalf("got %v, want 403 naming the namespace", err)
			}
		})
	}
}
