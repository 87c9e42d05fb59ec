package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The credentials subresource's answers that need neither a user nor an
// instance.
func TestCredentialsAction(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	if _, err := dbs.Create(ctx, newMyDatabase("shop"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	request := func(role examplev1.CredentialRole, seconds *int64) *examplev1.MyDatabaseCredentialRequest {
		return &examplev1.MyDatabaseCredentialRequest{Spec: examplev1.MyDatabaseCredentialRequestSpec{Role: role, ExpirationSeconds: seconds}}
	}
	t.Run("404 for a database that does not exist", func(t *testing.T) {
		if _, err := dbs.CreateCredentials(ctx, "nope", request("", nil), metav1.CreateOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%v, want 404", err)
		}
	})
	for _, tc := range []struct {
		name    string
		role    examplev1.CredentialRole
		seconds *int64
		field   string
	}{
		{"an unknown role", "admin", nil, "spec.role"},
		{"a lifetime under a minute", examplev1.CredentialRoleReadOnly, ptr.To[int64](59), "spec.expirationSeconds"},
		{"a lifetime over a day", examplev1.CredentialRoleReadWrite, ptr.To[int64](86401), "spec.expirationSeconds"},
	} {
		t.Run("422 for "+tc.name, func(t *testing.T) {
			_, err := dbs.CreateCredentials(ctx, "shop", request(tc.role, tc.seconds), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%v, want 422 naming %s", err, tc.field)
			}
		})
	}
	t.Run("400 for a malformed body", func(t *testing.T) {
		res := do(t, http.MethodPost, dbPath(ns, "shop", "credentials"), "application/json", []byte(`{"spec":{"expirationSeconds":"soon"}}`))
		if res.code != http.StatusBadRequest {
			t.Errorf("%d %s", res.code, res.body)
		}
	})
	// This server authenticates nobody (the rig's and the node's servers
	// do, through the aggregator; test/e2e makes real users there).
	t.Run("403 for a request with no user", func(t *testing.T) {
		for _, opts := range []metav1.CreateOptions{{}, {DryRun: []string{metav1.DryRunAll}}} {
			if _, err := dbs.CreateCredentials(ctx, "shop", request("", nil), opts); !apierrors.IsForbidden(err) {
				t.Errorf("dryRun %v: %v, want 403", opts.DryRun, err)
			}
		}
	})
	// The query of mydatabases/connect decodes into its options: an
	// instance the database does not have is a 422 naming the field, one
	// it has gets past validation (to a 503 here: this server runs no
	// controllers, so it reaches no instance).
	t.Run("connect's instance option", func(t *testing.T) {
		for query, want := range map[string]int{
			"?instance=shop-7":  http.StatusUnprocessableEntity,
			"?instance=standby": http.StatusUnprocessableEntity,
			"?instance=shop-0":  http.StatusServiceUnavailable,
			"?instance=replica": http.StatusServiceUnavailable,
			"":                  http.StatusServiceUnavailable,
		} {
			res := do(t, http.MethodPost, dbPath(ns, "shop", "connect")+query, "", nil)
			if res.code != want || (want == http.StatusUnprocessableEntity && !strings.Contains(string(res.body), `"field":"instance"`)) {
				t.Errorf("POST connect%s: %d %s, want %d", query, res.code, res.body, want)
			}
		}
	})
}
