package storagewrap

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
)

// memEtcd is the storage of etcd for one resource, in memory: it keeps each
// object encoded and decodes it afresh for every read, watch event and
// update, as etcd3's store does. It records the existing object each
// update started from.
type memEtcd struct {
	storage.Interface // the methods the tests do not reach
	codec             runtime.Codec

	mu       sync.Mutex
	rev      uint64
	data     map[string][]byte
	watchers []watcher
	updated  []runtime.Object // the existing object of each GuaranteedUpdate
}

func newMemEtcd() *memEtcd {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	return &memEtcd{codec: codecs.CodecForVersions(info.Serializer, info.Serializer, examplev1.SchemeGroupVersion, runtime.InternalGroupVersioner),
		data: map[string][]byte{}}
}

func (m *memEtcd) decode(raw []byte) runtime.Object {
	obj, err := runtime.Decode(m.codec, raw)
	if err != nil {
		panic(err)
	}
	return obj
}

// putLocked stores obj at the next revision and tells the watchers.
func (m *memEtcd) putLocked(key string, obj runtime.Object, typ watch.EventType) ([]byte, error) {
	m.rev++
	if err := m.Versioner().UpdateObject(obj, m.rev); err != nil {
		return nil, err
	}
	raw, err := runtime.Encode(m.codec, obj)
	if err != nil {
		return nil, err
	}
	m.data[key] = raw
	for _, w := range m.watchers {
		obj := m.decode(raw)
		if w.timed {
			obj = timedObject{Object: obj, at: time.Now()}
		}
		w.events <- watch.Event{Type: typ, Object: obj}
	}
	return raw, nil
}

func into(decoded runtime.Object, out runtime.Object) {
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(decoded).Elem())
}

func (m *memEtcd) Versioner() storage.Versioner { return storage.APIObjectVersioner{} }

func (m *memEtcd) Create(_ context.Context, key string, obj, out runtime.Object, _ uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, err := m.putLocked(key, obj.DeepCopyObject(), watch.Added)
	if err != nil {
		return err
	}
	into(m.decode(raw), out)
	return nil
}

func (m *memEtcd) Get(_ context.Context, key string, _ storage.GetOptions, out runtime.Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.data[key]
	if !ok {
		return storage.NewKeyNotFoundError(key, int64(m.rev))
	}
	into(m.decode(raw), out)
	return nil
}

func (m *memEtcd) GetList(_ context.Context, _ string, _ storage.ListOptions, listObj runtime.Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var items []runtime.Object
	for _, raw := range m.data {
		items = append(items, m.decode(raw))
	}
	if err := meta.SetList(listObj, items); err != nil {
		return err
	}
	return m.Versioner().UpdateList(listObj, m.rev, "", nil)
}

// Watch sends the objects there are first when asked (the cacher fills
// itself that way, with the WatchList feature), then every change.
func (m *memEtcd) Watch(_ context.Context, _ string, opts storage.ListOptions) (watch.Interface, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := make(chan watch.Event, 100)
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		for _, raw := range m.data {
			w <- watch.Event{Type: watch.Added, Object: m.decode(raw)}
		}
		end := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatUint(m.rev, 10),
			Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		w <- watch.Event{Type: watch.Bookmark, Object: end}
	}
	m.watchers = append(m.watchers, watcher{events: w, timed: opts.RecordTimestamps})
	return watch.NewProxyWatcher(w), nil
}

// watcher is one watch of memEtcd; timed, it wraps the objects with the
// time they were decoded, as etcd3 does for the cacher.
type watcher struct {
	events chan watch.Event
	timed  bool
}

type timedObject struct {
	runtime.Object
	at time.Time
}

func (t timedObject) GetObjectMeta() metav1.Object {
	m, _ := meta.Accessor(t.Object)
	return m
}
func (t timedObject) RecordTime() time.Time  { return t.at }
func (t timedObject) Unwrap() runtime.Object { return t.Object }

