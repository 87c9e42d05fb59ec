package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
)

// The four targets of every side-by-side figure.
const (
	tAggregated = "aggregated" // MyDatabase through kube-apiserver's aggregation layer
	tDirect     = "direct"     // MyDatabase straight at mydb-apiserver's port
	tCRD        = "crd"        // the same schema as a CRD served by kube-apiserver
	tEtcd       = "etcd"       // a create-if-absent transaction on mydb's etcd
)

var targetTitles = map[string]string{
	tAggregated: "MyDatabase via aggregator",
	tDirect:     "MyDatabase direct",
	tCRD:        "CRD via kube-apiserver",
	tEtcd:       "raw etcd txn",
}

// crdGVR is the CRD's resource: the seed's schema under a group of its own.
var crdGVR = schema.GroupVersionResource{Group: "crd.example.com", Version: "v1", Resource: "mydatabases"}

// objectSize is the size of the JSON a client sends for one object.
const objectSize = 1024

// payload is what makes both kinds of object the same ~1 KiB: the same
// labels and annotations, and the pause annotation that keeps mydb's
// controller from creating children for the API-path figures (it still
// writes one status per object: that cost is mydb's and stays in).
type payload struct {
	labels      map[string]string
	annotations map[string]string
}

func newPayload(runID string) payload {
	p := payload{
		labels: map[string]string{
			"app.kubernetes.io/part-of":      "mydb-bench",
			"bench.mydb.example.com/run":     runID,
			"bench.mydb.example.com/filler1": strings.Repeat("a", 63),
			"bench.mydb.example.com/filler2": strings.Repeat("b", 63),
		},
		annotations: map[string]string{
			"mydb.example.com/paused":       "true",
			"bench.mydb.example.com/filler": "",
		},
	}
	db := p.myDatabase("c16-r0-00000")
	db.TypeMeta = metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "MyDatabase"}
	raw, _ := json.Marshal(db)
	if pad := objectSize - len(raw); pad > 0 {
		p.annotations["bench.mydb.example.com/filler"] = strings.Repeat("x", pad)
	}
	return p
}

func copyMap(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (p payload) myDatabase(name string) *examplev1.MyDatabase {
	return &examplev1.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: copyMap(p.labels), Annotations: copyMap(p.annotations)},
		Spec: examplev1.MyDatabaseSpec{Engine: examplev1.EngineMySQL, Replicas: ptr.To[int32](1),
			StorageSize: resource.MustParse("1Gi")},
	}
}

func toAny(m map[string]string) map[string]interface{} {
	c := make(map[string]interface{}, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (p payload) customResource(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "crd.example.com/v1",
		"kind":       "MyDatabase",
		"metadata":   map[string]interface{}{"name": name, "labels": toAny(p.labels), "annotations": toAny(p.annotations)},
		"spec":       map[string]interface{}{"engine": "mysql", "replicas": int64(1), "storageSize": "1Gi"},
	}}
}

// target is one way of writing and reading the objects.
type target interface {
	name() string
	create(ctx context.Context, ns, name string) error
	get(ctx context.Context, ns, name string) error
	watch(ctx context.Context, ns string) (watch.Interface, error)
	// deleteAll removes every object of the namespace and waits until none is left.
	deleteAll(ctx context.Context, ns string) error
}

// mdbTarget speaks to mydb with the generated clientset in protobuf.
type mdbTarget struct {
	label string
	c     clientset.Interface
	p     payload
}

func (t *mdbTarget) name() string { return t.label }

func (t *mdbTarget) create(ctx context.Context, ns, name string) error {
	_, err := t.c.ExampleV1().MyDatabases(ns).Create(ctx, t.p.myDatabase(name), metav1.CreateOptions{})
	return err
}

func (t *mdbTarget) get(ctx context.Context, ns, name string) error {
	_, err := t.c.ExampleV1().MyDatabases(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}

func (t *mdbTarget) watch(ctx context.Context, ns string) (watch.Interface, error) {
	l, err := t.c.ExampleV1().MyDatabases(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	return t.c.ExampleV1().MyDatabases(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion})
}

func (t *mdbTarget) deleteAll(ctx context.Context, ns string) error {
	dbs := t.c.ExampleV1().MyDatabases(ns)
	if err := dbs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	return waitEmpty(ctx, func() (int, error) {
		l, err := dbs.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	})
}

// crdTarget speaks to the CRD with the dynamic client (JSON, the only
// encoding kube-apiserver serves custom resources in).
type crdTarget struct {
	c dynamic.Interface
	p payload
}

func (t *crdTarget) name() string { return tCRD }

func (t *crdTarget) create(ctx context.Context, ns, name string) error {
	_, err := t.c.Resource(crdGVR).Namespace(ns).Create(ctx, t.p.customResource(name), metav1.CreateOptions{})
	return err
}

func (t *crdTarget) get(ctx context.Context, ns, name string) error {
	_, err := t.c.Resource(crdGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	return err
}

func (t *crdTarget) watch(ctx context.Context, ns string) (watch.Interface, error) {
	l, err := t.c.Resource(crdGVR).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	return t.c.Resource(crdGVR).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: l.GetResourceVersion()})
}

func (t *crdTarget) deleteAll(ctx context.Context, ns string) error {
	r := t.c.Resource(crdGVR).Namespace(ns)
	if err := r.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	return waitEmpty(ctx, func() (int, error) {
		l, err := r.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	})
}

// etcdTarget is the floor: what an API server's create does in etcd (a
// transaction that puts the key only if it does not exist), with a value of
// the size mydb stores, from the same number of clients.
type etcdTarget struct {
	c      *clientv3.Client
	prefix string
	value  string
}

func (t *etcdTarget) name() string { return tEtcd }

func (t *etcdTarget) key(ns, name string) string { return t.prefix + ns + "/" + name }

func (t *etcdTarget) create(ctx context.Context, ns, name string) error {
	k := t.key(ns, name)
	resp, err := t.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", 0)).
		Then(clientv3.OpPut(k, t.value)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcd key %s exists", k)
	}
	return nil
}

func (t *etcdTarget) get(ctx context.Context, ns, name string) error {
	_, err := t.c.Get(ctx, t.key(ns, name))
	return err
}

func (t *etcdTarget) watch(context.Context, string) (watch.Interface, error) {
	return nil, fmt.Errorf("no watch on the raw etcd target")
}

func (t *etcdTarget) deleteAll(ctx context.Context, ns string) error {
	_, err := t.c.Delete(ctx, t.prefix+ns+"/", clientv3.WithPrefix())
	return err
}

func waitEmpty(ctx context.Context, count func() (int, error)) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		n, err := count()
		return err == nil && n == 0, nil
	})
}
