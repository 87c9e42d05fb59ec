package storagewrap

// reviewedAPIServerVersion is the version of k8s.io/apiserver (and of
// k8s.io/apimachinery, released with it under the same tag) that every
// entry of upstream was last read against. TestUpstreamReviewed fails when
// go.mod pins another: read each entry's upstream code at the new version,
// change mydb's code where upstream's changed under it, and only then set
// this constant to the new version.
const reviewedAPIServerVersion = "v0.37.2"

// reviewedModules are the modules pinned at reviewedAPIServerVersion.
var reviewedModules = []string{"k8s.io/apiserver", "k8s.io/apimachinery"}

// dependency is a piece of mydb that mirrors or relies on upstream code
// other than through its documented API.
type dependency struct {
	// code names mydb's code and its file, from the module root.
	code, file string
	// upstream is the upstream code, "module/path/file.go Identifier".
	upstream []string
	// relies is what of upstream's behaviour it relies on.
	relies string
}

// upstream is every place mydb reaches into k8s.io/apiserver's internals:
// this package's wrappers, and, outside it, the transform the watch cache
// of MyDatabases is given and the quantity checks of request bodies (a
// serializer wrapper and a handler filter, not storage, so they live with
// the server that installs them, pkg/apiserver).
var upstream = []dependency{
	{
		code: "storageWithTransformingCacher", file: "pkg/storagewrap/cacheinput.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/registry/generic/registry/storage_factory.go StorageWithCacher",
			"k8s.io/apiserver/pkg/storage/cacher/cacher.go NewCacherFromConfig",
			"k8s.io/apiserver/pkg/storage/cacher/delegator.go NewCacheDelegator",
		},
		relies: "a copy of StorageWithCacher but for the cacher's Storage (cacheInput); keep the two alike: " +
			"the cacher's Config, the delegator over etcd's own storage, the destroy function",
	},
	{
		code: "watchCached", file: "pkg/storagewrap/cacheinput.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/server/options/etcd.go StorageFactoryRestOptionsFactory",
			"k8s.io/apiserver/pkg/server/options/etcd.go ParseWatchCacheSizes",
		},
		relies: "the server's etcd options decorate a resource with StorageWithCacher exactly when EnableWatchCache " +
			"is set and WatchCacheSizes gives the resource no size of 0 or less",
	},
	{
		code: "cacheInput, transformedWatch", file: "pkg/storagewrap/cacheinput.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/storage/cacher/lister_watcher.go listerWatcher",
			"k8s.io/apiserver/pkg/storage/cacher/cacher.go NewCacherFromConfig",
			"k8s.io/apiserver/pkg/storage/etcd3/watcher.go timedWatchEvent",
			"k8s.io/apiserver/pkg/storage/interfaces.go WatchEventWithRecordTime",
		},
		relies: "the cacher takes objects from its Storage only through GetList and Watch (its reflector's " +
			"listerWatcher); etcd3 wraps a watched object as a WatchEventWithRecordTime when RecordTimestamps is asked",
	},
	{
		code: "MetadataInterner", file: "pkg/storagewrap/cacheintern.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/storage/cacher/delegator.go GuaranteedUpdate",
			"k8s.io/apiserver/pkg/storage/cacher/delegator.go Delete",
		},
		relies: "the watch cache's objects are read-only: they leave it for a write only deep-copied " +
			"(CacheDelegator's GuaranteedUpdate and Delete), and every other reader leaves them as they are",
	},
	{
		code: "ResourceListSharer", file: "pkg/registry/example/mydatabase/cacheshare.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/storage/cacher/delegator.go GuaranteedUpdate",
			"k8s.io/apiserver/pkg/storage/cacher/delegator.go Delete",
			"k8s.io/apimachinery/pkg/api/resource/quantity.go AsDec",
		},
		relies: "the watch cache's objects are read-only (as for MetadataInterner); Quantity.AsDec returns the " +
			"*inf.Dec a quantity holds, and a new one for a quantity held in an int64 (int64Backed)",
	},
	{
		code: "wrapStorage", file: "pkg/storagewrap/wrap.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/registry/generic/registry/store.go CompleteWithOptions",
			"k8s.io/apiserver/pkg/storage/interfaces.go Interface",
		},
		relies: "the Store builds its storage with RESTOptions.Decorator; the wrappers embed storage.Interface, " +
			"so a method upstream adds to it passes by them unwrapped: check each new one for reads that may " +
			"show objects as absent (guardedStorage) and for etcd's errors (unavailableStorage)",
	},
	{
		code: "unavailableStorage", file: "pkg/storagewrap/etcdunavailable.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/storage/etcd3/store.go Get",
			"k8s.io/apiserver/pkg/storage/errors.go NewUnreachableError",
			"k8s.io/apiserver/pkg/storage/errors/storage.go InterpretCreateError",
		},
		relies: "etcd3's store returns the etcd client's errors as they are (rpctypes, gRPC status), its own as " +
			"*storage.StorageError; the registry answers an unreachable StorageError 504 ServerTimeout with Retry-After",
	},
	{
		code: "guardedStorage", file: "pkg/storagewrap/guarded.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/storage/interfaces.go Interface",
			"k8s.io/apiserver/pkg/storage/errors.go IsNotFound",
			"k8s.io/apiserver/pkg/registry/generic/registry/store.go CompleteWithOptions",
		},
		relies: "the Store's gets, lists and watches reach the storage as Get, GetList and Watch; " +
			"a missing object is a Get's storage NotFound",
	},
	{
		code: "fieldNamingSerializer, WithBoundedQuantities", file: "pkg/apiserver/quantities.go",
		upstream: []string{
			"k8s.io/apiserver/pkg/endpoints/handlers/patch.go jsonPatcher",
			"k8s.io/apiserver/pkg/endpoints/handlers/patch.go smpPatcher",
			"k8s.io/apiserver/pkg/endpoints/handlers/patch.go applyPatcher",
			"k8s.io/apimachinery/pkg/api/resource/quantity.go ParseQuantity",
		},
		relies: "bodies of creates and updates, and the results of JSON and merge patches, are decoded by " +
			"APIGroupInfo.NegotiatedSerializer's serializers; strategic merge and apply patches are converted " +
			"through runtime.DefaultUnstructuredConverter without them; ParseQuantity's cost grows with the exponent",
	},
	{
		code: "protobufQuantityBounds", file: "pkg/apiserver/quantities_protobuf.go",
		upstream: []string{
			"k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go protoEncodingPrefix",
		},
		relies: "a protobuf body is the prefix k8s\\x00 and a runtime.Unknown whose raw bytes are the object",
	},
}
