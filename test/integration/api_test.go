package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apiserver"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

const seedExample = `{
  "apiVersion": "example.com/v1",
  "kind": "MyDatabase",
  "metadata": {"name": "prod-mysql"},
  "spec": {"engine": "mysql", "replicas": 3, "storageSize": "50Gi"}
}`

// newNamespace returns a namespace name of the test's own, so tests never
// see each other's objects.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	return strings.Trim(name, "-")
}

func newClient(t *testing.T) clientset.Interface {
	t.Helper()
	c, err := clientset.NewForConfig(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newMyDatabase(name string, mods ...func(*examplev1.MyDatabase)) *examplev1.MyDatabase {
	db := &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: examplev1.MyDatabaseSpec{
			Engine:      examplev1.EngineMySQL,
			Replicas:    ptr.To[int32](3),
			StorageSize: resource.MustParse("50Gi"),
		},
	}
	for _, mod := range mods {
		mod(db)
	}
	return db
}

// rawResult is an HTTP answer, for checks on codes and bodies.
type rawResult struct {
	code int
	body []byte
}

func (r rawResult) status(t *testing.T) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("answer %d is not a Status: %v: %s", r.code, err, r.body)
	}
	return s
}

// do sends a request straight over HTTP, so malformed bodies reach the server as they are.
func do(t *testing.T, method, path, contentType string, body []byte, headers ...string) rawResult {
	t.Helper()
	res, _ := request(t, method, path, contentType, body, headers...)
	return res
}

// request is do with the answer's headers, and a deadline, so a request the
// server wrongly took for a watch cannot hang the test.
func request(t *testing.T, method, path, contentType string, body []byte, headers ...string) (rawResult, http.Header) {
	t.Helper()
	client, err := rest.HTTPClientFor(server.Config)
	if err != nil {
		t.Fatal(err)
	}
	client.Timeout = 30 * time.Second
	req, err := http.NewRequest(method, server.Config.Host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+server.Config.BearerToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return rawResult{code: resp.StatusCode, body: data}, resp.Header
}

func dbPath(ns, name string, sub ...string) string {
	p := "/apis/example.com/v1/namespaces/" + ns + "/mydatabases"
	if name != "" {
		p += "/" + name
	}
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

func TestCRUD(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)

	res := do(t, http.MethodPost, dbPath(ns, ""), "application/json", []byte(seedExample))
	if res.code != http.StatusCreated {
		t.Fatalf("creating the seed example: %d %s", res.code, res.body)
	}
	created, err := dbs.Get(ctx, "prod-mysql", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Generation != 1 || created.Spec.Version != "9.7" || *created.Spec.Replicas != 3 ||
		created.Spec.DeletionPolicy != examplev1.DeletionPolicyRetain || created.Spec.Resources.Limits.Memory().String() != "1Gi" {
		t.Errorf("created object not defaulted as expected: generation %d, spec %+v", created.Generation, created.Spec)
	}

	list, err := dbs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "prod-mysql" {
		t.Errorf("list = %v, want prod-mysql alone", list.Items)
	}

	created.Spec.Replicas = ptr.To[int32](5)
	updated, err := dbs.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation != 2 || *updated.Spec.Replicas != 5 {
		t.Errorf("after update: generation %d replicas %d, want 2 and 5", updated.Generation, *updated.Spec.Replicas)
	}

	patched, err := dbs.Patch(ctx, "prod-mysql", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"payments"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.Generation != 2 || patched.Labels["team"] != "payments" {
		t.Errorf("after a label patch: generation %d labels %v, want 2 and team=payments", patched.Generation, patched.Labels)
	}

	if err := dbs.Delete(ctx, "prod-mysql", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dbs.Get(ctx, "prod-mysql", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
}

func TestWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)

	w, err := dbs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	db, err := dbs.Create(ctx, newMyDatabase("watched"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.Spec.Replicas = ptr.To[int32](1)
	if _, err := dbs.Update(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := dbs.Delete(ctx, "watched", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	var got []watch.EventType
	for len(got) < 3 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed after %v", got)
			}
			got = append(got, ev.Type)
		case <-ctx.Done():
			t.Fatalf("timed out after events %v", got)
		}
	}
	if diff := cmp.Diff([]watch.EventType{watch.Added, watch.Modified, watch.Deleted}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestConflictOnStaleResourceVersion(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	db, err := dbs.Create(ctx, newMyDatabase("contended"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := db.DeepCopy()
	first.Spec.Replicas = ptr.To[int32](4)
	if _, err := dbs.Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := db.DeepCopy()
	stale.Spec.Replicas = ptr.To[int32](6)
	_, err = dbs.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v, want 409 Conflict", err)
	}
	current, err := dbs.Get(ctx, "contended", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *current.Spec.Replicas != 4 {
		t.Errorf("replicas = %d after the conflict, want 4", *current.Spec.Replicas)
	}
}

func TestInvalidObjects(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name       string
		body       string
		wantFields []string
	}{
		{name: "bad engine", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"oracle","storageSize":"1Gi"}}`,
			wantFields: []string{"spec.engine"}},
		{name: "zero replicas", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"mysql","replicas":0,"storageSize":"1Gi"}}`,
			wantFields: []string{"spec.replicas"}},
		{name: "no storage", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"postgres"}}`,
			wantFields: []string{"spec.storageSize"}},
		{name: "bad name", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"Bad_Name"},"spec":{"engine":"mysql","storageSize":"1Gi"}}`,
			wantFields: []string{"metadata.name"}},
		{name: "several at once", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"mysql","version":"5.7","replicas":42,"storageSize":"1Gi"}}`,
			wantFields: []string{"spec.version", "spec.replicas"}},
		{name: "parameters off the catalog", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"postgres","storageSize":"1Gi",` +
			`"parameters":{"work_mem":"64mb","fsync":"off","max_connections":"300"}}}`,
			wantFields: []string{"spec.parameters[fsync]", "spec.parameters[work_mem]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, http.MethodPost, dbPath(ns, ""), "application/json", []byte(tc.body))
			if res.code != http.StatusUnprocessableEntity {
				t.Fatalf("code = %d, want 422: %s", res.code, res.body)
			}
			status := res.status(t)
			var fields []string
			for _, c := range status.Details.Causes {
				fields = append(fields, c.Field)
			}
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Errorf("fields (-want +got):\n%s\nmessage: %s", diff, status.Message)
			}
		})
	}
	list := do(t, http.MethodGet, dbPath(ns, ""), "", nil)
	if !bytes.Contains(list.body, []byte(`"items":[]`)) {
		t.Errorf("invalid objects were stored: %s", list.body)
	}
}

