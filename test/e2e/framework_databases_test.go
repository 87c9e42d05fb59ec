//go:build e2e

package e2e

// Databases and their data as tests make and check them: the engines' cases (replicationCases,
// dataCases), a database with its rig and a SQL connection (startShop, replicationHarness),
// backups and restores to a real S3 server, and what a status or pod says.

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	typedv1 "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/typed/example/v1"
	"github.com/mydb-dev/mydb/test/s3server"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// startS3 runs a real S3 server (SeaweedFS) on loopback for the test and
// stores its access key in the Secret "s3" of ns; it returns the server
// and a destination in it under prefix.
func startS3(t *testing.T, ns, prefix string) (*s3server.Server, *examplev1.BackupDestination) {
	t.Helper()
	return startS3With(t, ns, prefix, s3server.Options{})
}

// startS3With is startS3 with the server's options.
func startS3With(t *testing.T, ns, prefix string, o s3server.Options) (*s3server.Server, *examplev1.BackupDestination) {
	t.Helper()
	srv := s3server.Start(t, o)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3"}, Data: map[string][]byte{
		"accessKeyID": []byte(srv.AccessKeyID), "secretAccessKey": []byte(srv.SecretAccessKey)}}
	if _, err := kubeClient(t).CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the server stops: deleting a backup deletes its dump, which
	// takes the server.
	t.Cleanup(func() {
		backups := mydbClient(t, restConfig(t)).ExampleV1().MyDatabaseBackups(ns)
		ctx := context.Background()
		if err := backups.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Logf("deleting the backups: %v", err)
			return
		}
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if list, err := backups.List(ctx, metav1.ListOptions{}); err == nil && len(list.Items) == 0 {
				return
			}
			time.Sleep(time.Second)
		}
		t.Logf("backups of %s still there a minute after their deletion", ns)
	})
	return srv, &examplev1.BackupDestination{S3: &examplev1.S3Destination{
		Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket, Prefix: prefix,
		CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3"},
	}}
}

// waitBackup waits until a backup has finished and returns it.
func waitBackup(t *testing.T, ns, name string, timeout time.Duration) *examplev1.MyDatabaseBackup {
	t.Helper()
	backups := mydbClient(t, restConfig(t)).ExampleV1().MyDatabaseBackups(ns)
	var b *examplev1.MyDatabaseBackup
	eventually(t, timeout, func() error {
		var err error
		if b, err = backups.Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return err
		}
		if b.Status.Phase != examplev1.BackupPhaseSucceeded && b.Status.Phase != examplev1.BackupPhaseFailed {
			return fmt.Errorf("backup %s is %q: %s", name, b.Status.Phase, b.Status.Message)
		}
		return nil
	})
	return b
}

// restored waits until the database's Restored condition is True and
// returns how long that took; a RestoreFailed condition fails the test.
func restored(t *testing.T, ns, db string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
	eventually(t, timeout, func() error {
		d, err := dbs.Get(context.Background(), db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionRestored)
		if c != nil && c.Reason == "RestoreFailed" {
			t.Fatalf("%s: the restore failed: %s", db, c.Message)
		}
		if c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Restored = %+v", c)
		}
		return nil
	})
	return time.Since(start)
}

// reconcileTimeout bounds how long kube-controller-manager, kwok and mydb
// take to bring a database up on this machine.
const reconcileTimeout = 3 * time.Minute

func sizedDB(name string, replicas int32, size string) *examplev1.MyDatabase {
	return &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       examplev1.MyDatabaseSpec{Engine: examplev1.EnginePostgres, Replicas: ptr.To(replicas), StorageSize: quantity(size)},
	}
}

// replicationCase is one engine the replication scenarios run on.
type replicationCase struct {
	engine  rigEngine
	version string
	// open connects to one instance as the application user.
	open func(host, user, password, database string) (*sql.DB, error)
	// readOnlyError is how the engine refuses a write on a replica.
	readOnlyError string
}

var replicationCases = []replicationCase{
	{
		engine: rigPostgres, version: "15",
		open: func(host, user, password, database string) (*sql.DB, error) {
			return sql.Open("pgx", fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable&connect_timeout=5",
				user, password, net.JoinHostPort(host, "5432"), database))
		},
		readOnlyError: "read-only transaction",
	},
	{
		engine: rigMariaDB, version: "10.11",
		open: func(host, user, password, database string) (*sql.DB, error) {
			return sql.Open("mysql", fmt.Sprintf("%s:%s@tcp(%s)/%s?timeout=5s", user, password, net.JoinHostPort(host, "3306"), database))
		},
		readOnlyError: "read-only",
	},
}

