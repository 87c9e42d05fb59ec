//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	"github.com/mydb-dev/mydb/pkg/storeguard"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// The storage guard's record, as local-up's mydb-apiserver is configured
// (the --store-record default).
const (
	storeRecordNamespace = "mydb-system"
	storeRecordName      = "mydb-store"
)

// TestStorageGuardAgainstAWipedAndRolledBackEtcd empties mydb's etcd under
// running databases (with kube-controller-manager's garbage collector
// running, and mydb restarted meanwhile): mydb must answer 503 with the
// reason, stay unready, and nothing the databases own may go. Restoring
// the snapshot taken before (with --bump-revision) is refused as a
// rollback until an operator accepts it, and then every database is back
// with the same children and credentials. A restore of an older snapshot
// without --bump-revision is caught as well.
//
// MYDB_E2E_LONG=1 runs it with 50 databases and a 10 minute watch.
func TestStorageGuardAgainstAWipedAndRolledBackEtcd(t *testing.T) {
	// Not parallel: it wipes and rolls back mydb's etcd and restarts mydb-apiserver.
	count, watchFor := 5, 2*time.Minute
	if os.Getenv("MYDB_E2E_LONG") == "1" {
		count, watchFor = 50, 10*time.Minute
	}
	ctx := context.Background()
	kube := kubeClient(t)
	cfg := restConfig(t)
	mydb := mydbClient(t, cfg)
	localDir := filepath.Join(repoRoot, "_output", "local")
	etcd := localComponent(t, localDir, "mydb-etcd")
	server := localComponent(t, localDir, "mydb-apiserver")
	direct := directConfig(t, mustAtoi(t, flagValue(t, server.args, "--secure-port")))
	etcdURL := flagValue(t, etcd.args, "--listen-client-urls")
	// Whatever happens, the tests that follow get mydb's etcd and server
	// back (running; what they hold is this test's business).
	t.Cleanup(func() {
		etcd.ensureRunning(t)
		server.ensureRunning(t)
		if t.Failed() {
			// Failed halfway, the store may still be refused: accept it, so
			// the tests that follow are served.
			acceptWhateverStore(t, direct, server)
		}
	})

	ns := newNamespace(t)
	dbs := mydb.ExampleV1().MyDatabases(ns)
	for i := 0; i < count; i++ {
		db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("guard-%02d", i)},
			Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi"), Replicas: ptr.To[int32](1)}}
		if i%2 == 1 {
			// Claims and credentials that would go with the database.
			db.Spec.Engine, db.Spec.DeletionPolicy = examplev1.EnginePostgres, examplev1.DeletionPolicyDelete
		}
		if _, err := dbs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dbUIDs := waitAllRolledOut(t, dbs, count, reconcileTimeout)
	var before map[string]types.UID
	eventually(t, reconcileTimeout, func() (err error) {
		before, err = inventory(ctx, kube, ns)
		if err == nil && countKind(before, "PersistentVolumeClaim") < count {
			err = fmt.Errorf("%d claims of %d", countKind(before, "PersistentVolumeClaim"), count)
		}
		return err
	})
	t.Logf("%d databases rolled out with %d children (%d claims, %d Secrets)", count, len(before),
		countKind(before, "PersistentVolumeClaim"), countKind(before, "Secret"))
	recorded := storeRecord(t, kube)

	// A snapshot, then a write it does not hold, recorded by the guard.
	snapshot := filepath.Join(t.TempDir(), "before-wipe.db")
	inSnapshot := saveSnapshot(t, etcdURL, snapshot)
	annotateDatabase(t, ns, "guard-00", "e2e.mydb.example.com/after-snapshot=1")
	waitRecordPast(t, kube, inSnapshot)

	// Wipe: stop etcd, remove its data, start it empty. mydb keeps running.
	dataDir := flagValue(t, etcd.args, "--data-dir")
	etcd.stop(t)
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	etcd.start(t)
	emptyAt := time.Now()
	tripped, refusal := waitRefused(t, mydb, ns, count, "holds no store identity", time.Minute)
	t.Logf("wipe: mydb refused its resources %s after the empty etcd started: %s", tripped.Round(100*time.Millisecond), refusal)
	assertUnready(t, direct, "holds no store identity")
	assertMismatchEvent(t, kube)

	// The watch: the garbage collector runs, mydb is restarted halfway.
	deadline := emptyAt.Add(watchFor)
	restarted := false
	for time.Now().Before(deadline) {
		now, err := inventory(ctx, kube, ns)
		if err != nil {
			t.Logf("inventory: %v", err)
		} else if lost := missing(before, now); len(lost) > 0 {
			t.Fatalf("%d children were deleted or replaced while mydb's etcd was empty: %v", len(lost), lost)
		}
		// While mydb restarts the aggregator answers a 503 of its own (the
		// APIService is unavailable): not the reason, but no NotFound either.
		if _, err := dbs.List(ctx, metav1.ListOptions{}); !refusedWith(err, "holds no store identity") &&
			!(restarted && apierrors.IsServiceUnavailable(err)) {
			t.Fatalf("a list during the watch answered %v, want 503 saying the storage holds no store identity", err)
		}
		if !restarted && time.Until(deadline) < watchFor/2 {
			server.stop(t)
			server.start(t)
			restarted = true
			eventually(t, time.Minute, func() error { return guardSays(direct, "holds no store identity") })
			restartedAt := time.Now()
			eventually(t, 2*time.Minute, func() error {
				if _, err := dbs.List(ctx, metav1.ListOptions{}); !refusedWith(err, "holds no store identity") {
					return fmt.Errorf("through the aggregator: %v", err)
				}
				return nil
			})
			t.Logf("mydb-apiserver restarted on the empty etcd: unready, refusing (through the aggregator with the reason again %s later)",
				time.Since(restartedAt).Round(100*time.Millisecond))
		}
		time.Sleep(5 * time.Second)
	}
	t.Logf("watch: %s with mydb's etcd empty, 0 of %d children deleted, 0 Secret UIDs changed", watchFor, len(before))

	// Restore the snapshot with a bumped revision, as the procedure says:
	// it is older than the record, so mydb refuses it until accepted.
	etcd.stop(t)
	restoreSnapshot(t, etcd, snapshot, true)
	etcd.start(t)
	_, refusal = waitRefused(t, mydb, ns, count, "rolled back", time.Minute)
	token := acceptToken(t, refusal)
	if want := storeguard.Token(&storeguard.Marker{UID: recorded.UID, Sequence: inSnapshot}); token != want {
		t.Errorf("the refusal names the store %q, want %q (the snapshot's)", token, want)
	}
	accepted := time.Now()
	mustKubectl(t, "", "annotate", "-n", storeRecordNamespace, "configmap/"+storeRecordName, storeguard.AcceptAnnotation+"="+token, "--overwrite")
	waitServed(t, direct, dbs, count, 2*time.Minute)
	t.Logf("restore (--bump-revision): mydb ready and serving again %s after the acceptance", time.Since(accepted).Round(100*time.Millisecond))
	if got := waitAllRolledOut(t, dbs, count, reconcileTimeout); !equalUIDs(got, dbUIDs) {
		t.Errorf("the databases after the restore are not the ones before: %v, want %v", got, dbUIDs)
	}
	t.Logf("restore: all %d databases rolled out %s after the acceptance", count, time.Since(accepted).Round(100*time.Millisecond))
	if db, err := dbs.Get(ctx, "guard-00", metav1.GetOptions{}); err != nil || db.Annotations["e2e.mydb.example.com/after-snapshot"] != "" {
		t.Errorf("guard-00 after the restore: %v, annotations %v: want the snapshot's state", err, db.Annotations)
	}
	assertSameChildren(t, kube, ns, before)
	if after := storeRecord(t, kube); after.UID != recorded.UID || after.Sequence <= inSnapshot {
		t.Errorf("record after the acceptance %+v: want store %s beyond sequence %d", after, recorded.UID, inSnapshot)
	}

	// An older snapshot restored without --bump-revision under a running
	// mydb is a rollback too.
	older := filepath.Join(t.TempDir(), "older.db")
	inOlder := saveSnapshot(t, etcdURL, older)
	annotateDatabase(t, ns, "guard-00", "e2e.mydb.example.com/after-second-snapshot=1")
	waitRecordPast(t, kube, inOlder)
	etcd.stop(t)
	restoreSnapshot(t, etcd, older, false)
	etcd.start(t)
	tripped, refusal = waitRefused(t, mydb, ns, count, "rolled back", time.Minute)
	t.Logf("rollback without --bump-revision: refused %s after etcd started: %s", tripped.Round(100*time.Millisecond), refusal)
	assertUnready(t, direct, "rolled back")
	accepted = time.Now()
	mustKubectl(t, "", "annotate", "-n", storeRecordNamespace, "configmap/"+storeRecordName,
		storeguard.AcceptAnnotation+"="+acceptToken(t, refusal), "--overwrite")
	// Revisions went back: mydb's watch cache must start anew.
	eventually(t, time.Minute, func() error { return guardSays(direct, "") })
	server.stop(t)
	server.start(t)
	waitServed(t, direct, dbs, count, 2*time.Minute)
	t.Logf("rollback without --bump-revision: accepted, mydb restarted, ready and serving %s after the acceptance", time.Since(accepted).Round(100*time.Millisecond))
	if got := waitAllRolledOut(t, dbs, count, reconcileTimeout); !equalUIDs(got, dbUIDs) {
		t.Errorf("the databases after the second restore are not the ones before: %v", got)
	}
	assertSameChildren(t, kube, ns, before)
}

