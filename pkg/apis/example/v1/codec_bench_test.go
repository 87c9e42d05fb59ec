package v1

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/utils/ptr"
)

// The micro-benchmarks of the versioned types: defaulting, conversion to
// and from the internal version, and JSON and protobuf encoding of one
// MyDatabase and of a list, on objects shaped like the ones test/bench
// sends (about 1 KiB of JSON). Compare commits with benchstat:
//
//	go test -run '^$' -bench . -count 10 ./pkg/apis/example/v1/ > new.txt

// benchListSize is the number of items of the list benchmarks.
const benchListSize = 100

func benchScheme(b *testing.B) *runtime.Scheme {
	b.Helper()
	s := runtime.NewScheme()
	if err := example.AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	if err := AddToScheme(s); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchMyDatabase is a created and reconciled MyDatabase as mydb stores it:
// defaulted, with a status and the ~1 KiB of labels and annotations the
// harness sends.
func benchMyDatabase(name string) *MyDatabase {
	db := &MyDatabase{
		TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "MyDatabase"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "bench", UID: "9d3c4a4e-5c1e-4a55-9a57-2d4f0a3c1b7e", ResourceVersion: "123456", Generation: 1,
			CreationTimestamp: metav1.Unix(1.7e9, 0),
			Labels: map[string]string{
				"app.kubernetes.io/part-of":      "mydb-bench",
				"bench.mydb.example.com/filler1": strings.Repeat("a", 63),
				"bench.mydb.example.com/filler2": strings.Repeat("b", 63),
			},
			Annotations: map[string]string{"bench.mydb.example.com/filler": strings.Repeat("x", 600)},
		},
		Spec: MyDatabaseSpec{Engine: EngineMySQL, Replicas: ptr.To[int32](3), StorageSize: resource.MustParse("50Gi")},
		Status: MyDatabaseStatus{
			ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, Selector: "app.kubernetes.io/instance=" + name,
			Endpoint: name + ".bench.svc:3306",
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllReplicasReady", ObservedGeneration: 1, LastTransitionTime: metav1.Unix(1.7e9, 0)},
				{Type: "Progressing", Status: metav1.ConditionFalse, Reason: "RolloutComplete", ObservedGeneration: 1, LastTransitionTime: metav1.Unix(1.7e9, 0)},
				{Type: "Degraded", Status: metav1.ConditionFalse, Reason: "AsExpected", ObservedGeneration: 1, LastTransitionTime: metav1.Unix(1.7e9, 0)},
			},
		},
	}
	SetObjectDefaults_MyDatabase(db)
	return db
}

func benchMyDatabaseList() *MyDatabaseList {
	l := &MyDatabaseList{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "MyDatabaseList"}, ListMeta: metav1.ListMeta{ResourceVersion: "123456"}}
	for i := 0; i < benchListSize; i++ {
		l.Items = append(l.Items, *benchMyDatabase(fmt.Sprintf("db-%05d", i)))
		l.Items[i].TypeMeta = metav1.TypeMeta{}
	}
	return l
}

func BenchmarkDefaultMyDatabase(b *testing.B) {
	fresh := &MyDatabase{Spec: MyDatabaseSpec{Engine: EngineMySQL, StorageSize: resource.MustParse("50Gi")}}
	b.ReportAllocs()
	for b.Loop() {
		db := fresh.DeepCopy()
		SetObjectDefaults_MyDatabase(db)
	}
}

func BenchmarkConvertMyDatabaseToInternal(b *testing.B) {
	in := benchMyDatabase("db-00000")
	b.ReportAllocs()
	for b.Loop() {
		var out example.MyDatabase
		if err := Convert_v1_MyDatabase_To_example_MyDatabase(in, &out, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvertMyDatabaseFromInternal(b *testing.B) {
	var in example.MyDatabase
	if err := Convert_v1_MyDatabase_To_example_MyDatabase(benchMyDatabase("db-00000"), &in, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var out MyDatabase
		if err := Convert_example_MyDatabase_To_v1_MyDatabase(&in, &out, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// serializers returns the two wire encodings the server speaks.
func serializers(b *testing.B) map[string]runtime.Serializer {
	s := benchScheme(b)
	return map[string]runtime.Serializer{
		"JSON":     json.NewSerializerWithOptions(json.DefaultMetaFactory, s, s, json.SerializerOptions{}),
		"Protobuf": protobuf.NewSerializer(s, s),
	}
}

func benchEncode(b *testing.B, obj runtime.Object) {
	for _, name := range []string{"JSON", "Protobuf"} {
		ser := serializers(b)[name]
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				if err := ser.Encode(obj, &buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes/op-encoded")
		})
	}
}

func benchDecode(b *testing.B, obj runtime.Object, into func() runtime.Object) {
	for _, name := range []string{"JSON", "Protobuf"} {
		ser := serializers(b)[name]
		var buf bytes.Buffer
		if err := ser.Encode(obj, &buf); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, _, err := ser.Decode(data, nil, into()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeMyDatabase(b *testing.B) { benchEncode(b, benchMyDatabase("db-00000")) }

func BenchmarkDecodeMyDatabase(b *testing.B) {
	benchDecode(b, benchMyDatabase("db-00000"), func() runtime.Object { return &MyDatabase{} })
}

func BenchmarkEncodeMyDatabaseList(b *testing.B) { benchEncode(b, benchMyDatabaseList()) }

func BenchmarkDecodeMyDatabaseList(b *testing.B) {
	benchDecode(b, benchMyDatabaseList(), func() runtime.Object { return &MyDatabaseList{} })
}

// BenchmarkDecodeToInternal is what a create costs before the strategy:
// decode the request body, default it, convert it to the internal version.
func BenchmarkDecodeToInternal(b *testing.B) {
	s := benchScheme(b)
	codecs := serializer.NewCodecFactory(s)
	body := benchMyDatabase("db-00000")
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeJSON && info.MediaType != runtime.ContentTypeProtobuf {
			continue
		}
		var buf bytes.Buffer
		if err := info.Serializer.Encode(body, &buf); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		dec := codecs.DecoderToVersion(info.Serializer, example.SchemeGroupVersion)
		b.Run(map[string]string{runtime.ContentTypeJSON: "JSON", runtime.ContentTypeProtobuf: "Protobuf"}[info.MediaType], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _, err := dec.Decode(data, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := obj.(*example.MyDatabase); !ok {
					b.Fatalf("decoded a %T", obj)
				}
			}
		})
	}
}
