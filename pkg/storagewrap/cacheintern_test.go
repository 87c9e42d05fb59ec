package storagewrap

import (
	"bytes"
	"fmt"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/install"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
)

// managedDB is a MyDatabase as a client and a status writer left it.
func managedDB(name string) *example.MyDatabase {
	db := testDB(name)
	db.UID = types.UID("uid-of-" + name)
	db.ResourceVersion = "42"
	db.Labels = map[string]string{"app.kubernetes.io/part-of": "bench", "filler": strings.Repeat("a", 63)}
	db.Annotations = map[string]string{"mydb.example.com/paused": "true", "note": strings.Repeat("x", 600)}
	at := metav1.Unix(1.7e9, 0)
	db.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1", Time: &at, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{".":{},"f:filler":{}}},"f:spec":{"f:engine":{}}}`)}},
		{Manager: "mydb-controller", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1", Time: &at, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:replicas":{}}}`)}, Subresource: "status"},
	}
	return db
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// wireCodecs are the protobuf (stored) and JSON (served) encodings of v1.
func wireCodecs(t testing.TB) (proto, json runtime.Codec) {
	t.Helper()
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := serializer.NewCodecFactory(scheme)
	codec := func(mediaType string) runtime.Codec {
		info, _ := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
		return codecs.CodecForVersions(info.Serializer, info.Serializer, examplev1.SchemeGroupVersion, runtime.InternalGroupVersioner)
	}
	return codec(runtime.ContentTypeProtobuf), codec(runtime.ContentTypeJSON)
}

func TestMetadataInternerSharesRepeatedMetadata(t *testing.T) {
	etcd := newMemEtcd()
	in := NewMetadataInterner()
	var dbs []*example.MyDatabase
	for _, name := range []string{"a", "b"} {
		raw, err := runtime.Encode(etcd.codec, managedDB(name))
		if err != nil {
			t.Fatal(err)
		}
		db := etcd.decode(raw).(*example.MyDatabase)
		in.Intern(db)
		dbs = append(dbs, db)
		// The strings stay shared across a collection: the interner holds
		// their handles.
		goruntime.GC()
	}
	a, b := dbs[0], dbs[1]
	if !sameString(a.Namespace, b.Namespace) {
		t.Errorf("namespaces not shared")
	}
	for k, v := range a.Labels {
		for k2, v2 := range b.Labels {
			if k == k2 && (!sameString(k, k2) || !sameString(v, v2)) {
				t.Errorf("label %s not shared", k)
			}
		}
	}
	if !sameString(a.Annotations["note"], b.Annotations["note"]) {
		t.Errorf("annotation values not shared")
	}
	if reflect.ValueOf(a.Labels).UnsafePointer() == reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Errorf("the label maps themselves are shared; only their strings may be")
	}
	for i := range a.ManagedFields {
		ea, eb := a.ManagedFields[i], b.ManagedFields[i]
		if !sameString(ea.Manager, eb.Manager) || !sameString(ea.APIVersion, eb.APIVersion) || !sameString(ea.FieldsType, eb.FieldsType) {
			t.Errorf("managedFields[%d] strings not shared", i)
		}
		if ea.FieldsV1 != eb.FieldsV1 {
			t.Errorf("managedFields[%d] field sets not shared", i)
		}
		if ea.Time == eb.Time {
			t.Errorf("managedFields[%d] times shared", i)
		}
	}
	if sameString(a.Name, b.Name) || sameString(string(a.UID), string(b.UID)) {
		t.Errorf("per-object strings were touched")
	}
}

// TestMetadataInternerKeepsWhatReadersSee: both encodings of an interned
// object are the bytes of the object as decoded.
func TestMetadataInternerKeepsWhatReadersSee(t *testing.T) {
	proto, json := wireCodecs(t)
	in := NewMetadataInterner()
	bare := testDB("bare")
	empty := testDB("empty")
	empty.Labels, empty.Annotations = map[string]string{}, map[string]string{}
	for round := 0; round < 2; round++ {
		for _, db := range []*example.MyDatabase{managedDB("full"), bare, empty} {
			t.Run(fmt.Sprintf("%s/%d", db.Name, round), func(t *testing.T) {
				raw, err := runtime.Encode(proto, db)
				if err != nil {
					t.Fatal(err)
				}
				decode := func() runtime.Object {
					obj, err := runtime.Decode(proto, raw)
					if err != nil {
						t.Fatal(err)
					}
					return obj
				}
				want, got := decode(), decode()
				in.Intern(got)
				for name, codec := range map[string]runtime.Codec{"protobuf": proto, "json": json} {
					w, err := runtime.Encode(codec, want)
					if err != nil {
						t.Fatal(err)
					}
					g, err := runtime.Encode(codec, got)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(w, g) {
						t.Errorf("%s encoding changed by interning:\n%s\nwant\n%s", name, g, w)
					}
				}
				if !reflect.DeepEqual(want, got) {
					t.Errorf("decoded object changed by interning")
				}
			})
		}
	}
}

func TestMetadataInternerIsBounded(t *testing.T) {
	in := NewMetadataInterner()
	long := strings.Repeat("y", maxInternedLength+1)
	if a, b := in.intern(long), in.intern(strings.Clone(long)); sameString(a, b) {
		t.Errorf("a string beyond %d bytes was interned", maxInternedLength)
	}
	for i := 0; i < maxSharedFieldSets+10; i++ {
		in.fieldSet(&metav1.FieldsV1{Raw: []byte(fmt.Sprintf(`{"f:%d":{}}`, i))})
	}
	if len(in.fieldSets) != maxSharedFieldSets {
		t.Errorf("%d field sets kept, want %d", len(in.fieldSets), maxSharedFieldSets)
	}
	beyond := func() *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(`{"f:beyond":{}}`)} }
	if in.fieldSet(beyond()) == in.fieldSet(beyond()) {
		t.Errorf("a field set beyond the bound was shared")
	}
}
