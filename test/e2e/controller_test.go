//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

func TestControllerLifecycle(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	kube := kubeClient(t)

	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")

	var sts *appsv1.StatefulSet
	eventually(t, reconcileTimeout, func() (err error) {
		sts, err = kube.AppsV1().StatefulSets(ns).Get(ctx, "prod-mysql", metav1.GetOptions{})
		return err
	})
	if *sts.Spec.Replicas != 3 || len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("statefulset replicas %d, claim templates %d", *sts.Spec.Replicas, len(sts.Spec.VolumeClaimTemplates))
	}
	eventually(t, reconcileTimeout, func() error {
		for i := 0; i < 3; i++ {
			pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-prod-mysql-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := pvc.Spec.Resources.Requests.Storage().String(); got != "50Gi" {
				return fmt.Errorf("claim %s requests %s", pvc.Name, got)
			}
		}
		return nil
	})
	for _, name := range []string{"prod-mysql", "prod-mysql-headless"} {
		if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "prod-mysql-credentials", metav1.GetOptions{}); err != nil {
		t.Errorf("credentials: %v", err)
	}

	// kwok's pods read Ready, but no engine runs behind them: the database
	// is rolled out and not Ready, and Degraded says why once the primary's
	// pod has been Ready for the grace a bootstrap gets.
	mustKubectl(t, "", "wait", "--for=condition=Progressing=False", "mdb/prod-mysql", "-n", ns, "--timeout=3m")
	eventually(t, reconcileTimeout, func() error {
		got := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason} {.status.conditions[?(@.type=="Degraded")].status}/{.status.conditions[?(@.type=="Degraded")].reason}`)
		if got != "False/PrimaryNotServing True/PrimaryNotServing" {
			return fmt.Errorf("Ready and Degraded: %s, want False/PrimaryNotServing True/PrimaryNotServing", got)
		}
		return nil
	})
	msg := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Degraded")].message}`)
	if !strings.Contains(msg, `pod "prod-mysql-0" is Ready, but the primary does not serve: the instance manager did not answer`) {
		t.Errorf("Degraded message %q does not say that the primary's manager does not answer", msg)
	}
	if out := mustKubectl(t, "", "get", "mdb", "prod-mysql", "-n", ns, "--no-headers"); !strings.Contains(out, "3/3") || !strings.Contains(out, "Degraded") {
		t.Errorf("get mdb of a database with no engine behind its Ready pods: %s, want 3/3 and Degraded", out)
	}

	mustKubectl(t, "", "scale", "mdb/prod-mysql", "-n", ns, "--replicas=5")
	eventually(t, reconcileTimeout, func() error {
		out := mustKubectl(t, "", "get", "mdb", "prod-mysql", "-n", ns, "--no-headers")
		if !strings.Contains(out, "5/5") {
			return fmt.Errorf("not 5/5 yet: %s", out)
		}
		return nil
	})
	mustKubectl(t, "", "wait", "--for=condition=Progressing=False", "mdb/prod-mysql", "-n", ns, "--timeout=3m")
	if out := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", "jsonpath={.status.observedGeneration}/{.metadata.generation}"); out != "2/2" {
		t.Errorf("observedGeneration/generation = %s, want 2/2", out)
	}

	// Drift: a StatefulSet deleted by hand comes back.
	uid := sts.UID
	if err := kube.AppsV1().StatefulSets(ns).Delete(ctx, "prod-mysql", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, reconcileTimeout, func() error {
		again, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "prod-mysql", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if again.UID == uid {
			return fmt.Errorf("still the old StatefulSet")
		}
		if *again.Spec.Replicas != 5 {
			return fmt.Errorf("recreated with %d replicas", *again.Spec.Replicas)
		}
		return nil
	})

	// Deleting the database lets the garbage collector remove its children
	// but the data: under deletionPolicy Retain the claims and the
	// credentials they need stay (neither names an owner).
	mustKubectl(t, "", "delete", "mdb", "prod-mysql", "-n", ns, "--wait=true")
	eventually(t, reconcileTimeout, func() error {
		if _, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "prod-mysql", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("statefulset still there: %v", err)
		}
		for _, name := range []string{"prod-mysql", "prod-mysql-headless"} {
			if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("service %s still there: %v", name, err)
			}
		}
		return nil
	})
	if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "prod-mysql-credentials", metav1.GetOptions{}); err != nil {
		t.Errorf("the credentials of a database deleted under Retain must stay: %v", err)
	}
	if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-prod-mysql-0", metav1.GetOptions{}); err != nil {
		t.Errorf("the claims of a database deleted under Retain must stay: %v", err)
	}
}

