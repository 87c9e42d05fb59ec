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

// nodeEngine is how the node test reaches one engine with its own client.
type nodeEngine struct {
	engine, version string
	// image runs the client in a pod (the engine's image has it).
	image string
	// client is the host's command line client; sql runs a statement with
	// it; count reads a number.
	client string
	args   func(host string, port int, user, database string) []string
}

// PostgreSQL 17, the default version, as the README's quick start runs it.
var nodePostgres = nodeEngine{engine: "postgres", version: "17", image: "mydb.local/postgres:17", client: "psql",
	args: func(host string, port int, user, database string) []string {
		return []string{"-h", host, "-p", fmt.Sprint(port), "-U", user, "-d", database, "-v", "ON_ERROR_STOP=1", "-tA"}
	}}

// TestNodePostgres: a 3-instance PostgreSQL on the real node is Ready only
// once it serves; a pod writes through <name>-rw by its DNS name and reads
// what it wrote through <name>-ro; from the host, `kubectl port-forward
// svc/<name>-rw` and psql with the generated credentials reach the primary
// (the README's quick start).
func TestNodePostgres(t *testing.T) {
	e := nodePostgres
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

	// A client pod, by the Services' DNS names, with the Secret's credentials.
	const rows = 1000
	// Ready comes from the managers' reports; the Service routes once the
	// EndpointSlice controller and kube-proxy have seen the primary's
	// readiness and role label, a moment later: the client retries its
	// first connection for a bounded time, and says how long it waited.
	script := fmt.Sprintf(`set -e
start=$(date +%%s%%N)
for i in $(seq 1 60); do
  psql -h shop-rw.%[1]s.svc.cluster.local -v ON_ERROR_STOP=1 -c 'CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY)' \
    -c 'INSERT INTO orders SELECT generate_series(1, %[2]d) ON CONFLICT DO NOTHING' && break
  [ "$i" = 60 ] && { echo "shop-rw refused every connection for 30 s"; exit 1; }
  sleep 0.5
done
echo "wrote through shop-rw after $(( ($(date +%%s%%N) - start) / 1000000 )) ms"
for i in $(seq 1 120); do
  n=$(psql -h shop-ro.%[1]s.svc.cluster.local -tA -c 'SELECT count(*) FROM orders' 2>/dev/null || true)
  [ "$n" = %[2]d ] && { echo "read $n rows through shop-ro"; exit 0; }
  sleep 0.5
done
echo "shop-ro never showed %[2]d rows (last: $n)"; exit 1
`, ns, rows)
	secretEnv := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "shop-credentials"}, Key: key}}}
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "psql", Image: e.image, Command: []string{"sh", "-c", script},
				Env: []corev1.EnvVar{secretEnv("PGUSER", "username"), secretEnv("PGPASSWORD", "password"), secretEnv("PGDATABASE", "database")},
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

	// From the host: port-forward to the -rw Service, and the host's psql.
	secret, err := kube.CoreV1().Secrets(ns).Get(ctx, "shop-credentials", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := portForward(t, ns, "svc/shop-rw", 5432)
	cmd := exec.Command(e.client, append(e.args("127.0.0.1", port, string(secret.Data["username"]), string(secret.Data["database"])),
		"-c", "SELECT count(*) FROM orders")...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+string(secret.Data["password"]), "PGSSLMODE=disable")
	var stderr strings.Builder
	cmd.Stderr = &stderr // the host's psql may be older than the server, and says so here
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != fmt.Sprint(rows) {
		t.Fatalf("psql through kubectl port-forward svc/shop-rw: %v\n%s%s", err, out, stderr.String())
	}
	t.Logf("psql on the host through kubectl port-forward svc/shop-rw read %s rows", strings.TrimSpace(string(out)))
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
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kubectlBin, "--kubeconfig", kubeconfig, "port-forward", "-n", ns, "--address", "127.0.0.1", target, fmt.Sprintf(":%d", remote))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
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
		return p
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward %s printed no local port: %s", target, stderr.String())
	}
	return 0
}