func TestMalformedBodies(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name        string
		path        string
		contentType string
		body        string
		wantCode    int
	}{
		{name: "truncated json", path: dbPath(ns, ""), contentType: "application/json", body: `{"apiVersion":"example.com/v1","kind":"MyDatabase",`,
			wantCode: http.StatusBadRequest},
		{name: "wrong type", path: dbPath(ns, ""), contentType: "application/json",
			body:     `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"mysql","replicas":"three","storageSize":"1Gi"}}`,
			wantCode: http.StatusBadRequest},
		{name: "bad quantity", path: dbPath(ns, ""), contentType: "application/json",
			body:     `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"mysql","storageSize":"lots"}}`,
			wantCode: http.StatusBadRequest},
		{name: "unknown field under strict validation", path: dbPath(ns, "") + "?fieldValidation=Strict", contentType: "application/json",
			body:     `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"mysql","storageSize":"1Gi","sharding":true}}`,
			wantCode: http.StatusBadRequest},
		{name: "duplicate field under strict validation", path: dbPath(ns, "") + "?fieldValidation=Strict", contentType: "application/json",
			body:     `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"mysql","engine":"postgres","storageSize":"1Gi"}}`,
			wantCode: http.StatusBadRequest},
		{name: "garbage protobuf", path: dbPath(ns, ""), contentType: "application/vnd.kubernetes.protobuf", body: "k8s\x00\x0a\xff\xff\xff",
			wantCode: http.StatusBadRequest},
		{name: "wrong kind", path: dbPath(ns, ""), contentType: "application/json",
			body: `{"apiVersion":"example.com/v1","kind":"Pod","metadata":{"name":"a"}}`, wantCode: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, http.MethodPost, tc.path, tc.contentType, []byte(tc.body))
			if res.code != tc.wantCode {
				t.Fatalf("code = %d, want %d: %s", res.code, tc.wantCode, res.body)
			}
		})
	}
	list := do(t, http.MethodGet, dbPath(ns, ""), "", nil)
	if !bytes.Contains(list.body, []byte(`"items":[]`)) {
		t.Errorf("malformed objects were stored: %s", list.body)
	}
}