func TestPostgresChildren(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	pg := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: orders\nspec:\n  engine: postgres\n  storageSize: 5Gi\n"
	mustKubectl(t, pg, "apply", "-n", ns, "-f", "-")
	var sts *appsv1.StatefulSet
	eventually(t, reconcileTimeout, func() (err error) {
		sts, err = kubeClient(t).AppsV1().StatefulSets(ns).Get(ctx, "orders", metav1.GetOptions{})
		return err
	})
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Ports[0].ContainerPort != 5432 || c.VolumeMounts[0].MountPath != "/var/lib/postgresql/data" || !strings.HasPrefix(c.Image, "docker.io/library/postgres:17.") {
		t.Errorf("postgres container: port %d mount %s image %s", c.Ports[0].ContainerPort, c.VolumeMounts[0].MountPath, c.Image)
	}
	mustKubectl(t, "", "wait", "--for=condition=Progressing=False", "mdb/orders", "-n", ns, "--timeout=3m")
	if ep := mustKubectl(t, "", "get", "mdb/orders", "-n", ns, "-o", "jsonpath={.status.endpoint}"); ep != "orders."+ns+".svc:5432" {
		t.Errorf("endpoint %q", ep)
	}
	if _, err := kubeClient(t).PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "orders", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a single replica got a PodDisruptionBudget: %v", err)
	}
}

