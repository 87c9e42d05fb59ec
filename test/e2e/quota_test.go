//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// createQuota creates a ResourceQuota and waits until kube-controller-manager
// has computed its usage of every resource it limits.
func createQuota(t *testing.T, ns, name string, hard corev1.ResourceList) {
	t.Helper()
	ctx := context.Background()
	kube := kubeClient(t)
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if _, err := kube.CoreV1().ResourceQuotas(ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, reconcileTimeout, func() error {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for r := range hard {
			if _, ok := q.Status.Used[r]; !ok {
				return fmt.Errorf("usage of %s not computed yet", r)
			}
		}
		return nil
	})
}

// refusedOnceSeen polls a dry-run request until mydb's informers have seen
// the quota (admitted, or "status unknown", before), and checks the refusal.
func refusedOnceSeen(t *testing.T, what, want string, dryRunRequest func() error) {
	t.Helper()
	var err error
	eventually(t, time.Minute, func() error {
		err = dryRunRequest()
		if err == nil {
			return fmt.Errorf("%s was admitted", what)
		}
		if strings.Contains(err.Error(), "status unknown for quota") {
			return err
		}
		return nil
	})
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("%s: %v\nwant 403 %s", what, err, want)
	}
	t.Logf("%s refused: %v", what, err)
}

