//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestTheClusterFollowsASpecOnlyOnceTheGuardRecordedIt: the storage guard
// checks every few seconds, so a snapshot of mydb's etcd taken since the
// last check passes for current. The controller closes that gap for what
// the main cluster is made from: before it creates a new database's
// children, or scales them to a new spec, the guard's record names a
// sequence written after that spec, so a snapshot without it is refused as
// a rollback. Read at the moment the StatefulSet appears (or is scaled),
// the record must already be past the sequence it held before the write;
// without the cover it is so only when a periodic check fell in between.
func TestTheClusterFollowsASpecOnlyOnceTheGuardRecordedIt(t *testing.T) {
	// Not parallel: it reads the storage guard's cluster-wide sequence, which other tests' writes advance.
	const rounds = 4
	ctx := context.Background()
	kube := kubeClient(t)
	ns := newNamespace(t)
	dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
	for i := 0; i < rounds; i++ {
		name := fmt.Sprintf("covered-%d", i)
		before := storeRecord(t, kube).Sequence
		_, err := dbs.Create(ctx, &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, StorageSize: quantity("1Gi"), Replicas: ptr.To[int32](1)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		at := waitStatefulSetReplicas(t, ns, name, 1)
		if got := storeRecord(t, kube).Sequence; got <= before {
			t.Errorf("%s: its StatefulSet exists %v after the create with the guard's record still at sequence %d", name, at.Sub(start).Round(time.Millisecond), got)
		}

		before = storeRecord(t, kube).Sequence
		patch := []byte(`{"spec":{"replicas":2}}`)
		if _, err := dbs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		at = waitStatefulSetReplicas(t, ns, name, 2)
		if got := storeRecord(t, kube).Sequence; got <= before {
			t.Errorf("%s: its StatefulSet scaled to 2 %v after the patch with the guard's record still at sequence %d", name, at.Sub(start).Round(time.Millisecond), got)
		}
	}
}

// waitStatefulSetReplicas polls closely until StatefulSet name has
// spec.replicas want, and returns when it saw it.
func waitStatefulSetReplicas(t *testing.T, ns, name string, want int32) time.Time {
	t.Helper()
	kube := kubeClient(t)
	deadline := time.Now().Add(reconcileTimeout)
	for time.Now().Before(deadline) {
		sts, err := kube.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
		switch {
		case err == nil && sts.Spec.Replicas != nil && *sts.Spec.Replicas == want:
			return time.Now()
		case err != nil && !apierrors.IsNotFound(err):
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("StatefulSet %s/%s never had %d replicas", ns, name, want)
	return time.Time{}
}
