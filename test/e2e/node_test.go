//go:build e2e && node

// The database scenarios on a real node (make test-node): kubelet and
// containerd run the pods exactly as mydb's controller wrote them, from the
// images hack/images.sh built, with the claims from local-path-provisioner,
// Services through kube-proxy and names through CoreDNS. Nothing here starts
// a process in a pod's place or rewrites a pod.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// nodeEngine is how the node test reaches one engine with its own clients.
type nodeEngine struct {
	engine, version string
	port            int
	// image runs the client pod (the engine's image has the client).
	image string
	// shell is a client command line for the client pod, reading the
	// credentials from the environment that credentialsEnv sets; create,
	// insert and count are its statements.
	shell                 func(host string) string
	create, insert, count string
	credentialsEnv        map[string]string // variable -> key of the Secret
	// host runs the host's client, verifying the server with the CA in
	// caFile: the command and its environment.
	host func(port int, user, password, database, caFile, statement string) (*exec.Cmd, []string)
}

var nodeEngines = []nodeEngine{
	// PostgreSQL 17, the default version, as the README's quick start runs it.
	{engine: "postgres", version: "17", port: 5432, image: "mydb.local/postgres:17",
		shell:          func(host string) string { return "psql -h " + host + " -v ON_ERROR_STOP=1 -tA" },
		create:         "CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY)",
		insert:         "INSERT INTO orders SELECT generate_series(1, 1000) ON CONFLICT DO NOTHING",
		count:          "SELECT count(*) FROM orders",
		credentialsEnv: map[string]string{"PGUSER": "username", "PGPASSWORD": "password", "PGDATABASE": "database"},
		// As the README's quick start: verify-full against the CA of the
		// credentials Secret, by the name localhost.
		host: func(port int, user, password, database, caFile, statement string) (*exec.Cmd, []string) {
			// One connection string, as the README's: psql takes a
			// conninfo as its dbname argument, which -d would replace.
			return exec.Command("psql", fmt.Sprintf("host=localhost port=%d sslmode=verify-full sslrootcert=%s user=%s dbname=%s",
					port, caFile, user, database), "-v", "ON_ERROR_STOP=1", "-tA", "-c", statement),
				[]string{"PGPASSWORD=" + password}
		}},
	{engine: "mariadb", version: "10.11", port: 3306, image: "mydb.local/mariadb:10.11",
		shell:  func(host string) string { return `mariadb -h ` + host + ` -u "$DB_USER" -N "$DB_NAME"` },
		create: "CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY)",
		insert: "INSERT IGNORE INTO orders WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) SELECT i FROM n",
		count:  "SELECT count(*) FROM orders",
		// MYSQL_PWD keeps the password off the command line.
		credentialsEnv: map[string]string{"DB_USER": "username", "MYSQL_PWD": "password", "DB_NAME": "database"},
		host: func(port int, user, password, database, caFile, statement string) (*exec.Cmd, []string) {
			return exec.Command("mariadb", "--ssl-ca="+caFile, "--ssl-verify-server-cert", "--protocol=TCP", "-h", "localhost", "-P", fmt.Sprint(port), "-u", user, "-N", database, "-e", statement),
				[]string{"MYSQL_PWD=" + password}
		}},
	// MySQL 9.7, Debian's (sid) mysql-server in an image laid out like the
	// official one.
	{engine: "mysql", version: "9.7", port: 3306, image: "mydb.local/mysql:9.7",
		shell:          func(host string) string { return `mysql -h ` + host + ` -u "$DB_USER" -N "$DB_NAME"` },
		create:         "CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY)",
		insert:         "INSERT IGNORE INTO orders WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) SELECT i FROM n",
		count:          "SELECT count(*) FROM orders",
		credentialsEnv: map[string]string{"DB_USER": "username", "MYSQL_PWD": "password", "DB_NAME": "database"},
		// The host has MariaDB's client: caching_sha2_password sends the
		// password over TLS, verified against the database's CA.
		host: func(port int, user, password, database, caFile, statement string) (*exec.Cmd, []string) {
			return exec.Command("mariadb", "--ssl-ca="+caFile, "--ssl-verify-server-cert", "--protocol=TCP", "-h", "localhost", "-P", fmt.Sprint(port), "-u", user, "-N", database, "-e", statement),
				[]string{"MYSQL_PWD=" + password}
		}},
}