// TestQuotaRefusesWhatItsChildrenWouldExceed: with requests.storage=100Gi,
// 3x50Gi is refused at create (dry run too, which writes nothing), 2x50Gi
// is accepted and its claims are made, scaling it to 3 through /scale is
// refused, and kube-apiserver's own quota agrees once the claims exist.
func TestQuotaRefusesWhatItsChildrenWouldExceed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	createQuota(t, ns, "storage", corev1.ResourceList{corev1.ResourceRequestsStorage: quantity("100Gi")})
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)

	want := `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=150Gi, used: requests.storage=0, limited: requests.storage=100Gi`
	refusedOnceSeen(t, "3x50Gi with dryRun", want, func() error {
		_, err := dbs.Create(ctx, sizedDB("shop", 3, "50Gi"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	})
	if _, err := dbs.Create(ctx, sizedDB("shop", 3, "50Gi"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("3x50Gi: %v\nwant 403 %s", err, want)
	}

	if _, err := dbs.Create(ctx, sizedDB("shop", 2, "50Gi"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("2x50Gi with dryRun: %v", err)
	}
	if _, err := dbs.Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the dry run wrote something: %v", err)
	}
	if _, err := dbs.Create(ctx, sizedDB("shop", 2, "50Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("2x50Gi: %v", err)
	}

	wantScale := `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=50Gi, used: requests.storage=100Gi, limited: requests.storage=100Gi`
	scaleTo := func(replicas int32, dryRun []string) error {
		scale, err := dbs.GetScale(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		_, err = dbs.UpdateScale(ctx, "shop", scale, metav1.UpdateOptions{DryRun: dryRun})
		return err
	}
	for _, dryRun := range [][]string{nil, {metav1.DryRunAll}} {
		if err := scaleTo(3, dryRun); !apierrors.IsForbidden(err) || err.Error() != wantScale {
			t.Fatalf("scale to 3 (dryRun %v): %v\nwant 403 %s", dryRun, err, wantScale)
		}
	}
	// kubectl shows the same.
	r := kubectl(t, "", "scale", "mdb", "shop", "-n", ns, "--replicas=3")
	if r.err == nil || !strings.Contains(r.stderr, wantScale) {
		t.Fatalf("kubectl scale:\n%s", r)
	}
	if err := scaleTo(1, []string{metav1.DryRunAll}); err != nil {
		t.Fatalf("a dry-run scale down: %v", err)
	}
	if db, err := dbs.Get(ctx, "shop", metav1.GetOptions{}); err != nil || *db.Spec.Replicas != 2 {
		t.Fatalf("after the refusals and the dry run: %v, replicas %v", err, db.Spec.Replicas)
	}

	// The StatefulSet makes both claims (kube-apiserver's quota admits them:
	// mydb charged nothing itself), and with them existing the scale-up is
	// still refused: nothing is counted twice, nothing forgotten.
	kube := kubeClient(t)
	eventually(t, reconcileTimeout, func() error {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "storage", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if used := q.Status.Used[corev1.ResourceRequestsStorage]; used.Cmp(quantity("100Gi")) != 0 {
			return fmt.Errorf("quota used %s, want 100Gi", used.String())
		}
		return nil
	})
	for i := 0; i < 2; i++ {
		if _, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-shop-%d", i), metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, func() error {
		err := scaleTo(3, nil)
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("scale to 3 with the claims made: %v", err)
		}
		if err.Error() != wantScale {
			return fmt.Errorf("scale to 3 with the claims made: %v\nwant %s", err, wantScale)
		}
		return nil
	})
	var scale *autoscalingv1.Scale
	scale, err := dbs.GetScale(ctx, "shop", metav1.GetOptions{})
	if err != nil || scale.Spec.Replicas != 2 {
		t.Fatalf("replicas after it all: %v %v", scale, err)
	}
}

// TestLimitRangeBoundsAndDefaultsDatabases: a LimitRange max of 500m CPU
// per container refuses a 1-CPU database and defaults an empty one, whose
// pods kube-apiserver then admits; a backup, which makes no pod (the
// instance manager streams it), is not refused.
func TestLimitRangeBoundsAndDefaultsDatabases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
		Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: quantity("500m")},
	}}}}
	if _, err := kubeClient(t).CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)

	big := sizedDB("big", 1, "1Gi")
	big.Spec.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: quantity("1")}}
	want := `mydatabases.example.com "big" is forbidden: spec.resources.limits[cpu]: maximum cpu usage per Container is 500m, but limit is 1`
	// mydb's informer has the LimitRange once a dry run is refused.
	var err error
	eventually(t, time.Minute, func() error {
		_, err = dbs.Create(ctx, big, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("mydb does not see the LimitRange yet")
		}
		return nil
	})
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("a 1-CPU database, dry run: %v\nwant 403 %s", err, want)
	}
	if _, err = dbs.Create(ctx, big, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("a 1-CPU database: %v\nwant 403 %s", err, want)
	}
	t.Logf("refused: %v", err)

	empty, err := dbs.Create(ctx, sizedDB("empty", 1, "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("an empty database: %v", err)
	}
	// kube-apiserver defaults a LimitRange's default and defaultRequest to
	// its max; the API's defaults fill memory.
	r := empty.Spec.Resources
	got := fmt.Sprintf("requests cpu=%s memory=%s, limits cpu=%s memory=%s",
		ptr.To(r.Requests[corev1.ResourceCPU]).String(), ptr.To(r.Requests[corev1.ResourceMemory]).String(),
		ptr.To(r.Limits[corev1.ResourceCPU]).String(), ptr.To(r.Limits[corev1.ResourceMemory]).String())
	if wantRes := "requests cpu=500m memory=512Mi, limits cpu=500m memory=1Gi"; got != wantRes {
		t.Errorf("the empty database's resources: %s, want %s", got, wantRes)
	}
	// The pod kube-apiserver's LimitRanger admits.
	eventually(t, reconcileTimeout, func() error {
		_, err := kubeClient(t).CoreV1().Pods(ns).Get(ctx, "empty-0", metav1.GetOptions{})
		return err
	})
	mustKubectl(t, "", "patch", "mdb/empty", "-n", ns, "--type=merge", "-p", nowhereDestination)
	if b := backupRaw(t, ns, "empty", `{"metadata":{"name":"first"}}`); b.err != nil {
		t.Fatalf("backup: %s\nwant it admitted: a backup makes no pod", b)
	}
}

