//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// TestUpdatesLeaveOtherDatabasesResources: mydb's watch cache holds one
// copy of each distinct spec.resources list, shared by the databases of
// those figures. Every way of writing one database (update, merge, JSON
// and apply patches, /status, /scale, a LimitRange defaulting an update)
// must leave the figures of the others as they were, read from the cache
// (resourceVersion=0, LIST) or from etcd (a GET without resourceVersion,
// which is decoded afresh and shares nothing): and the two reads of a
// database must be the same bytes.
func TestUpdatesLeaveOtherDatabasesResources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	cfg := restConfig(t)
	dbs := mydbClient(t, cfg).ExampleV1().MyDatabases(ns)
	raw := mydbClient(t, cfg).ExampleV1().RESTClient()

	custom := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: quantity("500m"), corev1.ResourceMemory: quantity("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: quantity("2"), corev1.ResourceMemory: quantity("2Gi")},
	}
	create := func(name string, r *corev1.ResourceRequirements) {
		db := sizedDB(name, 1, "1Gi")
		// Paused: the controller writes a status, and makes no children.
		db.Annotations = map[string]string{"mydb.example.com/paused": "true"}
		if r != nil {
			db.Spec.Resources = *r.DeepCopy()
		}
		if _, err := dbs.Create(ctx, db, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	// The written ones and their neighbours of the same figures.
	for _, name := range []string{"defaults-written", "defaults-1", "defaults-2"} {
		create(name, nil)
	}
	for _, name := range []string{"custom-written", "custom-1"} {
		create(name, &custom)
	}
	neighbours := []string{"defaults-1", "defaults-2", "custom-1"}

	// read returns a database as served by etcd and by the cache, once
	// both are of the same resourceVersion (the controller's status write
	// may come between them), and checks they are the same bytes.
	read := func(name string) examplev1.MyDatabase {
		t.Helper()
		var fromEtcd, fromCache []byte
		eventually(t, 30*time.Second, func() error {
			var err error
			if fromEtcd, err = raw.Get().Namespace(ns).Resource("mydatabases").Name(name).DoRaw(ctx); err != nil {
				return err
			}
			if fromCache, err = raw.Get().Namespace(ns).Resource("mydatabases").Name(name).Param("resourceVersion", "0").DoRaw(ctx); err != nil {
				return err
			}
			if rv(t, fromEtcd) != rv(t, fromCache) {
				return fmt.Errorf("%s: etcd at resourceVersion %s, the cache at %s", name, rv(t, fromEtcd), rv(t, fromCache))
			}
			return nil
		})
		if string(fromEtcd) != string(fromCache) {
			t.Errorf("%s read from the cache:\n%s\nfrom etcd:\n%s", name, fromCache, fromEtcd)
		}
		var db examplev1.MyDatabase
		if err := json.Unmarshal(fromEtcd, &db); err != nil {
			t.Fatal(err)
		}
		return db
	}
	figures := func(r corev1.ResourceRequirements) string {
		return fmt.Sprintf("requests cpu=%s memory=%s, limits cpu=%s memory=%s",
			ptr.To(r.Requests[corev1.ResourceCPU]).String(), ptr.To(r.Requests[corev1.ResourceMemory]).String(),
			ptr.To(r.Limits[corev1.ResourceCPU]).String(), ptr.To(r.Limits[corev1.ResourceMemory]).String())
	}
	want := map[string]string{}
	for _, name := range neighbours {
		want[name] = figures(read(name).Spec.Resources)
	}
	if want["defaults-1"] != "requests cpu=250m memory=512Mi, limits cpu=1 memory=1Gi" || want["custom-1"] != figures(custom) {
		t.Fatalf("the neighbours' resources before any write: %v", want)
	}
	checkNeighbours := func(after string) {
		t.Helper()
		for _, name := range neighbours {
			if got := figures(read(name).Spec.Resources); got != want[name] {
				t.Errorf("after %s, %s has %s, want %s", after, name, got, want[name])
			}
		}
		// The LIST of the namespace, from the cache, has the same objects.
		body, err := raw.Get().Namespace(ns).Resource("mydatabases").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var list examplev1.MyDatabaseList
		if err := json.Unmarshal(body, &list); err != nil {
			t.Fatal(err)
		}
		for _, db := range list.Items {
			if w, ok := want[db.Name]; ok && figures(db.Spec.Resources) != w {
				t.Errorf("after %s, the LIST has %s with %s, want %s", after, db.Name, figures(db.Spec.Resources), w)
			}
		}
	}

	writes := []struct {
		name  string
		write func(name string) error
	}{
		{"a merge patch of spec.resources", func(name string) error {
			_, err := dbs.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"resources":{"limits":{"cpu":"3"}}}}`), metav1.PatchOptions{})
			return err
		}},
		{"a JSON patch removing a request (defaulted back)", func(name string) error {
			_, err := dbs.Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/resources/requests/memory"}]`), metav1.PatchOptions{})
			return err
		}},
		{"an update setting and dropping figures", func(name string) error {
			db, err := dbs.Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
			if err != nil {
				return err
			}
			db.Spec.Resources.Limits[corev1.ResourceMemory] = quantity("4Gi")
			delete(db.Spec.Resources.Requests, corev1.ResourceCPU)
			_, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
			return err
		}},
		{"a server-side apply of spec.resources", func(name string) error {
			body := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":%q},"spec":{"engine":"postgres","storageSize":"1Gi","resources":{"limits":{"memory":"3Gi"}}}}`, name)
			_, err := dbs.Patch(ctx, name, types.ApplyPatchType, []byte(body), metav1.PatchOptions{FieldManager: "e2e-shared", Force: ptr.To(true)})
			return err
		}},
		{"a status update", func(name string) error {
			db, err := dbs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			db.Status.Endpoint = "written.example:5432"
			// A status write may not change the spec: the stored one stays.
			db.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: quantity("7")}
			_, err = dbs.UpdateStatus(ctx, db, metav1.UpdateOptions{})
			return err
		}},
		{"a scale", func(name string) error {
			_, err := dbs.UpdateScale(ctx, name, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: 2}}, metav1.UpdateOptions{})
			return err
		}},
		{"an update the namespace's LimitRange defaults", func(name string) error {
			db, err := dbs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			db.Spec.Resources = corev1.ResourceRequirements{}
			_, err = dbs.Update(ctx, db, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, w := range writes {
		if w.name == "an update the namespace's LimitRange defaults" {
			lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type:           corev1.LimitTypeContainer,
				Default:        corev1.ResourceList{corev1.ResourceCPU: quantity("1500m")},
				DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: quantity("1200m")},
			}}}}
			if _, err := kubeClient(t).CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"defaults-written", "custom-written"} {
			eventually(t, 30*time.Second, func() error {
				err := w.write(name)
				if apierrors.IsConflict(err) {
					return err // the controller's status write came between
				}
				if err != nil {
					t.Fatalf("%s of %s: %v", w.name, name, err)
				}
				return nil
			})
		}
		checkNeighbours(w.name)
	}

	// The LimitRange reached the written ones (mydb's informer may take a
	// moment to see it: then the API's defaults filled in).
	eventually(t, 30*time.Second, func() error {
		got := figures(read("defaults-written").Spec.Resources)
		if got == "requests cpu=1200m memory=512Mi, limits cpu=1500m memory=1Gi" {
			return nil
		}
		db, err := dbs.Get(ctx, "defaults-written", metav1.GetOptions{})
		if err != nil {
			return err
		}
		db.Spec.Resources = corev1.ResourceRequirements{}
		if _, err := dbs.Update(ctx, db, metav1.UpdateOptions{}); err != nil {
			return err
		}
		return fmt.Errorf("defaults-written has %s, not the LimitRange's figures yet", got)
	})
	checkNeighbours("the LimitRange's defaults")
}
