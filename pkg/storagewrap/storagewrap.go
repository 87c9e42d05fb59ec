// Package storagewrap holds mydb's wrappers of k8s.io/apiserver's storage:
// what it adds below the generic registry, between genericregistry.Store
// and etcd, through the RESTOptionsGetter the registry is built with.
// Options is the one way in.
//
// The wrappers copy or rely on code of k8s.io/apiserver beyond its
// documented API, and each names that code. upstream.go lists them, with the
// two places outside this package that do the same (the MyDatabase watch
// cache's resource-list sharer, and the quantity checks of request bodies),
// and the version of k8s.io/apiserver they were read against;
// TestUpstreamReviewed fails when go.mod pins another, with the list of what
// to read again.
package storagewrap

import (
	"github.com/mydb-dev/mydb/pkg/storeguard"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
)

// Config is what varies between the servers Options is used for.
type Config struct {
	// CacheInput names the resources whose watch cache makes its objects
	// share what they repeat, with a transform of the resource's own
	// (nil: none) that each object the cache takes in from etcd passes
	// through before MetadataInterner interns its metadata, e.g.
	// mydatabase.ResourceListSharer's Share.
	CacheInput map[schema.GroupResource]func(runtime.Object)
	// StoreGate, when set, confirms mydb's etcd is the recorded store
	// after every read that may show objects as absent (pkg/storeguard).
	StoreGate storeguard.Gate
}

// Options returns getter's options with mydb's storage wrappers, from the
// inside out:
//
//  1. cache input (cacheinput.go): the watch cache of each resource of
//     cfg.CacheInput is built by a copy of the generic registry's own
//     decorator whose cacher reads etcd through the resource's transform and
//     the metadata interner. It replaces the options' decorator, so it comes
//     first: the wrappers below wrap what it builds, and it can tell whether
//     a resource is watch-cached only from getter itself (the server's etcd
//     options), which a wrapped getter would hide.
//  2. unavailable etcd (etcdunavailable.go): errors of an etcd that could
//     not serve the request become the storage layer's unreachable error
//     (504 with Retry-After), whether the cache or etcd served the read.
//  3. store guard (guarded.go), when cfg.StoreGate is set: a NotFound get,
//     a list or a new watch is confirmed against the store's marker. It
//     sees errors as the unavailable wrapper left them; that wrapper never
//     makes an error a NotFound or a success, nor changes the guard's 503
//     (an API status error), so the two would confirm the same reads in
//     either order; the guard is outermost as it has always been.
func Options(getter generic.RESTOptionsGetter, cfg Config) generic.RESTOptionsGetter {
	if len(cfg.CacheInput) > 0 {
		getter = transformCacheInput(getter, cacheTransforms(cfg.CacheInput))
	}
	getter = wrapStorage(getter, func(s storage.Interface) storage.Interface { return unavailableStorage{Interface: s} })
	if cfg.StoreGate != nil {
		getter = wrapStorage(getter, guarded(cfg.StoreGate))
	}
	return getter
}

// cacheTransforms returns the transform of each resource of input followed
// by the metadata interner's. One interner serves every resource: objects of
// different kinds repeat the same namespaces, labels and managers.
func cacheTransforms(input map[schema.GroupResource]func(runtime.Object)) map[schema.GroupResource]func(runtime.Object) {
	interner := NewMetadataInterner()
	transforms := make(map[schema.GroupResource]func(runtime.Object), len(input))
	for resource, transform := range input {
		transforms[resource] = func(obj runtime.Object) {
			if transform != nil {
				transform(obj)
			}
			interner.Intern(obj)
		}
	}
	return transforms
}
