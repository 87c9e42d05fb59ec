package access

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/mydb-dev/mydb/pkg/apis/example"
)

func TestInstanceAddress(t *testing.T) {
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for name, ip := range map[string]string{"shop-0": "10.0.0.10", "shop-1": "10.0.0.11", "shop-2": "10.0.0.12", "shop-3": ""} {
		_ = pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Status: corev1.PodStatus{PodIP: ip}})
	}
	issuer := &Issuer{Pods: corelisters.NewPodLister(pods)}
	db := &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns"},
		Spec:       example.MyDatabaseSpec{Engine: "postgres", Replicas: 5},
		Status: example.MyDatabaseStatus{CurrentPrimary: "shop-0", Instances: []example.InstanceStatus{
			{Name: "shop-0", Role: example.InstanceRolePrimary, Ready: true},
			{Name: "shop-1", Role: example.InstanceRoleReplica, Ready: true},
			{Name: "shop-2", Role: example.InstanceRoleReplica, Ready: false},
			{Name: "shop-3", Role: example.InstanceRoleReplica, Ready: true},
			{Name: "shop-4", Role: example.InstanceRoleReplica, Ready: true, Fenced: true},
		}},
	}
	for _, tc := range []struct {
		instance, address, name string
	}{
		{"", "10.0.0.10:5432", "shop-0"},
		{"primary", "10.0.0.10:5432", "shop-0"},
		{"shop-1", "10.0.0.11:5432", "shop-1"},
		{"shop-0", "10.0.0.10:5432", "shop-0"},
		{"shop-2", "", ""}, // not ready
		{"shop-3", "", ""}, // no address
		{"shop-4", "", ""}, // fenced
		{"shop-9", "", ""}, // no such instance
	} {
		address, name, err := issuer.InstanceAddress(db, tc.instance)
		if address != tc.address || name != tc.name {
			t.Errorf("%q: got %q %q (%v), want %q %q", tc.instance, address, name, err, tc.address, tc.name)
		}
		if tc.address == "" && !errors.Is(err, ErrUnavailable) {
			t.Errorf("%q: the refusal is not ErrUnavailable: %v", tc.instance, err)
		}
	}

	// A replica is one of the ready, unfenced replicas: shop-1 and shop-3;
	// shop-3 has no address yet, so a pick of it is unavailable, never
	// another instance.
	seen := map[string]int{}
	for range 200 {
		_, name, err := issuer.InstanceAddress(db, "replica")
		if err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		seen[name]++
	}
	if seen["shop-1"] == 0 || seen["shop-1"]+seen[""] != 200 {
		t.Errorf("replica picks: %v", seen)
	}

	db.Status.Instances = db.Status.Instances[:1]
	if _, _, err := issuer.InstanceAddress(db, "replica"); !errors.Is(err, ErrUnavailable) || err.Error() != ErrUnavailable.Error()+": the database has no ready replica" {
		t.Errorf("without replicas: %v", err)
	}
	db.Status.TargetPrimary = "shop-1"
	if _, _, err := issuer.InstanceAddress(db, ""); !errors.Is(err, ErrUnavailable) {
		t.Errorf("during a switchover the primary is %v", err)
	}
}
