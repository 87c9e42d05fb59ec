package mydatabase

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/storagewrap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
)

// storageCodecs are the encodings mydb stores (protobuf) and serves (JSON,
// protobuf), between v1 and the internal version the registry works on.
type storageCodecs struct {
	proto, json k8sruntime.Codec
}

func newStorageCodecs(t testing.TB) storageCodecs {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	codec := func(mediaType string) k8sruntime.Codec {
		info, ok := k8sruntime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		if !ok {
			t.Fatalf("no serializer for %s", mediaType)
		}
		return codecs.CodecForVersions(info.Serializer, info.Serializer, examplev1.SchemeGroupVersion, k8sruntime.InternalGroupVersioner)
	}
	return storageCodecs{proto: codec(k8sruntime.ContentTypeProtobuf), json: codec(k8sruntime.ContentTypeJSON)}
}

// stored is what etcd holds for db: its protobuf encoding.
func (c storageCodecs) stored(t testing.TB, db *example.MyDatabase) []byte {
	t.Helper()
	raw, err := k8sruntime.Encode(c.proto, db)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// decode is what the watch cache takes in: a fresh decoding of raw.
func (c storageCodecs) decode(t testing.TB, raw []byte) *example.MyDatabase {
	t.Helper()
	obj, err := k8sruntime.Decode(c.proto, raw)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*example.MyDatabase)
}