// acceptWhateverStore accepts the store mydb refuses, if it refuses one,
// and restarts mydb so its watch cache starts anew.
func acceptWhateverStore(t *testing.T, direct *rest.Config, server *localProcess) {
	mydb, err := clientset.NewForConfig(direct)
	if err != nil {
		t.Log(err)
		return
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if guardSays(direct, "") == nil {
			return
		}
		_, err := mydb.ExampleV1().MyDatabases("").List(context.Background(), metav1.ListOptions{})
		if m := acceptTokenPattern.FindStringSubmatch(fmt.Sprint(err)); m != nil {
			if r := kubectl(t, "", "annotate", "-n", storeRecordNamespace, "configmap/"+storeRecordName,
				storeguard.AcceptAnnotation+"="+m[1], "--overwrite"); r.err != nil {
				t.Logf("accepting the store: %s", r)
			}
		}
		for i := 0; i < 15 && guardSays(direct, "") != nil; i++ {
			time.Sleep(2 * time.Second)
		}
		if guardSays(direct, "") == nil {
			server.stop(t)
			server.start(t)
			waitServedThroughTheAggregator(t, direct)
			return
		}
	}
	t.Log("mydb still refuses its store: the tests that follow will fail")
}

// waitServedThroughTheAggregator waits, for up to a minute, until a
// restarted mydb is ready and a list through kube-apiserver is answered:
// the aggregator reaches local-up's mydb through an ExternalName Service,
// with no readiness in between, so a server still loading its
// authentication configuration would answer the next test as anonymous.
func waitServedThroughTheAggregator(t *testing.T, direct *rest.Config) {
	aggregated := mydbClient(t, restConfig(t))
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		if err = ready(direct); err != nil {
			continue
		}
		if _, err = aggregated.ExampleV1().MyDatabases("").List(context.Background(), metav1.ListOptions{Limit: 1}); err == nil {
			return
		}
	}
	t.Logf("mydb is not served again a minute after its restart: %v", err)
}

