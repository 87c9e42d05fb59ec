package install_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apis/example/validation"
	"github.com/mydb-dev/mydb/pkg/apiserver"
	"github.com/mydb-dev/mydb/pkg/registry/common"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/utils/dump"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

const seedExample = `{
  "apiVersion": "example.com/v1",
  "kind": "MyDatabase",
  "metadata": {"name": "prod-mysql"},
  "spec": {"engine": "mysql", "replicas": 3, "storageSize": "50Gi"}
}`

// decoder is one way the server turns request or storage bytes into the
// internal MyDatabase: a serializer, then conversion and defaulting.
type decoder struct {
	name string
	runtime.Decoder
}

// decoders are the server's decoders to the internal version: every media
// type it accepts, strict and not, and the universal decoder that sniffs.
func decoders(t testing.TB) []decoder {
	var ds []decoder
	for _, info := range apiserver.Codecs.SupportedMediaTypes() {
		ds = append(ds, decoder{info.MediaType, apiserver.Codecs.DecoderToVersion(info.Serializer, example.SchemeGroupVersion)})
		if info.StrictSerializer != nil {
			ds = append(ds, decoder{info.MediaType + " strict", apiserver.Codecs.DecoderToVersion(info.StrictSerializer, example.SchemeGroupVersion)})
		}
	}
	ds = append(ds, decoder{"universal", apiserver.Codecs.UniversalDecoder(example.SchemeGroupVersion)})
	if len(ds) < 6 {
		t.Fatalf("only %d decoders: want JSON, YAML and protobuf, strict and not, and the universal one", len(ds))
	}
	return ds
}

// encoders are the server's encoders from the internal version to v1, by
// media type, as the server answers and stores.
func encoders(t testing.TB) map[string]runtime.Encoder {
	es := map[string]runtime.Encoder{}
	for _, info := range apiserver.Codecs.SupportedMediaTypes() {
		es[info.MediaType] = apiserver.Codecs.EncoderForVersion(info.Serializer, examplev1.SchemeGroupVersion)
	}
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		if es[mt] == nil {
			t.Fatalf("no %s encoder", mt)
		}
	}
	return es
}

func v1Object(mods ...func(*examplev1.MyDatabase)) *examplev1.MyDatabase {
	db := &examplev1.MyDatabase{
		TypeMeta:   metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "MyDatabase"},
		ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql", Namespace: "default", Labels: map[string]string{"team": "payments"}},
		Spec: examplev1.MyDatabaseSpec{
			Engine:      examplev1.EngineMySQL,
			Replicas:    ptr.To[int32](3),
			StorageSize: resource.MustParse("50Gi"),
		},
	}
	for _, mod := range mods {
		mod(db)
	}
	return db
}

