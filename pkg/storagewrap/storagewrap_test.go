package storagewrap

import (
	"reflect"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/storeguard/storeguardtest"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// TestOptionsChainsTheWrappers: every resource's storage is wrapped, the
// store guard (when there is a gate) around the unavailable etcd's wrapper
// around what the options' decorator built; a getter that is not the
// server's etcd options keeps its decorator even for a resource of
// CacheInput.
func TestOptionsChainsTheWrappers(t *testing.T) {
	built := emptyStorage{}
	getter := fixedOptions{opts: generic.RESTOptions{Decorator: func(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error),
		func() runtime.Object, func() runtime.Object, storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		return built, func() {}, nil
	}}}
	cacheInput := map[schema.GroupResource]func(runtime.Object){example.Resource("mydatabases"): nil}
	gate := &storeguardtest.Gate{}
	for _, tc := range []struct {
		name string
		cfg  Config
		want storage.Interface
	}{
		{"no gate", Config{CacheInput: cacheInput}, unavailableStorage{Interface: built}},
		{"gate", Config{CacheInput: cacheInput, StoreGate: gate}, guardedStorage{Interface: unavailableStorage{Interface: built}, gate: gate}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, resource := range []schema.GroupResource{example.Resource("mydatabases"), example.Resource("mydatabasebackups")} {
				opts, err := Options(getter, tc.cfg).GetRESTOptions(resource, nil)
				if err != nil {
					t.Fatal(err)
				}
				s, _, err := opts.Decorator(nil, "", nil, nil, nil, nil, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(s, tc.want) {
					t.Errorf("%s: storage %#v, want %#v", resource, s, tc.want)
				}
			}
		})
	}
}

// TestCacheTransformsIntern: each resource's own transform runs, then the
// interner, one for every resource.
func TestCacheTransformsIntern(t *testing.T) {
	dbs, backups := example.Resource("mydatabases"), example.Resource("mydatabasebackups")
	var transformed []string
	transforms := cacheTransforms(map[schema.GroupResource]func(runtime.Object){
		dbs:     func(obj runtime.Object) { transformed = append(transformed, obj.(*example.MyDatabase).Name) },
		backups: nil,
	})
	a, b := managedDB("a"), &example.MyDatabaseBackup{}
	// Namespaces of their own bytes, equal.
	a.Namespace, b.Namespace = string([]byte("ns")), string([]byte("ns"))
	transforms[dbs](a)
	transforms[backups](b)
	if !reflect.DeepEqual(transformed, []string{"a"}) {
		t.Errorf("transformed %v, want [a]", transformed)
	}
	if !sameString(a.Namespace, b.Namespace) {
		t.Errorf("the namespaces of a database and a backup are not interned together")
	}
}
