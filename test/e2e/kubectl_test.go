//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	mydbtyped "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
)

// seedExample is the object from the article mydb grew from, unchanged.
const seedExample = `apiVersion: example.com/v1
kind: MyDatabase
metadata:
  name: prod-mysql
spec:
  engine: mysql
  replicas: 3
  storageSize: 50Gi
`

func TestAPIResources(t *testing.T) {
	t.Parallel()
	out := mustKubectl(t, "", "api-resources", "--api-group=example.com", "--no-headers")
	var rows []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	want := []string{
		"mydatabasebackups mdbb example.com/v1 true MyDatabaseBackup",
		"mydatabases mdb example.com/v1 true MyDatabase",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("api-resources = %q, want %q", rows, want)
	}
	if out := mustKubectl(t, "", "api-resources", "--categories=mydb", "-o", "name"); !slices.Equal(strings.Fields(out),
		[]string{"mydatabasebackups.example.com", "mydatabases.example.com"}) {
		t.Errorf("category mydb = %q, want both kinds", out)
	}
	if out := mustKubectl(t, "", "api-resources", "--categories=all", "-o", "name"); !strings.Contains(out, "mydatabases.example.com") {
		t.Errorf("category all lacks mydatabases: %q", out)
	}
}

func TestSeedExampleLifecycle(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	if out := mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-"); !strings.Contains(out, "mydatabase.example.com/prod-mysql created") {
		t.Errorf("apply said %q", out)
	}

	out := mustKubectl(t, "", "get", "mdb", "-n", ns)
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if got := strings.Join(header, " "); got != "NAME ENGINE VERSION REPLICAS READY UP-TO-DATE PRIMARY STORAGE STATUS AGE" {
		t.Errorf("columns = %q", got)
	}
	if !regexp.MustCompile(`prod-mysql\s+mysql\s+9\.7\s+3\s+\d/3\s+\d\s+\S+\s+50Gi\s+\w+`).MatchString(out) {
		t.Errorf("row not as expected:\n%s", out)
	}
	if wide := mustKubectl(t, "", "get", "mydatabases", "-n", ns, "-o", "wide"); !strings.Contains(wide, "DELETION POLICY") || !strings.Contains(wide, "Retain") {
		t.Errorf("-o wide lacks the wide columns:\n%s", wide)
	}
	yaml := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", "yaml")
	for _, want := range []string{"generation: 1", "version: \"9.7\"", "storageSize: 50Gi", "deletionPolicy: Retain", "memory: 512Mi"} {
		if !strings.Contains(yaml, want) {
			t.Errorf("-o yaml lacks %q:\n%s", want, yaml)
		}
	}
	if desc := mustKubectl(t, "", "describe", "mdb", "prod-mysql", "-n", ns); !strings.Contains(desc, "Engine:") || !strings.Contains(desc, "Storage Size:") {
		t.Errorf("describe:\n%s", desc)
	}

	// Re-applying the same file changes nothing.
	if out := mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-"); !strings.Contains(out, "unchanged") {
		t.Errorf("second apply said %q", out)
	}

	mustKubectl(t, "", "scale", "mdb/prod-mysql", "-n", ns, "--replicas=5")
	if got := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "5 2" {
		t.Errorf("after scale: replicas and generation %q, want \"5 2\"", got)
	}
	if r := kubectl(t, "", "scale", "mdb/prod-mysql", "-n", ns, "--replicas=12"); r.err == nil || !strings.Contains(r.stderr, "spec.replicas") {
		t.Errorf("scaling past the bound should fail naming spec.replicas:\n%s", r)
	}

	mustKubectl(t, "", "patch", "mdb/prod-mysql", "-n", ns, "--type=merge", "-p", `{"spec":{"storageSize":"100Gi"}}`)
	if r := kubectl(t, "", "patch", "mdb/prod-mysql", "-n", ns, "--type=merge", "-p", `{"spec":{"storageSize":"10Gi"}}`); r.err == nil ||
		!strings.Contains(r.stderr, "spec.storageSize") || !strings.Contains(r.stderr, "may not be less than") {
		t.Errorf("shrinking storage should fail naming spec.storageSize:\n%s", r)
	}
	if r := kubectl(t, "", "patch", "mdb/prod-mysql", "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/engine","value":"postgres"}]`); r.err == nil ||
		!strings.Contains(r.stderr, "spec.engine") {
		t.Errorf("changing the engine should fail naming spec.engine:\n%s", r)
	}

	changed := strings.Replace(seedExample, "storageSize: 50Gi", "storageSize: 200Gi", 1)
	d := kubectl(t, changed, "diff", "-n", ns, "-f", "-")
	if !strings.Contains(d.stdout, "-  storageSize: 100Gi") || !strings.Contains(d.stdout, "+  storageSize: 200Gi") {
		t.Errorf("diff does not show the storage change:\n%s", d)
	}

	mustKubectl(t, "", "delete", "mdb", "prod-mysql", "-n", ns, "--wait=true")
	if r := kubectl(t, "", "get", "mdb", "prod-mysql", "-n", ns); r.err == nil || !strings.Contains(r.stderr, "NotFound") {
		t.Errorf("get after delete:\n%s", r)
	}
}

func TestInvalidObjectsShowFieldPaths(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	tests := []struct {
		name, manifest string
		want           []string
	}{
		{name: "unknown engine", manifest: strings.Replace(seedExample, "engine: mysql", "engine: oracle", 1),
			want: []string{`spec.engine: Unsupported value: "oracle"`}},
		{name: "zero replicas", manifest: strings.Replace(seedExample, "replicas: 3", "replicas: 0", 1),
			want: []string{"spec.replicas: Invalid value: 0: must be between 1 and 9"}},
		{name: "bad quantity", manifest: strings.Replace(seedExample, "50Gi", "fifty", 1),
			want: []string{`spec.storageSize: Invalid value: "fifty": must be a quantity`}},
		{name: "unknown field", manifest: strings.Replace(seedExample, "replicas: 3", "replicas: 3\n  shards: 2", 1),
			want: []string{`unknown field "spec.shards"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := kubectl(t, tc.manifest, "apply", "-n", ns, "-f", "-")
			if r.err == nil {
				t.Fatalf("apply succeeded:\n%s", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("message lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	if out := mustKubectl(t, "", "get", "mdb", "-n", ns, "-o", "name"); out != "" {
		t.Errorf("invalid objects were stored: %s", out)
	}
}

func TestExplain(t *testing.T) {
	t.Parallel()
	out := mustKubectl(t, "", "explain", "mydatabase.spec.engine")
	if !strings.Contains(out, "Engine is the database engine") {
		t.Errorf("explain spec.engine:\n%s", out)
	}
	out = mustKubectl(t, "", "explain", "mdb.spec", "--recursive")
	for _, f := range []string{"engine", "version", "replicas", "storageSize", "resources", "deletionPolicy"} {
		if !strings.Contains(out, f) {
			t.Errorf("explain --recursive lacks %s:\n%s", f, out)
		}
	}
}

func TestServerSideApply(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	mustKubectl(t, seedExample, "apply", "--server-side", "--field-manager=platform", "-n", ns, "-f", "-")

	// A second manager takes replicas over with --force-conflicts after a
	// conflict; the first keeps the rest.
	scaler := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: prod-mysql\nspec:\n  replicas: 5\n"
	r := kubectl(t, scaler, "apply", "--server-side", "--field-manager=autoscaler", "-n", ns, "-f", "-")
	if r.err == nil || !strings.Contains(r.stderr, "conflict with \"platform\"") || !strings.Contains(r.stderr, ".spec.replicas") {
		t.Fatalf("expected a conflict on .spec.replicas with platform:\n%s", r)
	}
	mustKubectl(t, scaler, "apply", "--server-side", "--field-manager=autoscaler", "--force-conflicts", "-n", ns, "-f", "-")
	managers := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "--show-managed-fields", "-o", "jsonpath={range .metadata.managedFields[*]}{.manager}:{.operation} {end}")
	if !strings.Contains(managers, "platform:Apply") || !strings.Contains(managers, "autoscaler:Apply") {
		t.Errorf("managers = %q", managers)
	}
	if got := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", "jsonpath={.spec.replicas}"); got != "5" {
		t.Errorf("replicas = %s, want 5", got)
	}
	// Status is not the user's to own: an applied status is dropped, and the
	// manager owns no status field. (The controller writes the real status;
	// it never reports more ready replicas than the 5 there are.)
	withStatus := strings.Replace(seedExample, "replicas: 3", "replicas: 5", 1) + "status:\n  readyReplicas: 9\n"
	mustKubectl(t, withStatus, "apply", "--server-side", "--field-manager=platform", "--force-conflicts", "-n", ns, "-f", "-")
	if got := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", "jsonpath={.status.readyReplicas}"); got == "9" {
		t.Errorf("status.readyReplicas = 9: an apply through the main resource wrote status")
	}
	owned := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "--show-managed-fields", "-o",
		`jsonpath={range .metadata.managedFields[?(@.manager=="platform")]}{.fieldsV1}{end}`)
	if strings.Contains(owned, "f:status") {
		t.Errorf("platform owns status fields: %s", owned)
	}
}