// refusedWith tells whether err is a 503 whose message says want.
func refusedWith(err error, want string) bool {
	return apierrors.IsServiceUnavailable(err) && strings.Contains(err.Error(), want)
}

// waitRefused polls mydb's resources through the aggregator until they are
// refused with want, and fails if any list meanwhile answers with fewer
// databases than there are: that is what the garbage collector must never
// see. It returns how long the refusal took, and its message.
func waitRefused(t *testing.T, mydb clientset.Interface, ns string, count int, want string, timeout time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	for {
		list, err := mydb.ExampleV1().MyDatabases(ns).List(context.Background(), metav1.ListOptions{})
		switch {
		case err == nil && len(list.Items) < count:
			t.Fatalf("mydb served %d of %d databases from a changed etcd", len(list.Items), count)
		case refusedWith(err, want):
			return time.Since(start), err.Error()
		}
		if _, err := mydb.ExampleV1().MyDatabases(ns).Get(context.Background(), "guard-00", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			t.Fatalf("mydb answered NotFound for a database from a changed etcd")
		}
		if time.Since(start) > timeout {
			t.Fatalf("after %s mydb still answers %v, want a 503 saying %q", timeout, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var acceptTokenPattern = regexp.MustCompile(regexp.QuoteMeta(storeguard.AcceptAnnotation) + `=(\S+) --overwrite`)

// acceptToken is the token the refusal tells the operator to accept with.
func acceptToken(t *testing.T, refusal string) string {
	t.Helper()
	m := acceptTokenPattern.FindStringSubmatch(refusal)
	if m == nil {
		t.Fatalf("the refusal does not say how to accept the store: %s", refusal)
	}
	return m[1]
}

// guardSays checks the guard's readiness check: failing with want, or
// passing when want is "".
func guardSays(cfg *rest.Config, want string) error {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	resp, err := client.Get(cfg.Host + "/readyz/mydb-store-guard")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	switch {
	case want == "" && resp.StatusCode == http.StatusOK:
		return nil
	case want != "" && resp.StatusCode != http.StatusOK && strings.Contains(string(body), want):
		return nil
	}
	return fmt.Errorf("/readyz/mydb-store-guard: %d %s, want it to say %q", resp.StatusCode, body, want)
}

func assertUnready(t *testing.T, cfg *rest.Config, want string) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		if err := guardSays(cfg, want); err != nil {
			return err
		}
		if err := ready(cfg); err == nil {
			return fmt.Errorf("/readyz passes while the guard refuses")
		}
		return nil
	})
}

func assertMismatchEvent(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	eventually(t, 30*time.Second, func() error {
		events, err := kube.CoreV1().Events(storeRecordNamespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + storeRecordName + ",reason=" + storeguard.ReasonStoreMismatch})
		if err != nil {
			return err
		}
		if len(events.Items) == 0 {
			return fmt.Errorf("no %s Event on the record", storeguard.ReasonStoreMismatch)
		}
		return nil
	})
}

