package storagewrap

import (
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	// maxSharedFieldSets bounds the distinct managedFields field sets a
	// MetadataInterner keeps (a few hundred bytes each); sets beyond them
	// stay each object's own.
	maxSharedFieldSets = 4096
	// recentStrings is how many of the strings it interned last a
	// MetadataInterner holds the handles of (8 bytes each).
	recentStrings = 8192
	// maxInternedLength bounds the strings interned: a longer one (a
	// kubectl.kubernetes.io/last-applied-configuration, say) is seldom
	// another object's, and the handles held would keep it alive.
	maxInternedLength = 1024
)

// MetadataInterner makes the watch cache's objects share the parts of their
// metadata that objects repeat, as a watch cache transform
// (Config.CacheInput): the namespace, the keys and values of labels and
// annotations, and in managedFields the manager, operation, version and
// field type strings and the field sets themselves, which are the same
// bytes for every object a client wrote with the same fields, and for every
// version of one object that only another manager (a status writer)
// changed. Strings are immutable, so sharing them is harmless; labels and
// annotations stay maps of each object's own, of shared strings. A field
// set is shared as it is: the cache's objects are read-only, and leave it
// only deep-copied (which copies the set) for a write (CacheDelegator's
// GuaranteedUpdate and Delete, k8s.io/apiserver/pkg/storage/cacher/delegator.go).
//
// Strings are interned with the unique package, which forgets a string
// once no handle of it is left: the interner holds the handles of the last
// recentStrings strings it interned, so objects decoded close together (a
// burst of creates, the versions of an object) share their strings whatever
// the garbage collector does meanwhile, a string many objects have stays
// shared, and what the handles keep alive is bounded (recentStrings of at
// most maxInternedLength bytes).
type MetadataInterner struct {
	mu        sync.Mutex
	fieldSets map[string]*metav1.FieldsV1
	recent    []unique.Handle[string]
	next      int
}

// NewMetadataInterner returns an interner with no field sets yet.
func NewMetadataInterner() *MetadataInterner {
	return &MetadataInterner{fieldSets: map[string]*metav1.FieldsV1{}, recent: make([]unique.Handle[string], recentStrings)}
}

// Intern replaces the repeated parts of obj's metadata with shared ones.
func (in *MetadataInterner) Intern(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	m.SetNamespace(in.intern(m.GetNamespace()))
	m.SetLabels(in.internMap(m.GetLabels()))
	m.SetAnnotations(in.internMap(m.GetAnnotations()))
	managed := m.GetManagedFields()
	for i := range managed {
		e := &managed[i]
		e.Manager = in.intern(e.Manager)
		e.Operation = metav1.ManagedFieldsOperationType(in.intern(string(e.Operation)))
		e.APIVersion = in.intern(e.APIVersion)
		e.FieldsType = in.intern(e.FieldsType)
		e.Subresource = in.intern(e.Subresource)
		e.FieldsV1 = in.fieldSet(e.FieldsV1)
	}
}

// fieldSet returns the shared field set of f's bytes, f when it is the
// first of them (it is kept from then on) or when the bound is reached.
// The caller holds in.mu.
func (in *MetadataInterner) fieldSet(f *metav1.FieldsV1) *metav1.FieldsV1 {
	if f == nil {
		return nil
	}
	if shared, ok := in.fieldSets[string(f.Raw)]; ok {
		return shared
	}
	if len(in.fieldSets) < maxSharedFieldSets {
		in.fieldSets[string(f.Raw)] = f
	}
	return f
}

func (in *MetadataInterner) intern(s string) string {
	if s == "" || len(s) > maxInternedLength {
		return s
	}
	h := unique.Make(s)
	in.recent[in.next] = h
	in.next = (in.next + 1) % len(in.recent)
	return h.Value()
}

// internMap returns a map of m's keys and values, interned (nil for nil).
func (in *MetadataInterner) internMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[in.intern(k)] = in.intern(v)
	}
	return out
}