func TestFieldSelector(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")
	mustKubectl(t, strings.NewReplacer("prod-mysql", "orders-pg", "engine: mysql", "engine: postgres").Replace(seedExample), "apply", "-n", ns, "-f", "-")
	if out := mustKubectl(t, "", "get", "mdb", "-n", ns, "--field-selector", "spec.engine=postgres", "-o", "name"); strings.TrimSpace(out) != "mydatabase.example.com/orders-pg" {
		t.Errorf("spec.engine=postgres selected %q", out)
	}
	if r := kubectl(t, "", "get", "mdb", "-n", ns, "--field-selector", "spec.storageSize=50Gi"); r.err == nil || !strings.Contains(r.stderr, "field label not supported") {
		t.Errorf("an unsupported field selector should be refused:\n%s", r)
	}
}

func TestWatchWithKubectl(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	// kubectl prints what it listed before it watches: once the sentinel is
	// printed, whatever is created next arrives over the watch.
	mustKubectl(t, strings.ReplaceAll(seedExample, "prod-mysql", "sentinel"), "apply", "-n", ns, "-f", "-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBin, "--kubeconfig", kubeconfig, "get", "mdb", "-n", ns, "-w", "--no-headers")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
	}()
	next := func(prefix, what string) {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("kubectl stopped before printing %s", what)
				}
				if strings.HasPrefix(line, prefix) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("kubectl printed no %s within a minute", what)
			}
		}
	}
	next("sentinel ", "listed sentinel")
	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")
	next("prod-mysql ", "watch event for prod-mysql")
}