// TestQuotaOnBackupsRefusesTheNextBackup: count/mydatabasebackups.example.com
// is charged for POST mydatabases/<name>/backup.
func TestQuotaOnBackupsRefusesTheNextBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	createQuota(t, ns, "backups", corev1.ResourceList{"count/mydatabasebackups.example.com": quantity("1")})
	shop := sizedDB("shop", 1, "1Gi")
	shop.Spec.Backup = &examplev1.BackupPolicy{Destination: &examplev1.BackupDestination{S3: &examplev1.S3Destination{
		Endpoint: "http://127.0.0.1:1", Bucket: "backups", CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3"}}}}
	if _, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns).Create(ctx, shop, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// mydb's quota informer sees the computed status shortly after it is written.
	eventually(t, time.Minute, func() error {
		if r := backupRaw(t, ns, "shop", `{"metadata":{"name":"first"}}`); r.err != nil {
			return fmt.Errorf("first backup: %s", r)
		}
		return nil
	})
	// As in TestResourceQuotaCountsMyDatabases: the charge holds once
	// kube-controller-manager's recomputed usage agrees with it.
	kube := kubeClient(t)
	eventually(t, time.Minute, func() error {
		q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "backups", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if used := q.Status.Used["count/mydatabasebackups.example.com"]; used.Value() != 1 {
			return fmt.Errorf("quota used %s, want 1", used.String())
		}
		return nil
	})
	r := backupRaw(t, ns, "shop", `{"metadata":{"name":"second"}}`)
	want := `mydatabasebackups.example.com "second" is forbidden: exceeded quota: backups, requested: count/mydatabasebackups.example.com=1, used: count/mydatabasebackups.example.com=1, limited: count/mydatabasebackups.example.com=1`
	if r.err == nil || !strings.Contains(r.stderr, want) {
		t.Fatalf("second backup:\n%s\nwant %s", r, want)
	}
	t.Logf("second backup refused: %s", strings.TrimSpace(r.stderr))
}

// TestKubectlApplyNamesTheBadQuantity: kubectl apply of storageSize: fifty
// prints the field.
func TestKubectlApplyNamesTheBadQuantity(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	r := kubectl(t, "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: shop\nspec:\n  engine: postgres\n  storageSize: fifty\n",
		"apply", "-n", ns, "-f", "-")
	want := `spec.storageSize: Invalid value: "fifty": must be a quantity: a number with an optional suffix, such as 50Gi, 512Mi, 1.5G, 500m or 2`
	if r.err == nil || !strings.Contains(r.stderr, want) {
		t.Fatalf("kubectl apply:\n%s\nwant %s", r, want)
	}
	t.Logf("kubectl apply: %s", strings.TrimSpace(r.stderr))
}

// TestQuotaHoldsUnderConcurrentCreates: six creates of 50Gi at once against
// 100Gi, through the aggregator: exactly two are admitted.
func TestQuotaHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	createQuota(t, ns, "storage", corev1.ResourceList{corev1.ResourceRequestsStorage: quantity("100Gi")})
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
	// Wait until mydb sees the quota (a dry run that does not fit is refused).
	refusedOnceSeen(t, "3x50Gi with dryRun",
		`mydatabases.example.com "probe" is forbidden: exceeded quota: storage, requested: requests.storage=150Gi, used: requests.storage=0, limited: requests.storage=100Gi`,
		func() error {
			_, err := dbs.Create(ctx, sizedDB("probe", 3, "50Gi"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		})
	const n = 6
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			_, err := dbs.Create(ctx, sizedDB(fmt.Sprintf("db-%d", i), 1, "50Gi"), metav1.CreateOptions{})
			errs <- err
		}(i)
	}
	admitted := 0
	for i := 0; i < n; i++ {
		err := <-errs
		switch {
		case err == nil:
			admitted++
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota: storage"):
			t.Errorf("unexpected answer: %v", err)
		}
	}
	list, err := dbs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if admitted != 2 || len(list.Items) != 2 {
		t.Errorf("%d admitted, %d stored; want 2", admitted, len(list.Items))
	}
}