// A quantity that does not parse is answered with its field path and what
// a quantity looks like, whatever the body's media type.
func TestUnparseableQuantitiesNameTheirField(t *testing.T) {
	ns := newNamespace(t)
	const detail = "must be a quantity: a number with an optional suffix, such as 50Gi, 512Mi, 1.5G, 500m or 2"
	tests := []struct {
		name, path, contentType, body string
		want                          string
	}{{
		name: "storageSize in YAML, as kubectl apply sends a manifest", path: dbPath(ns, ""), contentType: "application/yaml",
		body: "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: a\nspec:\n  engine: postgres\n  storageSize: fifty\n",
		want: `MyDatabase in version "v1" cannot be handled as a MyDatabase: spec.storageSize: Invalid value: "fifty": ` + detail,
	}, {
		name: "storageSize in JSON under strict field validation", path: dbPath(ns, "") + "?fieldValidation=Strict", contentType: "application/json",
		body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"postgres","storageSize":"fifty"}}`,
		want: `MyDatabase in version "v1" cannot be handled as a MyDatabase: spec.storageSize: Invalid value: "fifty": ` + detail,
	}, {
		name: "every bad quantity of spec.resources", path: dbPath(ns, ""), contentType: "application/json",
		body: `{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"a"},"spec":{"engine":"postgres","storageSize":"1Gi",` +
			`"resources":{"requests":{"memory":"1 GB","cpu":"half"},"limits":{"cpu":"2"}}}}`,
		want: `MyDatabase in version "v1" cannot be handled as a MyDatabase: [spec.resources.requests[cpu]: Invalid value: "half": ` + detail +
			`, spec.resources.requests[memory]: Invalid value: "1 GB": ` + detail + `]`,
	}, {
		name: "a merge patch", path: dbPath(ns, "b"), contentType: "application/merge-patch+json",
		body: `{"spec":{"storageSize":"fifty"}}`,
		want: `spec.storageSize: Invalid value: "fifty": ` + detail,
	}}
	create := do(t, http.MethodPost, dbPath(ns, ""), "application/json",
		[]byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"b"},"spec":{"engine":"postgres","storageSize":"1Gi"}}`))
	if create.code != http.StatusCreated {
		t.Fatalf("create: %d %s", create.code, create.body)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if strings.Contains(tc.contentType, "patch") {
				method = http.MethodPatch
			}
			res := do(t, method, tc.path, tc.contentType, []byte(tc.body))
			if res.code != http.StatusBadRequest && res.code != http.StatusUnprocessableEntity {
				t.Fatalf("code = %d, want 400 or 422: %s", res.code, res.body)
			}
			var status metav1.Status
			if err := json.Unmarshal(res.body, &status); err != nil {
				t.Fatalf("%v: %s", err, res.body)
			}
			if !strings.Contains(status.Message, tc.want) {
				t.Errorf("message\n  %s\nwant it to contain\n  %s", status.Message, tc.want)
			}
			t.Logf("%d %s", res.code, status.Message)
		})
	}
}