func (m *memEtcd) GuaranteedUpdate(_ context.Context, key string, destination runtime.Object, _ bool, _ *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExisting runtime.Object) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	existing := cachedExisting
	if existing == nil {
		existing = m.decode(m.data[key])
	}
	m.updated = append(m.updated, existing)
	obj, _, err := tryUpdate(existing, storage.ResponseMeta{})
	if err != nil {
		return err
	}
	raw, err := m.putLocked(key, obj, watch.Modified)
	if err != nil {
		return err
	}
	into(m.decode(raw), destination)
	return nil
}

func (m *memEtcd) GetCurrentResourceVersion(context.Context) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev, nil
}

func (m *memEtcd) RequestWatchProgress(context.Context) error          { return nil }
func (m *memEtcd) ReadinessCheck() error                               { return nil }
func (m *memEtcd) EnableResourceSizeEstimation(storage.KeysFunc) error { return nil }
func (m *memEtcd) CompactRevision() int64                              { return 0 }
func (m *memEtcd) Stats(context.Context) (storage.Stats, error)        { return storage.Stats{}, nil }
func (m *memEtcd) Delete(context.Context, string, runtime.Object, *storage.Preconditions, storage.ValidateObjectFunc, runtime.Object, storage.DeleteOptions) error {
	return fmt.Errorf("not supported by memEtcd")
}

// sharedLimits are what the test's transform gives every database whose
// limits have their figures.
var sharedLimits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}

func shareLimits(obj runtime.Object) {
	if db, ok := obj.(*example.MyDatabase); ok && apiequality.Semantic.DeepEqual(db.Spec.Resources.Limits, sharedLimits) {
		db.Spec.Resources.Limits = sharedLimits
	}
}