// TestControllerMetrics: leadership, queue depth and reconcile durations are
// on mydb-apiserver's /metrics, and /readyz includes the informer check.
// It may run right after a test restarted mydb-apiserver (the parallel
// tests, which used to run in between, wait until the serial ones are
// done): it waits for the server to lead and sync again, and counts the
// reconcile of a database of its own.
func TestControllerMetrics(t *testing.T) {
	// Not parallel: it reads the leader's controller metrics, which need local-up's mydb-apiserver to lead.
	ns := newNamespace(t)
	db := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: counted\nspec:\n  engine: postgres\n  storageSize: 1Gi\n"
	eventually(t, time.Minute, func() error {
		if r := kubectl(t, db, "apply", "-n", ns, "-f", "-"); r.err != nil {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	cfg := directConfig(t, localMydbPort(t))
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (string, error) {
		resp, err := client.Get(cfg.Host + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
		return string(body), nil
	}
	eventually(t, reconcileTimeout, func() error {
		readyz, err := get("/readyz?verbose")
		if err != nil {
			return err
		}
		if !strings.Contains(readyz, "[+]mydb-controller-informers-synced ok") {
			return fmt.Errorf("/readyz lacks the informer check:\n%s", readyz)
		}
		metrics, err := get("/metrics")
		if err != nil {
			return err
		}
		var lacks []string
		for _, want := range []string{
			`leader_election_master_status{name="mydb-controller"} 1`,
			`workqueue_depth{name="mydatabase"}`,
			`workqueue_depth{name="mydatabasebackup"}`,
			`mydb_controller_reconcile_duration_seconds_count{result="success"}`,
		} {
			if !strings.Contains(metrics, want) {
				lacks = append(lacks, want)
			}
		}
		if len(lacks) > 0 {
			return fmt.Errorf("/metrics lacks %s", strings.Join(lacks, ", "))
		}
		return nil
	})
}

// TestDay2Changes: an upgrade rolls the image, storage growth resizes every
// claim in place, and the pause annotation stops all writes.
func TestDay2Changes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	kube := kubeClient(t)
	db := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: grower\nspec:\n  engine: mysql\n  version: \"8.0\"\n  replicas: 2\n  storageSize: 1Gi\n"
	r := kubectl(t, db, "apply", "-n", ns, "-f", "-")
	if r.err != nil || !strings.Contains(r.stderr, "end of life") {
		t.Fatalf("apply of a deprecated version should warn:\n%s", r)
	}
	mustKubectl(t, "", "wait", "--for=condition=Progressing=False", "mdb/grower", "-n", ns, "--timeout=3m")

	mustKubectl(t, "", "patch", "mdb/grower", "-n", ns, "--type=merge", "-p", `{"spec":{"version":"8.4","storageSize":"2Gi"}}`)
	eventually(t, reconcileTimeout, func() error {
		sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "grower", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if img := sts.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "docker.io/library/mysql:8.4.") {
			return fmt.Errorf("image %s", img)
		}
		for i := 0; i < 2; i++ {
			pvc, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-grower-%d", i), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got := pvc.Spec.Resources.Requests.Storage().String(); got != "2Gi" {
				return fmt.Errorf("claim %s requests %s", pvc.Name, got)
			}
		}
		return nil
	})
	mustKubectl(t, "", "wait", "--for=condition=Progressing=False", "mdb/grower", "-n", ns, "--timeout=3m")

	// Paused: a scale is recorded but not acted on until the pause ends.
	mustKubectl(t, "", "annotate", "mdb/grower", "-n", ns, "mydb.example.com/paused=true")
	mustKubectl(t, "", "scale", "mdb/grower", "-n", ns, "--replicas=3")
	eventually(t, time.Minute, func() error {
		out := mustKubectl(t, "", "get", "mdb/grower", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Progressing")].reason}`)
		if out != "Paused" {
			return fmt.Errorf("Progressing reason %q", out)
		}
		return nil
	})
	if sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "grower", metav1.GetOptions{}); err != nil || *sts.Spec.Replicas != 2 {
		t.Errorf("a paused database's StatefulSet changed: %v", err)
	}
	mustKubectl(t, "", "annotate", "mdb/grower", "-n", ns, "mydb.example.com/paused-")
	eventually(t, reconcileTimeout, func() error {
		sts, err := kube.AppsV1().StatefulSets(ns).Get(ctx, "grower", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *sts.Spec.Replicas != 3 {
			return fmt.Errorf("replicas %d after the pause ended", *sts.Spec.Replicas)
		}
		return nil
	})
}

// TestMissingStorageClassIsDegraded: a database whose StorageClass does not
// exist says so within seconds, and kubectl get shows it.
func TestMissingStorageClassIsDegraded(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	manifest := strings.Replace(seedExample, "storageSize: 50Gi", "storageSize: 50Gi\n  storageClassName: no-such-class", 1)
	mustKubectl(t, manifest, "apply", "-n", ns, "-f", "-")
	created := time.Now()
	eventually(t, 10*time.Second, func() error {
		reason := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Degraded")].reason}`)
		if reason != "StorageClassNotFound" {
			return fmt.Errorf("Degraded reason %q", reason)
		}
		return nil
	})
	t.Logf("Degraded/StorageClassNotFound %s after the create", time.Since(created).Round(100*time.Millisecond))
	if out := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "--no-headers"); !strings.Contains(out, "Degraded") {
		t.Errorf("kubectl get mdb: %s, want the Degraded status", out)
	}
	msg := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Degraded")].message}`)
	if !strings.Contains(msg, `StorageClass "no-such-class", which does not exist`) {
		t.Errorf("Degraded message %q", msg)
	}
}

// TestLostCredentialsAreNeverRemade: the instance Secret (every password)
// of a database whose volumes hold data is deleted; mydb makes no new one
// (the data would not accept new passwords) and says so.
func TestLostCredentialsAreNeverRemade(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	kube := kubeClient(t)
	mustKubectl(t, seedExample, "apply", "-n", ns, "-f", "-")
	var uid string
	eventually(t, reconcileTimeout, func() error {
		if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-prod-mysql-0", metav1.GetOptions{}); err != nil {
			return err
		}
		s, err := kube.CoreV1().Secrets(ns).Get(ctx, "prod-mysql-instance-secrets", metav1.GetOptions{})
		if err != nil {
			return err
		}
		uid = string(s.UID)
		return nil
	})
	mustKubectl(t, "", "delete", "secret", "prod-mysql-instance-secrets", "-n", ns)
	eventually(t, 30*time.Second, func() error {
		reason := mustKubectl(t, "", "get", "mdb/prod-mysql", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Degraded")].reason}`)
		if reason != "CredentialsMissing" {
			return fmt.Errorf("Degraded reason %q", reason)
		}
		return nil
	})
	if s, err := kube.CoreV1().Secrets(ns).Get(ctx, "prod-mysql-instance-secrets", metav1.GetOptions{}); err == nil {
		t.Errorf("a new Secret %s replaced the deleted %s", s.UID, uid)
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// TestDataHasNoOwnerAndGoesOnlyWithItsDatabase: the claims and the
// credentials name no owner, so the garbage collector can never take them;
// deleting a database with deletionPolicy Delete deletes them (through the
// example.com/delete-data finalizer), and a database with Retain made again
// under its old name finds the same Secret.
func TestDataHasNoOwnerAndGoesOnlyWithItsDatabase(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	ctx := context.Background()
	kube := kubeClient(t)
	manifest := func(name, policy string) string {
		return "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: " + name +
			"\nspec:\n  engine: postgres\n  storageSize: 1Gi\n  deletionPolicy: " + policy + "\n"
	}
	data := func(name string) (*corev1.PersistentVolumeClaim, *corev1.Secret, error) {
		claim, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+name+"-0", metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		secret, err := kube.CoreV1().Secrets(ns).Get(ctx, name+"-credentials", metav1.GetOptions{})
		return claim, secret, err
	}
	for _, name := range []string{"doomed", "kept"} {
		policy := map[string]string{"doomed": "Delete", "kept": "Retain"}[name]
		mustKubectl(t, manifest(name, policy), "apply", "-n", ns, "-f", "-")
		eventually(t, reconcileTimeout, func() error {
			claim, secret, err := data(name)
			if err != nil {
				return err
			}
			if len(claim.OwnerReferences) != 0 || len(secret.OwnerReferences) != 0 {
				return fmt.Errorf("%s: claim owners %v, Secret owners %v: want none", name, claim.OwnerReferences, secret.OwnerReferences)
			}
			return nil
		})
	}
	if got := mustKubectl(t, "", "get", "mdb/doomed", "-n", ns, "-o", "jsonpath={.metadata.finalizers}"); !strings.Contains(got, "example.com/delete-data") {
		t.Errorf("finalizers of a Delete database %s", got)
	}
	_, keptSecret, _ := data("kept")

	mustKubectl(t, "", "delete", "mdb/doomed", "mdb/kept", "-n", ns, "--timeout=2m")
	eventually(t, reconcileTimeout, func() error {
		if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-doomed-0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the claim of a database deleted under Delete is still there: %v", err)
		}
		if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "doomed-credentials", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the Secret of a database deleted under Delete is still there: %v", err)
		}
		return nil
	})
	if _, _, err := data("kept"); err != nil {
		t.Fatalf("the data of a database deleted under Retain: %v", err)
	}

	mustKubectl(t, manifest("kept", "Retain"), "apply", "-n", ns, "-f", "-")
	mustKubectl(t, "", "wait", "--for=condition=Progressing=False", "mdb/kept", "-n", ns, "--timeout=3m")
	if _, secret, err := data("kept"); err != nil || secret.UID != keptSecret.UID {
		t.Errorf("the database made again: Secret %v, err %v; want the old one %s", secret.UID, err, keptSecret.UID)
	}
}