func TestStatusSubresource(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	db, err := dbs.Create(ctx, newMyDatabase("observed"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	db.Spec.Replicas = ptr.To[int32](9)
	db.Status = examplev1.MyDatabaseStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 2, Endpoint: "observed." + ns + ".svc:3306",
		Conditions: []metav1.Condition{{Type: examplev1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ReplicasNotReady",
			Message: "2 of 3 replicas are ready", LastTransitionTime: metav1.Now()}}}
	updated, err := dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *updated.Spec.Replicas != 3 || updated.Generation != 1 {
		t.Errorf("/status changed the spec: replicas %d generation %d", *updated.Spec.Replicas, updated.Generation)
	}
	if updated.Status.ReadyReplicas != 2 || len(updated.Status.Conditions) != 1 {
		t.Errorf("/status did not write status: %+v", updated.Status)
	}

	// Status sent through the main resource is dropped.
	updated.Status.ReadyReplicas = 0
	updated.Labels = map[string]string{"touched": "yes"}
	again, err := dbs.Update(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ReadyReplicas != 2 {
		t.Errorf("the main resource wrote status: readyReplicas %d, want 2", again.Status.ReadyReplicas)
	}

	// Invalid status is rejected with its field path.
	again.Status.ReadyReplicas = 7
	_, err = dbs.UpdateStatus(ctx, again, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.readyReplicas") {
		t.Errorf("invalid status: %v, want 422 naming status.readyReplicas", err)
	}
}

func TestScaleSubresource(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	if _, err := dbs.Create(ctx, newMyDatabase("scaled"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale, err := dbs.GetScale(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if scale.Spec.Replicas != 3 {
		t.Errorf("scale replicas = %d, want 3", scale.Spec.Replicas)
	}
	scale.Spec.Replicas = 5
	if _, err := dbs.UpdateScale(ctx, "scaled", scale, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	db, err := dbs.Get(ctx, "scaled", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *db.Spec.Replicas != 5 || db.Generation != 2 {
		t.Errorf("after scaling: replicas %d generation %d, want 5 and 2", *db.Spec.Replicas, db.Generation)
	}

	res := do(t, http.MethodPatch, dbPath(ns, "scaled", "scale"), "application/merge-patch+json", []byte(`{"spec":{"replicas":10}}`))
	if res.code != http.StatusUnprocessableEntity || !bytes.Contains(res.body, []byte("spec.replicas")) {
		t.Errorf("scaling past the bound: %d %s, want 422 naming spec.replicas", res.code, res.body)
	}
	res = do(t, http.MethodPatch, dbPath(ns, "scaled", "scale"), "application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))
	if res.code != http.StatusOK {
		t.Fatalf("patching scale: %d %s", res.code, res.body)
	}
	var patched autoscalingv1.Scale
	if err := json.Unmarshal(res.body, &patched); err != nil {
		t.Fatal(err)
	}
	if patched.Kind != "Scale" || patched.APIVersion != "autoscaling/v1" || patched.Spec.Replicas != 2 {
		t.Errorf("patched scale = %s %s replicas %d", patched.APIVersion, patched.Kind, patched.Spec.Replicas)
	}
	if res := do(t, http.MethodGet, dbPath(ns, "missing", "scale"), "", nil); res.code != http.StatusNotFound {
		t.Errorf("scale of a missing database: %d, want 404", res.code)
	}
}

func TestTable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	if _, err := newClient(t).ExampleV1().MyDatabases(ns).Create(ctx, newMyDatabase("tabled"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := do(t, http.MethodGet, dbPath(ns, ""), "", nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if res.code != http.StatusOK {
		t.Fatalf("%d %s", res.code, res.body)
	}
	var table metav1.Table
	if err := json.Unmarshal(res.body, &table); err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, c := range table.ColumnDefinitions {
		headers = append(headers, c.Name)
	}
	want := []string{"Name", "Engine", "Version", "Replicas", "Ready", "Up-to-date", "Primary", "Storage", "Status", "Age", "Endpoint", "Storage Class", "Deletion Policy", "Recoverable To", "Replica Lag"}
	if diff := cmp.Diff(want, headers); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(table.Rows) != 1 || fmt.Sprint(table.Rows[0].Cells[:9]) != "[tabled mysql 9.7 3 0/3 0 <none> 50Gi Pending]" {
		t.Errorf("rows = %v", table.Rows)
	}
}

func TestFieldSelectors(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	for _, db := range []*examplev1.MyDatabase{
		newMyDatabase("my"),
		newMyDatabase("pg", func(d *examplev1.MyDatabase) { d.Spec.Engine = examplev1.EnginePostgres }),
		newMyDatabase("pg-old", func(d *examplev1.MyDatabase) { d.Spec.Engine, d.Spec.Version = examplev1.EnginePostgres, "15" }),
	} {
		if _, err := dbs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		selector string
		want     []string
	}{
		{selector: "spec.engine=postgres", want: []string{"pg", "pg-old"}},
		{selector: "spec.engine=postgres,spec.version=15", want: []string{"pg-old"}},
		{selector: "spec.engine!=postgres", want: []string{"my"}},
		{selector: "status.ready=Unknown", want: []string{"my", "pg", "pg-old"}},
		{selector: "metadata.name=pg", want: []string{"pg"}},
	}
	for _, tc := range tests {
		t.Run(tc.selector, func(t *testing.T) {
			list, err := dbs.List(ctx, metav1.ListOptions{FieldSelector: tc.selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, db := range list.Items {
				got = append(got, db.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
	if res := do(t, http.MethodGet, dbPath(ns, "")+"?fieldSelector=spec.replicas%3D3", "", nil); res.code != http.StatusBadRequest {
		t.Errorf("unsupported field selector: %d %s, want 400", res.code, res.body)
	}
}

func TestProtobuf(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	pb := protobuf.NewSerializer(apiserver.Scheme, apiserver.Scheme)
	var body bytes.Buffer
	db := newMyDatabase("proto")
	db.APIVersion, db.Kind = "example.com/v1", "MyDatabase"
	if err := pb.Encode(db, &body); err != nil {
		t.Fatal(err)
	}
	res := do(t, http.MethodPost, dbPath(ns, ""), runtime.ContentTypeProtobuf, body.Bytes(), "Accept", runtime.ContentTypeProtobuf)
	if res.code != http.StatusCreated {
		t.Fatalf("protobuf create: %d %s", res.code, res.body)
	}
	obj, _, err := pb.Decode(res.body, nil, &examplev1.MyDatabase{})
	if err != nil {
		t.Fatalf("decoding the protobuf answer: %v", err)
	}
	got := obj.(*examplev1.MyDatabase)
	if got.Name != "proto" || got.Spec.Version != "9.7" || got.Spec.StorageSize.String() != "50Gi" {
		t.Errorf("protobuf answer: %+v", got)
	}

	res = do(t, http.MethodGet, dbPath(ns, ""), "", nil, "Accept", runtime.ContentTypeProtobuf)
	list, _, err := pb.Decode(res.body, nil, &examplev1.MyDatabaseList{})
	if err != nil || len(list.(*examplev1.MyDatabaseList).Items) != 1 {
		t.Fatalf("protobuf list: %v %v", err, list)
	}

	// The object is stored in etcd as protobuf too.
	client, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	key := server.EtcdPrefix + "/example.com/mydatabases/" + ns + "/proto"
	resp, err := client.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || !bytes.HasPrefix(resp.Kvs[0].Value, []byte("k8s\x00")) {
		t.Errorf("etcd key %s does not hold a protobuf object: %q", key, resp.Kvs)
	}
}

func TestPagination(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)
	var want []string
	for i := 0; i < 7; i++ {
		name := fmt.Sprintf("db-%d", i)
		want = append(want, name)
		if _, err := dbs.Create(ctx, newMyDatabase(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	pages := 0
	opts := metav1.ListOptions{Limit: 3}
	for {
		list, err := dbs.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, db := range list.Items {
			got = append(got, db.Name)
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names over all pages (-want +got):\n%s", diff)
	}
	if pages != 3 {
		t.Errorf("pages = %d, want 3", pages)
	}
}

func TestDiscovery(t *testing.T) {
	res := do(t, http.MethodGet, "/apis/example.com/v1", "", nil)
	if res.code != http.StatusOK {
		t.Fatalf("%d %s", res.code, res.body)
	}
	var resources metav1.APIResourceList
	if err := json.Unmarshal(res.body, &resources); err != nil {
		t.Fatal(err)
	}
	got := map[string]metav1.APIResource{}
	for _, r := range resources.APIResources {
		got[r.Name] = r
	}
	main := got["mydatabases"]
	if fmt.Sprint(main.ShortNames) != "[mdb]" || fmt.Sprint(main.Categories) != "[all mydb]" || main.SingularName != "mydatabase" || !main.Namespaced {
		t.Errorf("mydatabases discovery = %+v", main)
	}
	if scale := got["mydatabases/scale"]; scale.Group != "autoscaling" || scale.Version != "v1" || scale.Kind != "Scale" {
		t.Errorf("mydatabases/scale discovery = %+v", scale)
	}
	if _, ok := got["mydatabases/status"]; !ok {
		t.Errorf("no mydatabases/status in discovery")
	}
	for _, path := range []string{"/openapi/v2", "/openapi/v3/apis/example.com/v1"} {
		res := do(t, http.MethodGet, path, "", nil)
		if res.code != http.StatusOK || !bytes.Contains(res.body, []byte("storageSize")) {
			t.Errorf("%s: %d, or no MyDatabase schema", path, res.code)
		}
	}
}