func sameList(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func testDB(name string) *example.MyDatabase {
	return &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: example.MyDatabaseSpec{Engine: example.EngineMySQL, Replicas: 1, StorageSize: resource.MustParse("1Gi"),
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
	}
}

// TestTransformingCacherSharesOnlyInTheCache runs the cacher of the
// generic registry over memEtcd through storageWithTransformingCacher: the
// cache's objects are transformed, whether they came from its first list or
// its watch; reads served by etcd are not; an update starts from an object
// that shares nothing with the cache, so writing it in place (as a
// strategy, an admission plugin or a defaulter may) leaves every other
// cached object as it was.
func TestTransformingCacherSharesOnlyInTheCache(t *testing.T) {
	etcd := newMemEtcd()
	interner := NewMetadataInterner()
	ctx := context.Background()
	// One object exists before the cacher starts: it reaches the cache
	// with the cacher's first list (or initial events), the others through
	// its watch.
	if err := etcd.Create(ctx, "/mydatabases/ns/listed", managedDB("listed"), &example.MyDatabase{}, 0); err != nil {
		t.Fatal(err)
	}
	decorate := storageWithTransformingCacher(func(*storagebackend.ConfigForResource, func() runtime.Object, func() runtime.Object, string) (storage.Interface, factory.DestroyFunc, error) {
		return etcd, func() {}, nil
	}, func(obj runtime.Object) {
		shareLimits(obj)
		interner.Intern(obj)
	})
	config := &storagebackend.ConfigForResource{GroupResource: example.Resource("mydatabases"), Config: storagebackend.Config{Codec: etcd.codec,
		EventsHistoryWindow: cacherstorage.DefaultEventFreshDuration}}
	s, destroy, err := decorate(config, "/mydatabases",
		func(obj runtime.Object) (string, error) {
			return genericregistry.NamespaceKeyFunc(genericContext(obj), "/mydatabases", obj.(metav1.Object).GetName())
		},
		func() runtime.Object { return &example.MyDatabase{} }, func() runtime.Object { return &example.MyDatabaseList{} },
		storage.DefaultNamespaceScopedAttr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer destroy()
	cached := func(name string) *example.MyDatabase {
		t.Helper()
		rev, _ := etcd.GetCurrentResourceVersion(ctx)
		db := &example.MyDatabase{}
		// A resourceVersion is what makes the delegator read the cache.
		if err := s.Get(ctx, "/mydatabases/ns/"+name, storage.GetOptions{ResourceVersion: strconv.FormatUint(rev, 10)}, db); err != nil {
			t.Fatal(err)
		}
		return db
	}
	// Until the cache is ready, the delegator reads etcd.
	deadline := time.Now().Add(10 * time.Second)
	for !sameList(cached("listed").Spec.Resources.Limits, sharedLimits) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for _, name := range []string{"a", "b"} {
		if err := s.Create(ctx, "/mydatabases/ns/"+name, managedDB(name), &example.MyDatabase{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"listed", "a", "b"} {
		if !sameList(cached(name).Spec.Resources.Limits, sharedLimits) {
			t.Errorf("cached %s does not share the limits", name)
		}
	}
	fromEtcd := &example.MyDatabase{}
	if err := s.Get(ctx, "/mydatabases/ns/a", storage.GetOptions{}, fromEtcd); err != nil {
		t.Fatal(err)
	}
	if sameList(fromEtcd.Spec.Resources.Limits, sharedLimits) {
		t.Errorf("a read served by etcd shares the cache's limits")
	}

	if cached("a").ManagedFields[0].FieldsV1 != cached("b").ManagedFields[0].FieldsV1 {
		t.Errorf("cached a and b do not share their field sets")
	}
	wantFields := string(cached("b").ManagedFields[0].FieldsV1.Raw)

	// Update a, writing its existing object in place.
	err = s.GuaranteedUpdate(ctx, "/mydatabases/ns/a", &example.MyDatabase{}, false, nil, func(existing runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		db := existing.(*example.MyDatabase)
		db.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("8")
		db.Spec.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("8Gi")
		db.ManagedFields[0].FieldsV1.Raw[2] = 'X'
		db.Labels["filler"] = "written"
		return db, nil, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(etcd.updated) != 1 {
		t.Fatalf("%d updates reached etcd, want 1", len(etcd.updated))
	}
	if sameList(etcd.updated[0].(*example.MyDatabase).Spec.Resources.Limits, sharedLimits) {
		t.Errorf("the update started from the cache's shared limits")
	}
	want := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if !apiequality.Semantic.DeepEqual(sharedLimits, want) {
		t.Fatalf("the update of a changed the shared limits: %v", sharedLimits)
	}
	for _, name := range []string{"listed", "b"} {
		db := cached(name)
		if got := db.Spec.Resources.Limits; !apiequality.Semantic.DeepEqual(got, want) {
			t.Errorf("cached %s has limits %v after the update of a, want %v", name, got, want)
		}
		if got := string(db.ManagedFields[0].FieldsV1.Raw); got != wantFields {
			t.Errorf("cached %s has the field set %s after the update of a, want %s", name, got, wantFields)
		}
		if got := db.Labels["filler"]; got != strings.Repeat("a", 63) {
			t.Errorf("cached %s has the label filler=%s after the update of a", name, got)
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for cached("a").Spec.Resources.Limits.Cpu().String() != "8" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := cached("a").Spec.Resources.Limits; sameList(got, sharedLimits) || got.Cpu().String() != "8" {
		t.Errorf("cached a after its update: limits %v", got)
	}
}

func genericContext(obj runtime.Object) context.Context {
	return genericapirequest.WithNamespace(genericapirequest.NewContext(), obj.(metav1.Object).GetNamespace())
}

// TestTransformCacheInputReplacesOnlyTheCacher: the resource's watch cache
// is replaced, never another resource's, nor storage without a cache.
func TestTransformCacheInputReplacesOnlyTheCacher(t *testing.T) {
	dbs, backups := example.Resource("mydatabases"), example.Resource("mydatabasebackups")
	for _, tc := range []struct {
		name       string
		watchCache bool
		sizes      []string
		resource   schema.GroupResource
		replaced   bool
	}{
		{"cached", true, nil, dbs, true},
		{"cached, another resource's size", true, []string{"mydatabasebackups.example.com#0"}, dbs, true},
		{"another resource", true, nil, backups, false},
		{"no watch cache", false, nil, dbs, false},
		{"no watch cache for the resource", true, []string{"mydatabases.example.com#0"}, dbs, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			etcdOptions := genericoptions.NewEtcdOptions(storagebackend.NewDefaultConfig("/registry", nil))
			etcdOptions.EnableWatchCache = tc.watchCache
			etcdOptions.WatchCacheSizes = tc.sizes
			getter := etcdOptions.CreateRESTOptionsGetter(storageFactory{}, nil)
			plain, err := getter.GetRESTOptions(tc.resource, nil)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := transformCacheInput(getter, map[schema.GroupResource]func(runtime.Object){dbs: shareLimits}).GetRESTOptions(tc.resource, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Unreplaced, the decorator is the same function literal.
			got := reflect.ValueOf(opts.Decorator).Pointer() != reflect.ValueOf(plain.Decorator).Pointer()
			if got != tc.replaced {
				t.Errorf("decorator replaced: %v, want %v", got, tc.replaced)
			}
		})
	}
	if watchCached(fixedOptions{}, dbs) {
		t.Errorf("a getter of unknown options is taken for the watch cache's")
	}
}

// storageFactory configures every resource alike.
type storageFactory struct{}

func (storageFactory) NewConfig(resource schema.GroupResource, _ runtime.Object) (*storagebackend.ConfigForResource, error) {
	return &storagebackend.ConfigForResource{GroupResource: resource}, nil
}
func (storageFactory) ResourcePrefix(resource schema.GroupResource) string { return resource.Resource }
func (storageFactory) Configs() []storagebackend.Config                    { return nil }
func (storageFactory) Backends() []serverstorage.Backend                   { return nil }

type fixedOptions struct{ opts generic.RESTOptions }

func (f fixedOptions) GetRESTOptions(schema.GroupResource, runtime.Object) (generic.RESTOptions, error) {
	return f.opts, nil
}

// TestTransformedWatchStops: a stopped watch whose event nobody reads
// ends its goroutine, which closes the result channel.
func TestTransformedWatchStops(t *testing.T) {
	in := make(chan watch.Event, 2)
	in <- watch.Event{Type: watch.Added, Object: testDB("a")}
	in <- watch.Event{Type: watch.Added, Object: testDB("b")}
	w, err := cacheInput{Interface: fakeWatchStorage{w: watch.NewProxyWatcher(in)}, transform: shareLimits}.Watch(context.Background(), "", storage.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := <-w.ResultChan()
	if !sameList(first.Object.(*example.MyDatabase).Spec.Resources.Limits, sharedLimits) {
		t.Errorf("the watched object was not transformed")
	}
	w.Stop()
	// The second event may have been on its way; the channel closes right
	// after, though the input's never does (a ProxyWatcher's stays open).
	for received := 0; ; received++ {
		select {
		case _, open := <-w.ResultChan():
			if !open {
				return
			}
			if received > 0 {
				t.Errorf("events after the stop")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the result channel did not close after Stop")
		}
	}
}

type fakeWatchStorage struct {
	storage.Interface
	w watch.Interface
}

func (f fakeWatchStorage) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return f.w, nil
}

// TestCacheInputTransformsLists: the cacher's first list (without the
// WatchList feature, or when it falls back) is transformed too.
func TestCacheInputTransformsLists(t *testing.T) {
	etcd := newMemEtcd()
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if err := etcd.Create(ctx, "/mydatabases/ns/"+name, testDB(name), &example.MyDatabase{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	list := &example.MyDatabaseList{}
	if err := (cacheInput{Interface: etcd, transform: shareLimits}).GetList(ctx, "/mydatabases", storage.ListOptions{}, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d items listed, want 2", len(list.Items))
	}
	for _, db := range list.Items {
		if !sameList(db.Spec.Resources.Limits, sharedLimits) {
			t.Errorf("listed %s was not transformed", db.Name)
		}
	}
}