func int32Ptr(n int32) *int32 { return &n }

func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

type replicationHarness struct {
	t      *testing.T
	tc     replicationCase
	ns, db string
}

// waitStreaming waits until the database has n instances, all ready in
// their roles, and Replicating is True.
func (h *replicationHarness) waitStreaming(n int) examplev1.MyDatabaseStatus {
	h.t.Helper()
	dbs := mydbClient(h.t, restConfig(h.t)).ExampleV1().MyDatabases(h.ns)
	var status examplev1.MyDatabaseStatus
	eventually(h.t, 4*time.Minute, func() error {
		db, err := dbs.Get(context.Background(), h.db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status = db.Status
		if len(status.Instances) != n {
			return fmt.Errorf("%d instances, want %d: %+v", len(status.Instances), n, status.Instances)
		}
		for _, in := range status.Instances {
			if !in.Ready {
				return fmt.Errorf("instance %s (%s) is not ready: %s", in.Name, in.Role, in.Message)
			}
		}
		if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReplicating); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Replicating = %+v", c)
		}
		return nil
	})
	return status
}

// servicePods lists the pods a Service's selector picks, by name.
func (h *replicationHarness) servicePods(service string) []string {
	h.t.Helper()
	kube := kubeClient(h.t)
	svc, err := kube.CoreV1().Services(h.ns).Get(context.Background(), service, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	pods, err := kube.CoreV1().Pods(h.ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	return out
}

// connect opens the application user's pool on a pod, at its IP.
func (h *replicationHarness) connect(pod string) *sql.DB {
	h.t.Helper()
	kube := kubeClient(h.t)
	p, err := kube.CoreV1().Pods(h.ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	secret, err := kube.CoreV1().Secrets(h.ns).Get(context.Background(), h.db+"-credentials", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	db, err := h.tc.open(p.Status.PodIP, string(secret.Data["username"]), string(secret.Data["password"]), string(secret.Data["database"]))
	if err != nil {
		h.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	h.t.Cleanup(func() { db.Close() })
	return db
}

func (h *replicationHarness) insert(db *sql.DB, from, to int) {
	h.t.Helper()
	for i := from; i < to; i++ {
		mustExec(h.t, db, "INSERT INTO orders VALUES ("+fmt.Sprint(i)+", 'item "+fmt.Sprint(i)+"')")
	}
}

// waitRows waits until pod's instance holds want rows of orders.
func (h *replicationHarness) waitRows(pod string, want int) {
	h.t.Helper()
	db := h.connect(pod)
	eventually(h.t, 2*time.Minute, func() error {
		var n int
		if err := db.QueryRow("SELECT count(*) FROM orders").Scan(&n); err != nil {
			return fmt.Errorf("%s: %v", pod, err)
		}
		if n != want {
			return fmt.Errorf("%s holds %d rows, want %d", pod, n, want)
		}
		return nil
	})
}

func (h *replicationHarness) scale(n int) {
	h.t.Helper()
	mustKubectl(h.t, "", "scale", "mdb/"+h.db, "-n", h.ns, fmt.Sprintf("--replicas=%d", n))
}

// dataCase is how one engine stores the rows dumps get wrong, and how a
// table's content is summed up on the server.
type dataCase struct {
	replicationCase
	// schema creates the tables notes (text, binary, times, numbers,
	// JSON) and blobs (large objects or values).
	schema []string
	// insertNote and insertBlob write one row each, with placeholders.
	insertNote, insertBlob string
	// session prepares a connection for the checksums.
	session []string
	// checksums are per-table queries answering "<rows>:<md5>".
	checksums map[string]string
}

var dataCases = []dataCase{
	{
		replicationCase: replicationCases[0],
		schema: []string{
			`CREATE TABLE notes (id int PRIMARY KEY, body text, raw bytea, at timestamptz, amount numeric(24,6), doc jsonb)`,
			`CREATE TABLE blobs (id int PRIMARY KEY, lo oid)`,
		},
		insertNote: `INSERT INTO notes VALUES ($1, $2, $3, $4, $5, $6)`,
		insertBlob: `INSERT INTO blobs VALUES ($1, lo_from_bytea(0, $2))`,
		session:    []string{`SET TIME ZONE 'UTC'`},
		checksums: map[string]string{
			"notes": `SELECT count(*) || ':' || coalesce(md5(string_agg(n::text, '|' ORDER BY id)), '') FROM notes n`,
			"blobs": `SELECT count(*) || ':' || coalesce(md5(string_agg(id || '=' || md5(lo_get(lo)), '|' ORDER BY id)), '') FROM blobs`,
		},
	},
	{
		replicationCase: replicationCases[1],
		schema: []string{
			`CREATE TABLE notes (id INT PRIMARY KEY, body TEXT CHARACTER SET utf8mb4, raw BLOB, at DATETIME(6), amount DECIMAL(24,6), doc JSON) ENGINE=InnoDB`,
			`CREATE TABLE blobs (id INT PRIMARY KEY, data LONGBLOB) ENGINE=InnoDB`,
		},
		insertNote: `INSERT INTO notes VALUES (?, ?, ?, ?, ?, ?)`,
		insertBlob: `INSERT INTO blobs VALUES (?, ?)`,
		session:    []string{`SET SESSION group_concat_max_len = 1073741824`, `SET time_zone = '+00:00'`},
		checksums: map[string]string{
			"notes": `SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT_WS('#', id, HEX(body), HEX(raw), at, amount, doc) ORDER BY id SEPARATOR '|')), '')) FROM notes`,
			"blobs": `SELECT CONCAT(COUNT(*), ':', COALESCE(MD5(GROUP_CONCAT(CONCAT(id, '=', MD5(data)) ORDER BY id SEPARATOR '|')), '')) FROM blobs`,
		},
	},
}

// write inserts notes from..to-1 and as many blobs, each with the values
// dumps get wrong: quotes, backslashes, newlines, tabs and non-ASCII text,
// NUL and 0xff bytes, times across a DST change in a zone, long decimals,
// nested JSON, and 64 KiB binary values.
func (dc dataCase) write(t *testing.T, db *sql.DB, from, to int) {
	t.Helper()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		body := fmt.Sprintf("note %d\nit's \"quoted\" \\back\\slashed\ttabbed; DROP TABLE notes; -- é€😀", i)
		raw := []byte{0x00, 0xff, byte(i), '\'', '\\', '\n', 0x00}
		at := time.Date(2026, 3, 29, 1, 0, 0, 123456000, paris).Add(time.Duration(i) * 17 * time.Minute)
		amount := fmt.Sprintf("%d.%06d", i*1000003, i%1000000)
		doc := fmt.Sprintf(`{"id": %d, "tags": ["a\"b", "c\\d"], "nested": {"ok": true, "n": null}}`, i)
		mustExec(t, db, dc.insertNote, i, body, raw, at, amount, doc)
		blob := []byte(strings.Repeat(fmt.Sprintf("blob %d \x00\xff ", i), 64<<10/12))
		mustExec(t, db, dc.insertBlob, i, blob)
	}
}

// sums reads each table's checksum on one instance.
func (dc dataCase) sums(t *testing.T, db *sql.DB) (map[string]string, error) {
	t.Helper()
	for _, q := range dc.session {
		if _, err := db.Exec(q); err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	for table, q := range dc.checksums {
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		out[table] = s
	}
	return out, nil
}

// waitSums waits until the harness's database has n instances streaming,
// each holding want.
func (dc dataCase) waitSums(t *testing.T, h *replicationHarness, n int, want map[string]string) {
	t.Helper()
	status := h.waitStreaming(n)
	for _, in := range status.Instances {
		db := h.connect(in.Name)
		eventually(t, 2*time.Minute, func() error {
			got, err := dc.sums(t, db)
			if err != nil {
				return fmt.Errorf("%s: %v", in.Name, err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%s (%s) holds %v, want %v", in.Name, in.Role, got, want)
			}
			return nil
		})
		t.Logf("%s/%s (%s): %v", h.db, in.Name, in.Role, want)
	}
}

// source is a database a test backs up, with rows written.
type source struct {
	db *examplev1.MyDatabase
	h  *replicationHarness
	// status is the database's once its instances streamed.
	status  examplev1.MyDatabaseStatus
	primary *sql.DB
	// sums are the primary's per-table checksums after the writes.
	sums map[string]string
}

// startSource creates the database src in ns with spec, its engine and
// version dc's, plays its pods, and once its instances stream writes rows
// rows of dc's tables to the primary.
func (dc dataCase) startSource(t *testing.T, ns string, spec examplev1.MyDatabaseSpec, rows int) source {
	t.Helper()
	return dc.createSource(t, ns, spec, rows, func() { startRig(t, ns, "src", dc.engine) })
}

// createSource is startSource with run starting the pods' instances (nil
// when a real node runs them).
func (dc dataCase) createSource(t *testing.T, ns string, spec examplev1.MyDatabaseSpec, rows int, run func()) source {
	t.Helper()
	spec.Engine, spec.Version = examplev1.Engine(dc.engine.name), dc.version
	db, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns).Create(context.Background(),
		&examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "src"}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if run != nil {
		run()
	}
	src := source{db: db, h: &replicationHarness{t: t, tc: dc.replicationCase, ns: ns, db: "src"}}
	src.status = src.h.waitStreaming(int(*spec.Replicas))
	src.primary = src.h.connect(src.status.CurrentPrimary)
	for _, q := range dc.schema {
		mustExec(t, src.primary, q)
	}
	dc.write(t, src.primary, 0, rows)
	if src.sums, err = dc.sums(t, src.primary); err != nil {
		t.Fatal(err)
	}
	return src
}

// waitPrimary waits until the status names primary as current with no
// switchover under way.
func (h *replicationHarness) waitPrimary(primary string, timeout time.Duration) examplev1.MyDatabaseStatus {
	h.t.Helper()
	dbs := mydbClient(h.t, restConfig(h.t)).ExampleV1().MyDatabases(h.ns)
	var status examplev1.MyDatabaseStatus
	eventually(h.t, timeout, func() error {
		db, err := dbs.Get(context.Background(), h.db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status = db.Status
		if status.CurrentPrimary != primary || status.TargetPrimary != primary {
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionPrimaryChange)
			return fmt.Errorf("primary %s, target %s: %+v", status.CurrentPrimary, status.TargetPrimary, c)
		}
		return nil
	})
	return status
}

// startShop creates "shop", three instances of tc's engine with the
// failoverDelay delay and replication mode (Async when empty),
// through cfg, in a namespace of its own; runs its instances; and returns
// once both replicas stream and the acks table the writers fill exists.
func startShop(t *testing.T, cfg *rest.Config, tc replicationCase, delay time.Duration, mode examplev1.ReplicationMode) (typedv1.MyDatabaseInterface, *rig, *replicationHarness, examplev1.MyDatabaseStatus) {
	t.Helper()
	dbs, h := createShop(t, cfg, tc, delay, mode)
	r := startRig(t, h.ns, "shop", tc.engine)
	status := h.waitStreaming(3)
	mustExec(t, h.connect(status.CurrentPrimary), "CREATE TABLE acks (id INT PRIMARY KEY)")
	return dbs, r, h, status
}

// createShop creates "shop" as startShop describes (delay 0: the default
// failoverDelay), and returns at once.
func createShop(t *testing.T, cfg *rest.Config, tc replicationCase, delay time.Duration, mode examplev1.ReplicationMode) (typedv1.MyDatabaseInterface, *replicationHarness) {
	t.Helper()
	ns := newNamespace(t)
	dbs := mydbClient(t, cfg).ExampleV1().MyDatabases(ns)
	db := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop"}, Spec: examplev1.MyDatabaseSpec{
		Engine: examplev1.Engine(tc.engine.name), Version: tc.version, Replicas: int32Ptr(3), StorageSize: quantity("1Gi")}}
	if delay > 0 {
		db.Spec.FailoverDelay = &metav1.Duration{Duration: delay}
	}
	if mode != "" {
		db.Spec.Replication = &examplev1.ReplicationSpec{Mode: mode}
	}
	if _, err := dbs.Create(context.Background(), db, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dbs, &replicationHarness{t: t, tc: tc, ns: ns, db: "shop"}
}

func conditionMessage(c *metav1.Condition) string {
	if c == nil {
		return "no PrimaryChange condition"
	}
	return c.Reason + ": " + c.Message
}

// podGone waits for pod to be deleted.
func podGone(t *testing.T, ns, pod string) {
	t.Helper()
	eventually(t, reconcileTimeout, func() error {
		if _, err := kubeClient(t).CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the pod %s is still there: %v", pod, err)
		}
		return nil
	})
}

func ptrQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