func encodeV1(t testing.TB, mediaType string, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(apiserver.Codecs.SupportedMediaTypes(), mediaType)
	if !ok {
		t.Fatalf("no serializer for %s", mediaType)
	}
	var b bytes.Buffer
	if err := info.Serializer.Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hugeExponent matches a decimal exponent of a million or more, such as a
// quantity "1e-2147483647": resource.ParseQuantity builds 10^n as a big.Int
// to round it, and so does validation to compare "1e2147483647" with 64Ti,
// for seconds to minutes of CPU and up to a gigabyte of memory.
var hugeExponent = regexp.MustCompile(`[0-9.][eE][-+]?0*[1-9][0-9]{6,}`)

// slowInput is how long one input may take to decode and validate.
const slowInput = 10 * time.Second

// FuzzDecodeValidate feeds arbitrary bytes to every decoder of the server,
// then validates whatever decodes, on create, on update against a valid old
// object and the other way round, and through /status, and computes its
// warnings. None of it may panic. An object that decodes and validates must
// also encode, and reading back what the server would store must give the
// same object.
func FuzzDecodeValidate(f *testing.F) {
	ds := decoders(f)
	es := encoders(f)

	// The valid old object of updates: the seed example, as stored.
	obj, _, err := apiserver.Codecs.UniversalDecoder(example.SchemeGroupVersion).Decode([]byte(seedExample), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	old := obj.(*example.MyDatabase)
	old.Namespace, old.ResourceVersion, old.UID, old.Generation = "default", "7", "uid-1", 1
	if errs := validation.ValidateMyDatabase(old); len(errs) > 0 {
		f.Fatalf("the seed example is invalid: %v", errs)
	}

	// A few seeds in code; more are in testdata/fuzz/FuzzDecodeValidate.
	f.Add([]byte(seedExample))
	seedYAML, err := yaml.JSONToYAML([]byte(seedExample))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seedYAML)
	f.Add(encodeV1(f, runtime.ContentTypeProtobuf, v1Object()))
	f.Add(encodeV1(f, runtime.ContentTypeProtobuf, v1Object(func(db *examplev1.MyDatabase) {
		db.Spec.Engine, db.Spec.Version, db.Spec.StorageClassName = examplev1.EnginePostgres, "17", ptr.To("fast")
		db.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Ready", LastTransitionTime: metav1.Unix(1, 0)}}
	})))
	// Protobuf carries a time that is present and empty, which JSON
	// cannot: it reads as no time at all.
	f.Add(encodeV1(f, runtime.ContentTypeProtobuf, v1Object(func(db *examplev1.MyDatabase) {
		db.DeletionTimestamp = &metav1.Time{}
		db.Status.LastScheduleTime, db.Status.TargetPrimaryTime = &metav1.Time{}, &metav1.MicroTime{}
	})))
	// Managed fields that do not decode, and some that do with spaces JSON
	// would take out.
	for _, raw := range []string{`x{`, `{ "f:spec" : { "f:replicas": {} } }`} {
		f.Add(encodeV1(f, runtime.ContentTypeProtobuf, v1Object(func(db *examplev1.MyDatabase) {
			db.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "example.com/v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}}
		})))
	}
	// And years RFC 3339 cannot write.
	f.Add(encodeV1(f, runtime.ContentTypeProtobuf, v1Object(func(db *examplev1.MyDatabase) {
		late := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		db.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: late}}}
		db.Status.LastScheduleTime, db.Status.TargetPrimaryTime = &metav1.Time{Time: late}, &metav1.MicroTime{Time: late}
		db.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: "True", Reason: "Ready", LastTransitionTime: metav1.NewTime(late)}}
	})))
	f.Add([]byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"q"},"spec":{"engine":"mysql","storageSize":"1e1000","resources":{"requests":{"cpu":"-1","memory":"0.000000001Ei"},"limits":{"memory":"9223372036854775807Ei"}}}}`))
	f.Add([]byte("apiVersion: example.com/v1\nkind: MyDatabaseList\nitems:\n- metadata: {name: a}\n  spec: {engine: postgres, storageSize: 1Gi, replicas: 9}\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		// Quantities with exponents of millions cost seconds to minutes
		// (a known bug, see hugeExponent): leave them out, so the fuzzer
		// looks for other trouble.
		if hugeExponent.Match(data) {
			t.Skip("a quantity exponent of millions: known to be slow")
		}
		start := time.Now()
		defer func() {
			if took := time.Since(start); took > slowInput {
				t.Errorf("decoding and validating took %v: %q", took, data)
			}
		}()
		into := schema.GroupVersionKind{Group: example.GroupName, Version: "v1", Kind: "MyDatabase"}
		for _, d := range ds {
			// As a request body to the collection: the handler decodes
			// with the URL's kind as default, into a new MyDatabase.
			if obj, _, err := d.Decode(data, &into, &example.MyDatabase{}); err == nil {
				check(t, d.name, obj, old, ds, es)
			}
			// As bytes that say what they are.
			if obj, _, err := d.Decode(data, nil, nil); err == nil {
				check(t, d.name, obj, old, ds, es)
			}
		}
	})
}

func check(t *testing.T, decodedBy string, obj runtime.Object, old *example.MyDatabase, ds []decoder, es map[string]runtime.Encoder) {
	switch o := obj.(type) {
	case *example.MyDatabase:
		validate(o, old)
		if storable(o) {
			storeAndRead(t, decodedBy, asTheFieldManagerWrites(t, o), ds, es)
		}
	case *example.MyDatabaseList:
		for i := range o.Items {
			validate(&o.Items[i], old)
		}
	}
}

func validate(db, old *example.MyDatabase) {
	validation.ValidateMyDatabaseName(db.Name, false)
	validation.ValidateMyDatabaseName(db.GenerateName, true)
	validation.ValidateMyDatabase(db)
	validation.ValidateMyDatabaseUpdate(db, old)
	validation.ValidateMyDatabaseUpdate(old, db)
	validation.ValidateMyDatabaseUpdate(db, db)
	validation.ValidateMyDatabaseStatusUpdate(db, old)
	validation.ValidateMyDatabaseStatusUpdate(old, db)
	validation.Warnings(db, nil)
	validation.Warnings(db, old)
	validation.Warnings(old, db)
}

// storable reports whether the server would store db: it stores only what
// validates, metadata and spec as a create checks them and status as /status
// does (against itself, with the resourceVersion an update carries).
func storable(db *example.MyDatabase) bool {
	if len(validation.ValidateMyDatabase(db)) > 0 {
		return false
	}
	update := db.DeepCopy()
	update.ResourceVersion = "1"
	return len(validation.ValidateMyDatabaseStatusUpdate(update, update)) == 0
}

// asTheFieldManagerWrites returns db with its metadata.managedFields as the
// server's field manager turns them before any write: it decodes them and
// writes them again, and entries that do not decode it replaces with the
// stored object's (none on a create); and the strategy drops zero times
// (common.DropZeroManagedFieldsTimes).
func asTheFieldManagerWrites(t *testing.T, db *example.MyDatabase) *example.MyDatabase {
	db = db.DeepCopy()
	common.DropZeroManagedFieldsTimes(&db.ObjectMeta)
	if managedfields.ValidateManagedFields(db.ManagedFields) != nil {
		db.ManagedFields = nil
		return db
	}
	for _, m := range db.ManagedFields {
		if m.FieldsV1 == nil {
			continue
		}
		var set fieldpath.Set
		if err := set.FromJSON(bytes.NewReader(m.FieldsV1.Raw)); err != nil {
			t.Fatalf("managed fields that decode do not decode: %v", err)
		}
		raw, err := set.ToJSON()
		if err != nil {
			t.Fatalf("managed fields do not encode: %v", err)
		}
		m.FieldsV1.Raw = raw
	}
	return db
}

// storeAndRead encodes db as the server answers (JSON) and stores
// (protobuf), and decodes it back as it reads storage: it must come back
// unchanged, or an object would change each time it is read.
func storeAndRead(t *testing.T, decodedBy string, db *example.MyDatabase, ds []decoder, es map[string]runtime.Encoder) {
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		// Protobuf carries any bytes in a string; JSON replaces invalid
		// UTF-8 with U+FFFD, as in kube-apiserver.
		if mt == runtime.ContentTypeJSON && hasInvalidUTF8(reflect.ValueOf(db)) {
			continue
		}
		var b bytes.Buffer
		if err := es[mt].Encode(db, &b); err != nil {
			t.Errorf("decoded by %s, the object does not encode as %s: %v\n%s", decodedBy, mt, err, asJSON(db))
			continue
		}
		for _, d := range ds {
			if d.name != mt {
				continue
			}
			back, _, err := d.Decode(b.Bytes(), nil, nil)
			if err != nil {
				t.Errorf("decoded by %s and encoded as %s, the object does not decode back: %v\n%s", decodedBy, mt, err, asJSON(db))
				continue
			}
			if !semantic.DeepEqual(db, back) {
				// The whole structure, not JSON: what differs may be
				// something JSON leaves out, such as an empty map.
				t.Errorf("decoded by %s, the object changes through %s (- before, + after):\n%s", decodedBy, mt, cmp.Diff(dump.Pretty(db), dump.Pretty(back)))
			}
		}
	}
}

// hasInvalidUTF8 reports whether a string in v, or a map key, is not UTF-8.
func hasInvalidUTF8(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && hasInvalidUTF8(v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false // bytes, such as FieldsV1.Raw, are not text
		}
		for i := 0; i < v.Len(); i++ {
			if hasInvalidUTF8(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if hasInvalidUTF8(it.Key()) || hasInvalidUTF8(it.Value()) {
				return true
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && hasInvalidUTF8(v.Field(i)) {
				return true
			}
		}
	}
	return false
}

func asJSON(obj runtime.Object) string {
	b, err := json.Marshal(obj)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// semantic is apiequality.Semantic but for managed fields, which it
// compares as the JSON they are: JSON's encoder writes a managed field's
// "&", "<" or ">" as \u0026, \u003c, \u003e (as kube-apiserver's does),
// the same field in other bytes.
var semantic = func() conversion.Equalities {
	e := conversion.EqualitiesOrDie(func(a, b metav1.FieldsV1) bool { return sameJSON(a.Raw, b.Raw) })
	for t, f := range apiequality.Semantic.Equalities {
		if _, ok := e.Equalities[t]; !ok {
			e.Equalities[t] = f
		}
	}
	return e
}()

// sameJSON tells whether a and b are the same JSON value; bytes that are
// no JSON are compared as bytes.
func sameJSON(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}