// waitServed waits until mydb is ready again (the guard passes, and the
// informers of its admission plugins and controllers synced anew) and it
// lists every database.
func waitServed(t *testing.T, direct *rest.Config, dbs interface {
	List(context.Context, metav1.ListOptions) (*examplev1.MyDatabaseList, error)
}, count int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		if err := guardSays(direct, ""); err != nil {
			return err
		}
		if err := ready(direct); err != nil {
			return err
		}
		list, err := dbs.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != count {
			return fmt.Errorf("%d of %d databases", len(list.Items), count)
		}
		return nil
	})
}

// waitAllRolledOut waits until count databases have rolled out their
// generation (Progressing False: every pod runs the spec; kwok's pods run
// no engine, so none is Ready), and returns their UIDs by name.
func waitAllRolledOut(t *testing.T, dbs interface {
	List(context.Context, metav1.ListOptions) (*examplev1.MyDatabaseList, error)
}, count int, timeout time.Duration) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	eventually(t, timeout, func() error {
		list, err := dbs.List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) != count {
			return fmt.Errorf("%d of %d databases", len(list.Items), count)
		}
		for _, db := range list.Items {
			c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionProgressing)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "RolloutComplete" || db.Status.ObservedGeneration != db.Generation {
				return fmt.Errorf("%s not rolled out: %+v", db.Name, c)
			}
			uids[db.Name] = db.UID
		}
		return nil
	})
	return uids
}