// protobufMyDatabases is a client of the MyDatabases of ns that speaks
// protobuf only.
func protobufMyDatabases(t *testing.T, ns string) mydbtyped.MyDatabaseInterface {
	cfg := restConfig(t)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	return mydbClient(t, cfg).ExampleV1().MyDatabases(ns)
}

func TestProtobufThroughAggregator(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	dbs := protobufMyDatabases(t, ns)
	created, err := dbs.Create(context.Background(), &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "proto"},
		Spec:       examplev1.MyDatabaseSpec{Engine: examplev1.EnginePostgres, StorageSize: quantity("5Gi")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Version != "17" || *created.Spec.Replicas != 1 {
		t.Errorf("created over protobuf: %+v", created.Spec)
	}
	list, err := dbs.List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list over protobuf: %v, %d items", err, len(list.Items))
	}
	// kubectl asks for protobuf too, where the server offers it.
	raw := mustKubectl(t, "", "get", "--raw", fmt.Sprintf("/apis/example.com/v1/namespaces/%s/mydatabases/proto", ns))
	if !strings.Contains(raw, `"engine":"postgres"`) {
		t.Errorf("raw get: %s", raw)
	}
}

// Protobuf carries times JSON cannot: an empty one, and years beyond 9999.
// The server stores neither, so what a protobuf client writes every JSON
// client (kubectl) can still read.
func TestAProtobufClientStoresNoTimeJSONCannotRead(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	dbs := protobufMyDatabases(t, ns)
	ctx := context.Background()
	if _, err := dbs.Create(ctx, &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "times"},
		Spec:       examplev1.MyDatabaseSpec{Engine: examplev1.EnginePostgres, StorageSize: quantity("5Gi")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	updateStatus := func(mod func(*examplev1.MyDatabase)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			db, err := dbs.Get(ctx, "times", metav1.GetOptions{})
			if err != nil {
				return err
			}
			mod(db)
			_, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
			return err
		})
	}

	late := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	err := updateStatus(func(db *examplev1.MyDatabase) { db.Status.LastScheduleTime = &metav1.Time{Time: late} })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "status.lastScheduleTime") || !strings.Contains(err.Error(), "must be between the years 0000 and 9999") {
		t.Errorf("a last schedule time in year 10000: %v, want 422 naming status.lastScheduleTime", err)
	}
	// Managed fields are written through the object itself (/status keeps
	// the stored ones); another manager's entry keeps the time it carries.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		db, err := dbs.Get(ctx, "times", metav1.GetOptions{})
		if err != nil {
			return err
		}
		db.ManagedFields = append(db.ManagedFields, metav1.ManagedFieldsEntry{Manager: "someone-else", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "example.com/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:engine":{}}}`)},
			Time: &metav1.Time{Time: late}})
		_, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
		return err
	})
	if !apierrors.IsInvalid(err) || !regexp.MustCompile(`metadata\.managedFields\[[0-9]+\]\.time`).MatchString(err.Error()) {
		t.Errorf("a managed fields time in year 10000: %v, want 422 naming metadata.managedFields[...].time", err)
	}

	// An empty time is no time, through protobuf as through JSON.
	if err := updateStatus(func(db *examplev1.MyDatabase) { db.Status.LastScheduleTime = &metav1.Time{} }); err != nil {
		t.Fatalf("an empty last schedule time: %v", err)
	}
	db, err := dbs.Get(ctx, "times", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Status.LastScheduleTime != nil {
		t.Errorf("read over protobuf, lastScheduleTime is %v, want none", db.Status.LastScheduleTime)
	}
	if out := mustKubectl(t, "", "get", "-n", ns, "mdb", "-o", "json"); strings.Contains(out, "lastScheduleTime") {
		t.Errorf("kubectl reads a lastScheduleTime:\n%s", out)
	}
}