// TestNodeDatabases: for each engine, a 3-instance database on the real
// node is Ready only once it serves; a pod writes through <name>-rw by its
// DNS name and reads what it wrote through <name>-ro; from the host,
// `kubectl port-forward svc/<name>-rw` and the engine's own client with the
// generated credentials reach the primary, verifying its certificate with
// the Secret's CA (the README's quick start); kubectl mydb status prints
// each instance's live figures.
func TestNodeDatabases(t *testing.T) {
	for _, e := range nodeEngines {
		t.Run(e.engine, func(t *testing.T) {
			t.Parallel()
			nodeDatabase(t, e)
		})
	}
}

func nodeDatabase(t *testing.T, e nodeEngine) {
	ns := newNamespace(t)
	ctx := context.Background()
	kube := kubeClient(t)
	mydb := mydbClient(t, restConfig(t))
	created := time.Now()
	mustKubectl(t, fmt.Sprintf(`apiVersion: example.com/v1
kind: MyDatabase
metadata:
  name: shop
spec:
  engine: %s
  version: "%s"
  replicas: 3
  storageSize: 1Gi
`, e.engine, e.version), "apply", "-n", ns, "-f", "-")

	var db *examplev1.MyDatabase
	eventually(t, 8*time.Minute, func() (err error) {
		db, err = mydb.ExampleV1().MyDatabases(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ready := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionReady)
		replicating := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionReplicating)
		if ready == nil || ready.Status != metav1.ConditionTrue || replicating == nil || replicating.Status != metav1.ConditionTrue {
			return fmt.Errorf("not Ready and replicating yet: Ready %+v, Replicating %+v, pods: %s", ready, replicating, podPhases(t, ns))
		}
		return nil
	})
	t.Logf("%s %s: created to Ready with 2 replicas streaming in %s", e.engine, e.version, time.Since(created).Round(100*time.Millisecond))
	for _, in := range db.Status.Instances {
		if !in.Ready {
			t.Errorf("Ready while instance %s is not: %+v", in.Name, in)
		}
	}

	// Each instance's live figures, through kube-apiserver's pod proxy.
	checkLiveFigures(t, ns, db.Status.CurrentPrimary)

	// A client pod, by the Services' DNS names, with the Secret's
	// credentials. Ready comes from the managers' reports; the Service
	// routes once the EndpointSlice controller and kube-proxy have seen the
	// primary's readiness and role label, a moment later: the client
	// retries its first connection for a bounded time, and says how long
	// it waited.
	const rows = 1000
	rw, ro := e.shell("shop-rw."+ns+".svc.cluster.local"), e.shell("shop-ro."+ns+".svc.cluster.local")
	script := fmt.Sprintf(`set -e
start=$(date +%%s%%N)
for i in $(seq 1 60); do
  echo %[3]q | %[1]s && echo %[4]q | %[1]s && break
  [ "$i" = 60 ] && { echo "shop-rw refused every connection for 30 s"; exit 1; }
  sleep 0.5
done
echo "wrote through shop-rw after $(( ($(date +%%s%%N) - start) / 1000000 )) ms"
for i in $(seq 1 120); do
  n=$(echo %[5]q | %[2]s 2>/dev/null || true)
  [ "$n" = %[6]d ] && { echo "read $n rows through shop-ro"; exit 0; }
  sleep 0.5
done
echo "shop-ro never showed %[6]d rows (last: $n)"; exit 1
`, rw, ro, e.create+";", e.insert+";", e.count+";", rows)
	var env []corev1.EnvVar
	for name, key := range e.credentialsEnv {
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "shop-credentials"}, Key: key}}})
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: e.image, Command: []string{"sh", "-c", script}, Env: env,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, client, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			t.Fatalf("the client pod failed:\n%s", kubectl(t, "", "logs", "-n", ns, "client"))
		}
		return fmt.Errorf("client pod %s", p.Status.Phase)
	})
	if logs := mustKubectl(t, "", "logs", "-n", ns, "client"); !strings.Contains(logs, fmt.Sprintf("read %d rows through shop-ro", rows)) {
		t.Errorf("the client pod succeeded without saying it read its rows back:\n%s", logs)
	} else {
		t.Logf("client pod: %s", strings.ReplaceAll(strings.TrimSpace(logs), "\n", " | "))
	}

	// From the host: port-forward to the -rw Service, and the host's client.
	secret, err := kube.CoreV1().Secrets(ns).Get(ctx, "shop-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := portForward(t, ns, "svc/shop-rw", e.port)
	caFile := filepath.Join(t.TempDir(), "shop-ca.crt")
	if err := os.WriteFile(caFile, secret.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, env2 := e.host(port, string(secret.Data["username"]), string(secret.Data["password"]), string(secret.Data["database"]), caFile, e.count)
	cmd.Env = append(os.Environ(), env2...)
	var stderr strings.Builder
	cmd.Stderr = &stderr // the host's client may be older than the server, and says so here
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(rows) {
		t.Fatalf("%s through kubectl port-forward svc/shop-rw: %v\n%s%s", cmd.Path, err, out, stderr.String())
	}
	t.Logf("%s on the host through kubectl port-forward svc/shop-rw read %s rows", cmd.Args[0], strings.TrimSpace(string(out)))

	// A short-lived readonly user from mydatabases/credentials instead of
	// the Secret: made by the primary's manager in its container, it reads
	// through the same path and writes nothing.
	cred, err := mydb.ExampleV1().MyDatabases(ns).CreateCredentials(ctx, "shop", &examplev1.MyDatabaseCredentialRequest{
		Spec: examplev1.MyDatabaseCredentialRequestSpec{Role: examplev1.CredentialRoleReadOnly, ExpirationSeconds: ptr.To[int64](120)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("credentials: %v", err)
	}
	credCA := filepath.Join(t.TempDir(), "credential-ca.crt")
	if err := os.WriteFile(credCA, []byte(cred.Status.CACertificate), 0o600); err != nil {
		t.Fatal(err)
	}
	s := cred.Status
	// A port-forward of its own: kubectl port-forward may exit once a
	// PostgreSQL session through it ends (the connection reset it reads
	// as a lost pod), as the first one did on this node.
	credPort := portForward(t, ns, "svc/shop-rw", e.port)
	for _, tc := range []struct {
		statement string
		succeeds  bool
	}{{e.count, true}, {e.insert, false}} {
		cmd, env := e.host(credPort, s.Username, s.Password, s.Database, credCA, tc.statement)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		switch {
		case tc.succeeds && (err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(rows)):
			t.Errorf("the readonly credential %s: %s: %v\n%s", s.Username, tc.statement, err, out)
		case !tc.succeeds && err == nil:
			t.Errorf("the readonly credential %s wrote: %s", s.Username, tc.statement)
		}
	}
	t.Logf("a readonly credential from mydatabases/credentials (%s, made by %s) read %d rows and wrote nothing", s.Username, s.Instance, rows)

	// A role of spec.roles, with its password from a Secret of the test's,
	// made by the primary's manager in its container: it reads and writes
	// nothing.
	checkSpecRole(t, ns, e, credCA, string(secret.Data["database"]), rows)

	// The README's three lines without the Secret: the example Role, a
	// binding for alice, and kubectl mydb psql (or mariadb) as alice, who
	// gets a user of her own and tunnels through the API server
	// (mydatabases/connect), no port-forward; a write is refused.
	mustKubectl(t, "", "apply", "-n", ns, "-f", filepath.Join(repoRoot, "artifacts", "examples", "shop-reader.yaml"))
	mustKubectl(t, "", "create", "rolebinding", "alice-reads-shop", "-n", ns, "--role=shop-reader", "--user=alice")
	engineClient, statement := "psql", "-c"
	if e.engine != "postgres" {
		engineClient, statement = "mariadb", "-e"
	}
	asAlice := func(sql string) (string, error) {
		plugin := exec.Command(filepath.Join(repoRoot, "_output", "bin", "kubectl-mydb"),
			"--kubeconfig", kubeconfig, "--as", "alice", "-n", ns, engineClient, "shop", "--", statement, sql)
		out, err := plugin.CombinedOutput()
		return string(out), err
	}
	// RBAC is read from kube-apiserver's cache: the binding may take a
	// moment.
	var pluginOut string
	eventually(t, 30*time.Second, func() (err error) {
		pluginOut, err = asAlice(e.count)
		if err != nil || !strings.Contains(pluginOut, fmt.Sprint(rows)) {
			return fmt.Errorf("kubectl mydb --as alice %s shop: %v\n%s", engineClient, err, pluginOut)
		}
		return nil
	})
	t.Logf("kubectl mydb --as alice %s shop, through mydatabases/connect with the example Role, read %d rows", engineClient, rows)
	if out, err := asAlice(e.insert); err == nil {
		t.Errorf("alice wrote through kubectl mydb %s shop:\n%s", engineClient, out)
	}
}

// podPhases says how the pods of ns are doing, for a message.
func podPhases(t *testing.T, ns string) string {
	pods, err := kubeClient(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		ready := "not ready"
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = "ready"
			}
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", p.Name, p.Status.Phase, ready, p.Status.PodIP))
	}
	return strings.Join(out, "; ")
}

// portForward runs `kubectl port-forward TARGET :REMOTE` until the test
// ends and returns the local port.
func portForward(t *testing.T, ns, target string, remote int) int {
	t.Helper()
	port, stop, err := startPortForward(ns, target, remote)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return port
}

// startPortForward runs `kubectl port-forward TARGET :REMOTE` until stop
// and returns the local port.
func startPortForward(ns, target string, remote int) (port int, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kubectlBin, "--kubeconfig", kubeconfig, "port-forward", "-n", ns, "--address", "127.0.0.1", target, fmt.Sprintf(":%d", remote))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return 0, nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		return 0, nil, err
	}
	stop = func() { cancel(); _ = cmd.Wait() }
	found := make(chan int, 1)
	go func() {
		forwarding := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			if m := forwarding.FindStringSubmatch(s.Text()); m != nil {
				var p int
				fmt.Sscan(m[1], &p)
				found <- p
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p := <-found:
		return p, stop, nil
	case <-time.After(30 * time.Second):
		stop()
		return 0, nil, fmt.Errorf("kubectl port-forward %s printed no local port: %s", target, stderr.String())
	}
}

// checkSpecRole gives shop a role of spec.roles, ReadOnly on the
// application's database, and reads with it through a port-forward of its
// own (one a PostgreSQL session ended may have exited) once the status
// says it is Present.
func checkSpecRole(t *testing.T, ns string, e nodeEngine, caFile, database string, rows int) {
	t.Helper()
	ctx := context.Background()
	kube := kubeClient(t)
	password := "reporting-" + strings.ReplaceAll(ns, "-", "")
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reporting-password"},
		StringData: map[string]string{"password": password}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustKubectl(t, "", "patch", "mdb/shop", "-n", ns, "--type=merge", "-p",
		`{"spec":{"roles":[{"name":"reporting","passwordSecret":{"name":"reporting-password"},"privileges":[{"database":"`+database+`","access":"ReadOnly"}]}]}}`)
	mydb := mydbClient(t, restConfig(t))
	eventually(t, 2*time.Minute, func() error {
		db, err := mydb.ExampleV1().MyDatabases(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(db.Status.Roles) != 1 || db.Status.Roles[0].State != examplev1.ManagedObjectPresent {
			return fmt.Errorf("status.roles %+v", db.Status.Roles)
		}
		return nil
	})
	made := time.Since(start)
	port := portForward(t, ns, "svc/shop-rw", e.port)
	failed := false
	for _, tc := range []struct {
		statement string
		succeeds  bool
	}{{e.count, true}, {e.insert, false}} {
		cmd, env := e.host(port, "reporting", password, database, caFile, tc.statement)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		switch {
		case tc.succeeds && (err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(rows)):
			t.Errorf("the role reporting of spec.roles: %s: %v\n%s", tc.statement, err, out)
			failed = true
		case !tc.succeeds && err == nil:
			t.Errorf("the ReadOnly role reporting wrote: %s", tc.statement)
			failed = true
		}
	}
	if failed {
		return
	}
	t.Logf("a role of spec.roles (ReadOnly, password from a Secret) Present %s after the patch, read %d rows and wrote nothing", made.Round(100*time.Millisecond), rows)
}
