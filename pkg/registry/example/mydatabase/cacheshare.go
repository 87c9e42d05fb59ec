package mydatabase

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
)

// maxSharedResourceLists bounds the distinct resource lists a
// ResourceListSharer keeps (about 1 KiB each); lists beyond them stay each
// object's own.
const maxSharedResourceLists = 1024

// ResourceListSharer makes the MyDatabases of the watch cache share their
// spec.resources limits and requests with every other one of the same
// figures: a decoded resource list is a map of quantities, about 1 KiB,
// twice per object and per version the cache's event window still holds,
// and most databases have the defaults or one of a few sizes. It is the
// watch cache's transform (storagewrap.Config.CacheInput): the cache's
// objects are read-only, and leave it only deep-copied for a write
// (CacheDelegator's GuaranteedUpdate and Delete,
// k8s.io/apiserver/pkg/storage/cacher/delegator.go). It is on the review
// list of pkg/storagewrap/upstream.go.
type ResourceListSharer struct {
	mu    sync.Mutex
	lists map[string]corev1.ResourceList
}

// NewResourceListSharer returns a sharer with no lists yet.
func NewResourceListSharer() *ResourceListSharer {
	return &ResourceListSharer{lists: map[string]corev1.ResourceList{}}
}

// Share replaces the resource lists of a MyDatabase with the shared lists
// of the same figures. Other objects are left as they are.
func (s *ResourceListSharer) Share(obj runtime.Object) {
	db, ok := obj.(*example.MyDatabase)
	if !ok {
		return
	}
	db.Spec.Resources.Limits = s.share(db.Spec.Resources.Limits)
	db.Spec.Resources.Requests = s.share(db.Spec.Resources.Requests)
}

// share returns the shared list equal to l, l itself when it is the first
// of its figures (it is kept from then on), or l when it may not be shared.
func (s *ResourceListSharer) share(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	key, ok := resourceListKey(l)
	if !ok {
		return l
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if shared, ok := s.lists[key]; ok {
		return shared
	}
	if len(s.lists) < maxSharedResourceLists {
		s.lists[key] = l
	}
	return l
}

// resourceListKey says what makes two lists indistinguishable to a reader:
// the same names, and for each the same string (what every encoding writes)
// and format (what arithmetic on a copy writes). It refuses a list with a
// quantity held in an *inf.Dec rather than an int64 (figures beyond int64
// nano units): copies of such a quantity share the Dec, which its
// arithmetic methods write in place, so a reader who added to its own copy
// would change every database's.
func resourceListKey(l corev1.ResourceList) (string, bool) {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		if !int64Backed(q) {
			return "", false
		}
		// Length-prefixed, so that no name or figure can run into the next.
		for _, part := range []string{string(name), q.String(), string(q.Format)} {
			b.WriteString(strconv.Itoa(len(part)))
			b.WriteByte(':')
			b.WriteString(part)
		}
	}
	return b.String(), true
}

// int64Backed says whether q holds its value in an int64: AsDec on a copy
// then builds a new Dec every time, where it returns the held one (the same
// pointer for every copy) otherwise
// (k8s.io/apimachinery/pkg/api/resource/quantity.go Quantity.AsDec).
func int64Backed(q resource.Quantity) bool {
	a, b := q, q
	return a.AsDec() != b.AsDec()
}