func equalUIDs(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// inventory is every object of mydb's in ns, "Kind/name" to UID.
func inventory(ctx context.Context, kube kubernetes.Interface, ns string) (map[string]types.UID, error) {
	opts := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=mydb"}
	out := map[string]types.UID{}
	add := func(kind string, items []metav1.Object) {
		for _, o := range items {
			out[kind+"/"+o.GetName()] = o.GetUID()
		}
	}
	sts, err := kube.AppsV1().StatefulSets(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("StatefulSet", objects(sts.Items))
	svcs, err := kube.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("Service", objects(svcs.Items))
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("Secret", objects(secrets.Items))
	claims, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("PersistentVolumeClaim", objects(claims.Items))
	sas, err := kube.CoreV1().ServiceAccounts(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("ServiceAccount", objects(sas.Items))
	roles, err := kube.RbacV1().Roles(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("Role", objects(roles.Items))
	bindings, err := kube.RbacV1().RoleBindings(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("RoleBinding", objects(bindings.Items))
	pods, err := kube.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	add("Pod", objects(pods.Items))
	return out, nil
}

func objects[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

func countKind(inv map[string]types.UID, kind string) int {
	n := 0
	for k := range inv {
		if strings.HasPrefix(k, kind+"/") {
			n++
		}
	}
	return n
}

// missing lists what of before is gone from now, or is another object.
func missing(before, now map[string]types.UID) []string {
	var out []string
	for k, uid := range before {
		if now[k] != uid {
			out = append(out, k)
		}
	}
	return out
}

func assertSameChildren(t *testing.T, kube kubernetes.Interface, ns string, before map[string]types.UID) {
	t.Helper()
	now, err := inventory(context.Background(), kube, ns)
	if err != nil {
		t.Fatal(err)
	}
	if lost := missing(before, now); len(lost) > 0 {
		t.Errorf("%d children were deleted or replaced: %v", len(lost), lost)
	}
}

func annotateDatabase(t *testing.T, ns, name, annotation string) {
	t.Helper()
	mustKubectl(t, "", "annotate", "-n", ns, "mdb/"+name, annotation, "--overwrite")
}

// waitRecordPast waits until the guard recorded a sequence beyond seq.
func waitRecordPast(t *testing.T, kube kubernetes.Interface, seq int64) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		if got := storeRecord(t, kube).Sequence; got <= seq {
			return fmt.Errorf("the record is at sequence %d, not yet past %d", got, seq)
		}
		return nil
	})
}

// saveSnapshot writes a snapshot of mydb's etcd to path, as etcdctl
// snapshot save does, and returns the store sequence it holds: the same
// marker read right before and right after it.
func saveSnapshot(t *testing.T, etcdURL, path string) int64 {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	marker := func() int64 {
		resp, err := client.Get(ctx, storeguard.MarkerKey("/registry/mydb"))
		if err != nil || len(resp.Kvs) == 0 {
			t.Fatalf("the store marker: %v", err)
		}
		var m storeguard.Marker
		if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
			t.Fatal(err)
		}
		return m.Sequence
	}
	for {
		before := marker()
		stream, err := client.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(f, stream)
		stream.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if after := marker(); after == before {
			return after
		}
	}
}

// restoreSnapshot replaces the stopped etcd's data with snapshot, with
// etcdutl as docs/operations.md says.
func restoreSnapshot(t *testing.T, etcd *localProcess, snapshot string, bump bool) {
	t.Helper()
	dataDir := flagValue(t, etcd.args, "--data-dir")
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	args := []string{"snapshot", "restore", snapshot, "--data-dir", dataDir,
		"--name", flagValue(t, etcd.args, "--name"),
		"--initial-cluster", flagValue(t, etcd.args, "--initial-cluster"),
		"--initial-advertise-peer-urls", flagValue(t, etcd.args, "--initial-advertise-peer-urls")}
	if bump {
		args = append(args, "--bump-revision", "1000000000", "--mark-compacted")
	}
	out, err := exec.Command(filepath.Join(repoRoot, "_output", "bin", "etcdutl"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdutl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("etcdutl %s", strings.Join(args, " "))
}
