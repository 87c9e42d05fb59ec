package storagewrap

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/generic"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/storage"
	cacherstorage "k8s.io/apiserver/pkg/storage/cacher"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// transformCacheInput returns getter's options with the watch cache of
// each resource of transforms filled through its transform: every object
// the cache takes in, from its list and its watch of etcd, passes through
// transform first, and nothing else does. Reads served by etcd, and the
// objects that updates and deletes start from, are decoded as before: the
// cache's own objects reach those only through the DeepCopy the cacher
// makes of them (CacheDelegator's GuaranteedUpdate and Delete,
// k8s.io/apiserver/pkg/storage/cacher/delegator.go). So a transform may
// make the cache's objects share values with each other, which every
// reader of the cache must leave as they are anyway (a GET or LIST from the
// cache and every watcher read the same objects).
//
// When a resource has no watch cache (--watch-cache=false, or a size of
// 0 for it), or getter is not the one of the server's etcd options, its
// options are unchanged.
func transformCacheInput(getter generic.RESTOptionsGetter, transforms map[schema.GroupResource]func(runtime.Object)) generic.RESTOptionsGetter {
	return cacheInputOptions{RESTOptionsGetter: getter, transforms: transforms}
}

type cacheInputOptions struct {
	generic.RESTOptionsGetter
	transforms map[schema.GroupResource]func(runtime.Object)
}

func (g cacheInputOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	transform, ok := g.transforms[resource]
	if err != nil || !ok || !watchCached(g.RESTOptionsGetter, resource) {
		return opts, err
	}
	opts.Decorator = storageWithTransformingCacher(generic.NewRawStorage, transform)
	return opts, nil
}

// watchCached says whether getter's options give resource the generic
// registry's cacher (genericregistry.StorageWithCacher): the options of
// --etcd-* and --watch-cache* do unless the watch cache is off, or off for
// the resource (a size of 0). Other getters are not known to. It mirrors
// the choice of k8s.io/apiserver/pkg/server/options/etcd.go
// StorageFactoryRestOptionsFactory.GetRESTOptions.
func watchCached(getter generic.RESTOptionsGetter, resource schema.GroupResource) bool {
	f, ok := getter.(*genericoptions.StorageFactoryRestOptionsFactory)
	if !ok || !f.Options.EnableWatchCache {
		return false
	}
	sizes, err := genericoptions.ParseWatchCacheSizes(f.Options.WatchCacheSizes)
	if err != nil {
		return false
	}
	size, ok := sizes[resource]
	return !ok || size > 0
}

// rawStorage makes a resource's storage of etcd (generic.NewRawStorage).
type rawStorage func(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (storage.Interface, factory.DestroyFunc, error)

// storageWithTransformingCacher is a copy of
// k8s.io/apiserver/pkg/registry/generic/registry/storage_factory.go
// StorageWithCacher (at reviewedAPIServerVersion; keep the two alike when
// it changes), with the cacher reading etcd through cacheInput. It differs
// from upstream's otherwise only in destroying the raw storage when the
// cacher cannot be made, and in not logging that caching is enabled.
func storageWithTransformingCacher(newRawStorage rawStorage, transform func(runtime.Object)) generic.StorageDecorator {
	return func(storageConfig *storagebackend.ConfigForResource, resourcePrefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, getAttrs storage.AttrFunc, triggers storage.IndexerFuncs, indexers *cache.Indexers,
	) (storage.Interface, factory.DestroyFunc, error) {
		s, d, err := newRawStorage(storageConfig, newFunc, newListFunc, resourcePrefix)
		if err != nil {
			return s, d, err
		}
		cacher, err := cacherstorage.NewCacherFromConfig(cacherstorage.Config{
			Storage:             cacheInput{Interface: s, transform: transform},
			Versioner:           storage.APIObjectVersioner{},
			GroupResource:       storageConfig.GroupResource,
			EventsHistoryWindow: storageConfig.EventsHistoryWindow,
			ResourcePrefix:      resourcePrefix,
			KeyFunc:             keyFunc,
			NewFunc:             newFunc,
			NewListFunc:         newListFunc,
			GetAttrsFunc:        getAttrs,
			IndexerFuncs:        triggers,
			Indexers:            indexers,
			Codec:               storageConfig.Codec,
		})
		if err != nil {
			d()
			return nil, func() {}, err
		}
		// The delegator serves what the cache cannot, and every write,
		// from etcd itself: s, not cacheInput.
		delegator := cacherstorage.NewCacheDelegator(cacher, s)
		var once sync.Once
		return delegator, func() {
			once.Do(func() {
				delegator.Stop()
				cacher.Stop()
				d()
			})
		}, nil
	}
}

// cacheInput is etcd's storage as the cacher reads it: the objects its
// list and watch return pass through transform. The cacher uses its storage
// for nothing else that returns objects: it fills itself through the
// listerWatcher of k8s.io/apiserver/pkg/storage/cacher/lister_watcher.go,
// which calls GetList and Watch.
type cacheInput struct {
	storage.Interface
	transform func(runtime.Object)
}

func (s cacheInput) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := s.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	return meta.EachListItem(listObj, func(obj runtime.Object) error {
		s.transform(obj)
		return nil
	})
}

func (s cacheInput) Watch(ctx context.Context, key string, opts storage.ListOptions) (watch.Interface, error) {
	w, err := s.Interface.Watch(ctx, key, opts)
	if err != nil {
		return nil, err
	}
	tw := &transformedWatch{in: w, out: make(chan watch.Event), stop: make(chan struct{})}
	go tw.run(s.transform)
	return tw, nil
}

// transformedWatch passes a watch's events on, their objects transformed.
// Unlike watch.Filter, it gives up an event nobody reads once stopped, so
// a cacher that stops reading (its reflector restarting the watch) leaves
// no goroutine behind.
type transformedWatch struct {
	in       watch.Interface
	out      chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
}

func (w *transformedWatch) run(transform func(runtime.Object)) {
	defer close(w.out)
	for {
		// Once stopped, neither waits: a watch whose result channel stays
		// open after its Stop (as watch.ProxyWatcher's does) would
		// otherwise hold this goroutine, and the reader, for good.
		var e watch.Event
		select {
		case next, open := <-w.in.ResultChan():
			if !open {
				return
			}
			e = next
		case <-w.stop:
			return
		}
		switch e.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			obj := e.Object
			// etcd3 wraps the object with the time it was decoded at, for
			// the cacher (which unwraps it) to measure its latency
			// (timedWatchEvent, k8s.io/apiserver/pkg/storage/etcd3/watcher.go).
			if timed, ok := obj.(storage.WatchEventWithRecordTime); ok {
				obj = timed.Unwrap()
			}
			transform(obj)
		}
		select {
		case w.out <- e:
		case <-w.stop:
			return
		}
	}
}

func (w *transformedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *transformedWatch) Stop() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.in.Stop()
}
