package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClientErrorsAnswer400 sends every kind the requests the generic store
// answers 500 to although the client is at fault (a resourceVersion that is
// not a number, a patch that cannot be applied). Each kind's storage is a
// common.REST, so each must answer 400 and store nothing.
func TestClientErrorsAnswer400(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	client := newClient(t).ExampleV1()
	// An owner, so that a strategic merge patch has a list to merge into
	// (nothing collects garbage here).
	owners := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "00000000-0000-0000-0000-000000000001"}}
	if _, err := client.MyDatabases(ns).Create(ctx, newMyDatabase("victim", func(db *examplev1.MyDatabase) {
		db.OwnerReferences = owners
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.MyDatabaseBackups(ns).Create(ctx, &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "victim", OwnerReferences: owners},
		Spec:       examplev1.MyDatabaseBackupSpec{DatabaseName: "victim"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	kinds := []struct {
		resource, kind string
		// wrongType is a spec field of the kind with a value of the wrong type, as YAML.
		wrongType string
	}{
		{resource: "mydatabases", kind: "MyDatabase", wrongType: "replicas: three"},
		{resource: "mydatabasebackups", kind: "MyDatabaseBackup", wrongType: "databaseName: [a, b]"},
	}
	for _, k := range kinds {
		t.Run(k.resource, func(t *testing.T) {
			base := "/apis/example.com/v1/namespaces/" + ns + "/" + k.resource
			get := func(t *testing.T) map[string]any {
				t.Helper()
				res := do(t, http.MethodGet, base+"/victim", "", nil)
				if res.code != http.StatusOK {
					t.Fatalf("getting the victim: %d %s", res.code, res.body)
				}
				var obj map[string]any
				if err := json.Unmarshal(res.body, &obj); err != nil {
					t.Fatal(err)
				}
				return obj
			}
			// withRV is the victim as stored with metadata.resourceVersion abc.
			withRV := func(t *testing.T) []byte {
				obj := get(t)
				obj["metadata"].(map[string]any)["resourceVersion"] = "abc"
				b, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			apply := func(spec string) []byte {
				return []byte("apiVersion: example.com/v1\nkind: " + k.kind + "\nmetadata:\n  name: victim\nspec:\n  " + spec + "\n")
			}
			cases := []struct {
				name, method, path, contentType string
				body                            func(t *testing.T) []byte
				wantMessage                     string
			}{
				{name: "get with resourceVersion abc", method: http.MethodGet, path: "/victim?resourceVersion=abc", wantMessage: "resourceVersion"},
				{name: "watch with resourceVersion abc", method: http.MethodGet, path: "?watch=true&timeoutSeconds=1&resourceVersion=abc", wantMessage: "resourceVersion"},
				{name: "list with resourceVersion abc", method: http.MethodGet, path: "?resourceVersion=abc", wantMessage: "resourceVersion"},
				{name: "update with resourceVersion abc", method: http.MethodPut, path: "/victim", contentType: ctJSON, body: withRV, wantMessage: "resourceVersion"},
				{name: "status update with resourceVersion abc", method: http.MethodPut, path: "/victim/status", contentType: ctJSON, body: withRV, wantMessage: "resourceVersion"},
				{name: "strategic merge patch with an unknown directive", method: http.MethodPatch, path: "/victim", contentType: ctSMP,
					body: constBody(`{"metadata":{"$patch":"frobnicate"}}`), wantMessage: "frobnicate"},
				{name: "strategic merge patch of a list item without its merge key", method: http.MethodPatch, path: "/victim", contentType: ctSMP,
					body: constBody(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x"}]}}`), wantMessage: "merge key"},
				{name: "status strategic merge patch of a list item without its merge key", method: http.MethodPatch, path: "/victim/status", contentType: ctSMP,
					body: constBody(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x"}]}}`), wantMessage: "merge key"},
				{name: "status get with resourceVersion abc", method: http.MethodGet, path: "/victim/status?resourceVersion=abc", wantMessage: "resourceVersion"},
				{name: "apply with an unknown field", method: http.MethodPatch, path: "/victim?fieldManager=hostile&fieldValidation=Strict", contentType: ctApply,
					body: constBody(string(apply("shards: 4"))), wantMessage: "spec.shards"},
				{name: "apply with a value of the wrong type", method: http.MethodPatch, path: "/victim?fieldManager=hostile", contentType: ctApply,
					body: constBody(string(apply(k.wrongType))), wantMessage: "spec." + strings.SplitN(k.wrongType, ":", 2)[0]},
			}
			before := get(t)["metadata"].(map[string]any)["resourceVersion"]
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					var body []byte
					if tc.body != nil {
						body = tc.body(t)
					}
					res := do(t, tc.method, base+tc.path, tc.contentType, body)
					if res.code != http.StatusBadRequest {
						t.Fatalf("code = %d, want 400: %s", res.code, abbrev(res.body))
					}
					if s := res.status(t); s.Code != http.StatusBadRequest || s.Reason != metav1.StatusReasonBadRequest || !strings.Contains(s.Message, tc.wantMessage) {
						t.Errorf("status %d %s %q, want 400 BadRequest naming %q", s.Code, s.Reason, s.Message, tc.wantMessage)
					}
					if after := get(t)["metadata"].(map[string]any)["resourceVersion"]; after != before {
						t.Errorf("the victim changed: resourceVersion %v, was %v", after, before)
					}
				})
			}
		})
	}
}

func constBody(s string) func(*testing.T) []byte {
	return func(*testing.T) []byte { return []byte(s) }
}