func sameMap(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func withResources(name string, requests, limits corev1.ResourceList) *example.MyDatabase {
	db := benchDB(name)
	db.Spec.Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	return db
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestResourceListSharerSharesEqualFigures(t *testing.T) {
	c := newStorageCodecs(t)
	s := NewResourceListSharer()
	a := c.decode(t, c.stored(t, benchDB("a")))
	b := c.decode(t, c.stored(t, benchDB("b")))
	other := c.decode(t, c.stored(t, withResources("other", list("cpu", "250m", "memory", "512Mi"), list("cpu", "2", "memory", "1Gi"))))
	for _, db := range []*example.MyDatabase{a, b, other} {
		s.Share(db)
	}
	if !sameMap(a.Spec.Resources.Limits, b.Spec.Resources.Limits) || !sameMap(a.Spec.Resources.Requests, b.Spec.Resources.Requests) {
		t.Errorf("two databases of the default resources do not share their lists")
	}
	if !sameMap(other.Spec.Resources.Requests, a.Spec.Resources.Requests) {
		t.Errorf("equal requests beside other limits are not shared")
	}
	if sameMap(other.Spec.Resources.Limits, a.Spec.Resources.Limits) {
		t.Errorf("limits of other figures (cpu 2) were replaced by the default ones: %v", other.Spec.Resources.Limits)
	}
	// Requests of the limits' figures are another list of the same content:
	// they may share, and nothing tells the two apart.
	same := c.decode(t, c.stored(t, withResources("same", list("cpu", "1", "memory", "1Gi"), list("cpu", "1", "memory", "1Gi"))))
	s.Share(same)
	if !sameMap(same.Spec.Resources.Requests, a.Spec.Resources.Limits) {
		t.Errorf("requests of the default limits' figures are not shared with them")
	}
}

// TestResourceListSharerKeepsWhatReadersSee: a database reads back the
// same, byte for byte in both encodings, whichever list it shares, and
// whatever the figures were written as.
func TestResourceListSharerKeepsWhatReadersSee(t *testing.T) {
	c := newStorageCodecs(t)
	s := NewResourceListSharer()
	dbs := []*example.MyDatabase{
		benchDB("defaults"),
		withResources("spelled-otherwise", list("cpu", "0.25", "memory", "536870912"), list("cpu", "1000m", "memory", "1024Mi")),
		withResources("decimal-si", list("cpu", "250m", "memory", "512M"), list("cpu", "1", "memory", "1G")),
		withResources("limits-only", nil, list("memory", "2Gi")),
		withResources("none", nil, nil),
		withResources("empty", corev1.ResourceList{}, corev1.ResourceList{}),
		withResources("zero", list("cpu", "0"), list("cpu", "0", "memory", "0")),
		withResources("extended", list("example.com/gpu", "1"), list("example.com/gpu", "1", "ephemeral-storage", "10Gi")),
		withResources("beyond-int64", list("memory", "123456789012345678901234567890"), list("memory", "1e40")),
	}
	// Each database twice: the second one shares the first's lists.
	for round := 0; round < 2; round++ {
		for _, db := range dbs {
			t.Run(fmt.Sprintf("%s/%d", db.Name, round), func(t *testing.T) {
				raw := c.stored(t, db)
				want := c.decode(t, raw)
				got := c.decode(t, raw)
				s.Share(got)
				for name, codec := range map[string]k8sruntime.Codec{"protobuf": c.proto, "json": c.json} {
					wantBytes, err := k8sruntime.Encode(codec, want)
					if err != nil {
						t.Fatal(err)
					}
					gotBytes, err := k8sruntime.Encode(codec, got)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(wantBytes, gotBytes) {
						t.Errorf("%s encoding changed by sharing:\n%s\nwant\n%s", name, gotBytes, wantBytes)
					}
				}
				if !reflect.DeepEqual(want, got) {
					t.Errorf("decoded database changed by sharing: %v, want %v", got.Spec.Resources, want.Spec.Resources)
				}
			})
		}
	}
}

// TestResourceListSharerRefusesDecQuantities: copies of a quantity beyond
// int64 share its *inf.Dec, which arithmetic writes in place, so such a
// list stays the database's own.
func TestResourceListSharerRefusesDecQuantities(t *testing.T) {
	c := newStorageCodecs(t)
	s := NewResourceListSharer()
	raw := c.stored(t, withResources("big", list("cpu", "1"), list("cpu", "1", "memory", "123456789012345678901234567890")))
	a, b := c.decode(t, raw), c.decode(t, raw)
	s.Share(a)
	s.Share(b)
	if sameMap(a.Spec.Resources.Limits, b.Spec.Resources.Limits) {
		t.Errorf("limits holding a Dec quantity are shared")
	}
	if !sameMap(a.Spec.Resources.Requests, b.Spec.Resources.Requests) {
		t.Errorf("the int64 requests beside them are not shared")
	}
	if !int64Backed(resource.MustParse("250m")) || int64Backed(resource.MustParse("123456789012345678901234567890")) {
		t.Errorf("int64Backed is wrong on 250m or on a 30-digit figure")
	}
}

func TestResourceListSharerIsBounded(t *testing.T) {
	c := newStorageCodecs(t)
	s := NewResourceListSharer()
	for i := 0; i < maxSharedResourceLists+10; i++ {
		s.Share(c.decode(t, c.stored(t, withResources("db", nil, list("memory", fmt.Sprintf("%dMi", i+1))))))
	}
	if len(s.lists) != maxSharedResourceLists {
		t.Errorf("%d lists kept, want at most %d", len(s.lists), maxSharedResourceLists)
	}
	// A list beyond the bound stays its database's own.
	raw := c.stored(t, withResources("db", nil, list("memory", fmt.Sprintf("%dMi", maxSharedResourceLists+5))))
	a, b := c.decode(t, raw), c.decode(t, raw)
	s.Share(a)
	s.Share(b)
	if sameMap(a.Spec.Resources.Limits, b.Spec.Resources.Limits) {
		t.Errorf("a list beyond the bound was shared")
	}
}

// BenchmarkDecodeForWatchCache is what the watch cache holds per
// MyDatabase of the default resources (benchDB: ~1 KiB of labels and
// annotations, a status, and the managedFields of a client and a status
// writer), as decoded from etcd: as decoded, with the resource lists
// shared, and with the metadata interned too. retained-B/op is the heap
// still in use per object after a GC, with b.N objects held. The objects
// are alike but for their own strings (name, uid), as test/bench's are:
// the interned figure is what metadata that repeats across objects costs.
func BenchmarkDecodeForWatchCache(b *testing.B) {
	c := newStorageCodecs(b)
	db := benchDB("db")
	at := metav1.Unix(1.7e9, 0)
	db.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "mydb-bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1", Time: &at, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:bench.mydb.example.com/filler":{}},"f:labels":{".":{},"f:app.kubernetes.io/part-of":{},"f:bench.mydb.example.com/filler1":{},"f:bench.mydb.example.com/filler2":{}}},"f:spec":{"f:engine":{},"f:replicas":{},"f:storageSize":{}}}`)}},
		{Manager: "mydb-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1", Time: &at, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{},"f:endpoint":{},"f:observedGeneration":{},"f:readyReplicas":{},"f:replicas":{}}}`)}, Subresource: "status"},
	}
	raw := c.stored(b, db)
	for _, tc := range []struct {
		name      string
		transform func(s *ResourceListSharer, in *storagewrap.MetadataInterner, obj k8sruntime.Object)
	}{
		{"decoded", func(*ResourceListSharer, *storagewrap.MetadataInterner, k8sruntime.Object) {}},
		{"shared resources", func(s *ResourceListSharer, _ *storagewrap.MetadataInterner, obj k8sruntime.Object) { s.Share(obj) }},
		{"shared resources and metadata", func(s *ResourceListSharer, in *storagewrap.MetadataInterner, obj k8sruntime.Object) {
			s.Share(obj)
			in.Intern(obj)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, in := NewResourceListSharer(), storagewrap.NewMetadataInterner()
			held := make([]*example.MyDatabase, b.N)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range held {
				db := c.decode(b, raw)
				db.Name, db.UID = fmt.Sprintf("db-%d", i), types.UID(fmt.Sprintf("uid-%d", i))
				tc.transform(s, in, db)
				held[i] = db
			}
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "retained-B/op")
			runtime.KeepAlive(held)
		})
	}
}
