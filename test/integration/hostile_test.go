package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apiserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/ptr"
)

// Content types of the hostile requests.
const (
	ctJSON      = "application/json"
	ctYAML      = "application/yaml"
	ctProtobuf  = "application/vnd.kubernetes.protobuf"
	ctJSONPatch = "application/json-patch+json"
	ctMerge     = "application/merge-patch+json"
	ctSMP       = "application/strategic-merge-patch+json"
	ctApply     = "application/apply-patch+yaml"
)

// hostileCase is one request that must not change what is stored.
type hostileCase struct {
	name   string
	method string
	// path is relative to the namespace's mydatabases collection: "" is the
	// collection, "victim/scale" a subresource.
	path        string
	query       string
	contentType string
	body        []byte
	// edit, when set, builds the body from the victim as stored (as JSON).
	edit func(obj map[string]any)
	// wantCode is the exact status code.
	wantCode int
	// wantFields must each be among status.details.causes[].field (422).
	wantFields []string
	// wantMessage must be a substring of the Status message.
	wantMessage string
	// check runs extra checks on the answer.
	check func(t *testing.T, res rawResult)
	// altCode is another acceptable code, when a fix may answer either.
	altCode int
	// maxDuration bounds how long the answer may take.
	maxDuration time.Duration
	// bug describes a known server bug or limit the case exposes, and is
	// reported when the case fails.
	bug string
}

// dbBody is a MyDatabase named name with spec (a JSON object).
func dbBody(name, spec string) []byte {
	return []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"` + name + `"},"spec":` + spec + `}`)
}

// intruderBody is a MyDatabase with spec, for creates that must fail.
func intruderBody(spec string) []byte { return dbBody("intruder", spec) }

const hostileOKSpec = `{"engine":"mysql","storageSize":"1Gi"}`

// setJSONPath sets the value at a dotted path of a JSON object, creating maps.
func setJSONPath(obj map[string]any, path string, value any) {
	keys := strings.Split(path, ".")
	m := obj
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = value
}

// editVictim sets dotted paths to values in the victim.
func editVictim(kv ...any) func(map[string]any) {
	return func(obj map[string]any) {
		for i := 0; i+1 < len(kv); i += 2 {
			setJSONPath(obj, kv[i].(string), kv[i+1])
		}
	}
}

func hostileProtobuf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := protobuf.NewSerializer(apiserver.Scheme, apiserver.Scheme).Encode(obj, &b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// protobufEnvelope wraps raw bytes as a protobuf object of apiVersion and
// kind, as the Kubernetes protobuf serializer frames them.
func protobufEnvelope(t *testing.T, apiVersion, kind string, raw []byte) []byte {
	t.Helper()
	u := &runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	data, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), data...)
}

func hostileContinueToken(rv int64, start string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"v":"meta.k8s.io/v1","rv":%d,"start":%q}`, rv, start)))
}

func hostileCases(t *testing.T, ns string) []hostileCase {
	bigAnnotation := strings.Repeat("x", 4<<20)
	nested := func(depth int, open, close string) string {
		return strings.Repeat(open, depth) + strings.Repeat(close, depth)
	}
	var manyOps strings.Builder
	manyOps.WriteString("[")
	for i := 0; i < 10001; i++ {
		if i > 0 {
			manyOps.WriteString(",")
		}
		manyOps.WriteString(`{"op":"test","path":"/kind","value":"MyDatabase"}`)
	}
	manyOps.WriteString("]")
	// Each copy doubles the annotations.
	bomb := []map[string]any{{"op": "add", "path": "/metadata/annotations", "value": map[string]string{"x": strings.Repeat("x", 1000)}}}
	for i := 0; i < 40; i++ {
		bomb = append(bomb, map[string]any{"op": "copy", "from": "/metadata/annotations", "path": fmt.Sprintf("/metadata/annotations/x%d", i)})
	}
	copyBomb, err := json.Marshal(bomb)
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	for i := 0; i < 30000; i++ {
		labels[fmt.Sprintf("k%06d", i)] = strings.Repeat("v", 60)
	}
	manyLabels, err := json.Marshal(map[string]any{"apiVersion": "example.com/v1", "kind": "MyDatabase",
		"metadata": map[string]any{"name": "intruder", "labels": labels}, "spec": map[string]any{"engine": "mysql", "storageSize": "1Gi"}})
	if err != nil {
		t.Fatal(err)
	}

	negative := newMyDatabase("intruder", func(d *examplev1.MyDatabase) { d.Spec.Replicas = ptr.To[int32](-1) })
	negative.APIVersion, negative.Kind = "example.com/v1", "MyDatabase"
	scale := &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "intruder"}, Data: map[string]string{"engine": "mysql"}}
	cmRaw, err := cm.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	scaleBody := func(replicas any, meta string) []byte {
		return []byte(fmt.Sprintf(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"victim"%s},"spec":{"replicas":%v}}`, meta, replicas))
	}
	deleteBody := func(opts string) []byte {
		return []byte(`{"apiVersion":"v1","kind":"DeleteOptions"` + opts + `}`)
	}
	applyBody := func(spec string) []byte {
		return []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: victim\nspec:\n" + spec)
	}
	billionLaughs := "apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: intruder\n  annotations:\n" +
		"    a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n" +
		"    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n" +
		"    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n" +
		"    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n" +
		"    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n" +
		"    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n" +
		"    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n" +
		"    h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n" +
		"    i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]\n" +
		"spec:\n  engine: mysql\n  storageSize: 1Gi\n"

	return []hostileCase{
		// Malformed JSON.
		{name: "json/truncated", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mys`), wantCode: 400},
		{name: "json/string, not an object", method: "POST", contentType: ctJSON, body: []byte(`"MyDatabase"`), wantCode: 400},
		{name: "json/array of objects", method: "POST", contentType: ctJSON, body: []byte("[" + string(intruderBody(hostileOKSpec)) + "]"), wantCode: 400},
		// A null body decodes as an empty object: kube-apiserver does the same.
		{name: "json/null", method: "POST", contentType: ctJSON, body: []byte(`null`), wantCode: 422, wantFields: []string{"metadata.name", "spec.engine"}},
		{name: "json/empty body", method: "POST", contentType: ctJSON, body: nil, wantCode: 400},
		{name: "json/concatenated objects", method: "POST", contentType: ctJSON, body: append(intruderBody(hostileOKSpec), intruderBody(hostileOKSpec)...), wantCode: 400},
		{name: "json/invalid UTF-8 outside a string", method: "POST", contentType: ctJSON, body: []byte("{\xff\xfe}"), wantCode: 400},
		{name: "json/invalid UTF-8 in the name", method: "POST", contentType: ctJSON, body: dbBody("in\xfftruder", hostileOKSpec),
			wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "json/null metadata and spec", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":null,"spec":null}`),
			wantCode: 422, wantFields: []string{"metadata.name", "spec.engine", "spec.storageSize"}},
		{name: "json/null engine", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":null,"storageSize":"1Gi"}`),
			wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "json/null storageSize", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":null}`),
			wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "json/wrong apiVersion", method: "POST", contentType: ctJSON,
			body: []byte(`{"apiVersion":"example.com/v2","kind":"MyDatabase","metadata":{"name":"intruder"},"spec":` + hostileOKSpec + `}`), wantCode: 400},
		{name: "json/core apiVersion", method: "POST", contentType: ctJSON,
			body: []byte(`{"apiVersion":"v1","kind":"MyDatabase","metadata":{"name":"intruder"},"spec":` + hostileOKSpec + `}`), wantCode: 400},
		{name: "json/list kind", method: "POST", contentType: ctJSON,
			body: []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabaseList","items":[]}`), wantCode: 400},

		// Malformed YAML.
		{name: "yaml/unclosed flow mapping", method: "POST", contentType: ctYAML,
			body: []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata: {name: intruder\nspec: [\n"), wantCode: 400},
		{name: "yaml/tab indentation", method: "POST", contentType: ctYAML,
			body: []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n\tname: intruder\n"), wantCode: 400},
		{name: "yaml/sequence, not a mapping", method: "POST", contentType: ctYAML, body: []byte("- apiVersion: example.com/v1\n- kind: MyDatabase\n"), wantCode: 400},
		{name: "yaml/alias bomb", method: "POST", contentType: ctYAML, body: []byte(billionLaughs), wantCode: 400},
		{name: "yaml/deep nesting", method: "POST", contentType: ctYAML,
			body: []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: intruder\nspec:\n  engine: mysql\n  storageSize: 1Gi\n  deep: " + nested(100000, "[", "]") + "\n"), wantCode: 400},
		{name: "yaml/body sent without a content type", method: "POST", body: []byte("apiVersion: example.com/v1\nkind: MyDatabase\n"), wantCode: 400},

		// Malformed protobuf.
		{name: "protobuf/random bytes", method: "POST", contentType: ctProtobuf, body: []byte{0x13, 0x37, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x01}, wantCode: 400},
		{name: "protobuf/magic then a runaway length", method: "POST", contentType: ctProtobuf, body: []byte("k8s\x00\x0a\xff\xff\xff\xff\x0f"), wantCode: 400},
		{name: "protobuf/MyDatabase envelope, garbage raw", method: "POST", contentType: ctProtobuf,
			body: protobufEnvelope(t, "example.com/v1", "MyDatabase", []byte{0x0a, 0xff, 0xff, 0x01, 0x12}), wantCode: 400},
		{name: "protobuf/a ConfigMap", method: "POST", contentType: ctProtobuf, body: protobufEnvelope(t, "v1", "ConfigMap", cmRaw), wantCode: 400},
		{name: "protobuf/a Scale", method: "POST", contentType: ctProtobuf, body: hostileProtobuf(t, scale), wantCode: 400},
		{name: "protobuf/replicas -1", method: "POST", contentType: ctProtobuf, body: hostileProtobuf(t, negative),
			wantCode: 422, wantFields: []string{"spec.replicas"}},

		// Content types the server does not speak.
		{name: "content type/text/plain", method: "POST", contentType: "text/plain", body: intruderBody(hostileOKSpec), wantCode: 415},
		{name: "content type/application/xml", method: "POST", contentType: "application/xml", body: []byte("<MyDatabase/>"), wantCode: 415},
		{name: "content type/unparseable", method: "POST", contentType: "application/json; charset", body: intruderBody(hostileOKSpec), wantCode: 415},
		{name: "content type/json on PATCH", method: "PATCH", path: "victim", contentType: ctJSON, body: []byte(`{"spec":{"replicas":1}}`), wantCode: 415},

		// Strict field validation.
		{name: "strict/unknown spec field", method: "POST", query: "fieldValidation=Strict", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","shards":4}`), wantCode: 400, wantMessage: `unknown field "spec.shards"`},
		{name: "strict/unknown metadata field", method: "POST", query: "fieldValidation=Strict", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","colour":"red"},"spec":` + hostileOKSpec + `}`),
			wantCode: 400, wantMessage: `unknown field "metadata.colour"`},
		{name: "strict/duplicate replicas", method: "POST", query: "fieldValidation=Strict", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","replicas":1,"replicas":2,"storageSize":"1Gi"}`), wantCode: 400, wantMessage: `duplicate field "spec.replicas"`},
		{name: "strict/yaml unknown field", method: "POST", query: "fieldValidation=Strict", contentType: ctYAML,
			body:     []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: intruder\nspec:\n  engine: mysql\n  storageSize: 1Gi\n  backups: daily\n"),
			wantCode: 400, wantMessage: `unknown field "spec.backups"`},
		{name: "strict/yaml duplicate key", method: "POST", query: "fieldValidation=Strict", contentType: ctYAML,
			body:     []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: intruder\nspec:\n  engine: mysql\n  engine: postgres\n  storageSize: 1Gi\n"),
			wantCode: 400, wantMessage: `"engine" already set`},
		{name: "strict/merge patch unknown field", method: "PATCH", path: "victim", query: "fieldValidation=Strict", contentType: ctMerge,
			body: []byte(`{"spec":{"shards":4}}`), wantCode: 422, wantFields: []string{"patch"}, wantMessage: `unknown field "spec.shards"`},
		{name: "strict/json patch adds unknown field", method: "PATCH", path: "victim", query: "fieldValidation=Strict", contentType: ctJSONPatch,
			body: []byte(`[{"op":"add","path":"/spec/shards","value":4}]`), wantCode: 422, wantFields: []string{"patch"}, wantMessage: `unknown field "spec.shards"`},
		// kube-apiserver v1.37.2 answers 500 ("failed to create typed patch object") for ConfigMaps and CRDs; common.ClientUpdate makes it a 400.
		{name: "strict/apply unknown field", method: "PATCH", path: "victim", query: "fieldManager=hostile&fieldValidation=Strict", contentType: ctApply,
			body: applyBody("  engine: mysql\n  storageSize: 50Gi\n  shards: 4\n"), wantCode: 400, wantMessage: "spec.shards"},
		{name: "strict/unknown fieldValidation value", method: "POST", query: "fieldValidation=Paranoid", contentType: ctJSON,
			body: intruderBody(hostileOKSpec), wantCode: 422, wantFields: []string{"fieldValidation"}},

		// Wrong types and bad quantities.
		{name: "types/replicas as a string", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","replicas":"3","storageSize":"1Gi"}`), wantCode: 400},
		{name: "types/replicas 1.5", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","replicas":1.5,"storageSize":"1Gi"}`), wantCode: 400},
		{name: "types/replicas 2^40", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","replicas":1099511627776,"storageSize":"1Gi"}`), wantCode: 400},
		{name: "types/storageSize as a bool", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":true}`), wantCode: 400},
		{name: "types/storageSize as the number 0", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":0}`),
			wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "types/engine as an object", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":{"name":"mysql"},"storageSize":"1Gi"}`), wantCode: 400},
		{name: "types/labels as an array", method: "POST", contentType: ctJSON,
			body: []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","labels":["a"]},"spec":` + hostileOKSpec + `}`), wantCode: 400},
		{name: "types/annotation value as a number", method: "POST", contentType: ctJSON,
			body: []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","annotations":{"a":1}},"spec":` + hostileOKSpec + `}`), wantCode: 400},
		{name: "quantity/50GB", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"50GB"}`), wantCode: 400,
			wantMessage: `spec.storageSize: Invalid value: "50GB": must be a quantity: a number with an optional suffix, such as 50Gi, 512Mi, 1.5G, 500m or 2`},
		{name: "quantity/-1Gi", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"-1Gi"}`),
			wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "quantity/1e1000", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"1e1000"}`),
			wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "quantity/empty string", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":""}`), wantCode: 400,
			wantMessage: `spec.storageSize: Invalid value: "": must be a quantity: a number with an optional suffix, such as 50Gi, 512Mi, 1.5G, 500m or 2`},
		{name: "quantity/cpu limit lots", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","resources":{"limits":{"cpu":"lots"}}}`), wantCode: 400,
			wantMessage: `spec.resources.limits[cpu]: Invalid value: "lots": must be a quantity: a number with an optional suffix, such as 50Gi, 512Mi, 1.5G, 500m or 2`},

		// Size and depth.
		{name: "size/4MiB create", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","annotations":{"a":"` + bigAnnotation + `"}},"spec":` + hostileOKSpec + `}`),
			wantCode: 413},
		{name: "size/4MiB update", method: "PUT", path: "victim", contentType: ctJSON, edit: editVictim("metadata.annotations", map[string]any{"a": bigAnnotation}), wantCode: 413},
		{name: "size/4MiB merge patch", method: "PATCH", path: "victim", contentType: ctMerge,
			body: []byte(`{"metadata":{"annotations":{"a":"` + bigAnnotation + `"}}}`), wantCode: 413},
		{name: "size/2MiB of labels, over etcd's request limit", method: "POST", contentType: ctJSON, body: manyLabels, wantCode: 422,
			wantFields: []string{"metadata.labels"}},
		{name: "size/annotations over 256KiB", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","annotations":{"a":"` + strings.Repeat("x", 300<<10) + `"}},"spec":` + hostileOKSpec + `}`),
			wantCode: 422, wantFields: []string{"metadata.annotations"}},
		{name: "size/json patch of 10001 operations", method: "PATCH", path: "victim", contentType: ctJSONPatch, body: []byte(manyOps.String()), wantCode: 413},
		{name: "depth/100k nested arrays in an unknown field", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","deep":` + nested(100000, "[", "]") + `}`), wantCode: 400},
		{name: "depth/100k nested objects in an unknown field", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","deep":` + nested(100000, `{"a":`, "}") + `}`), wantCode: 400},
		{name: "depth/100k nested arrays in a merge patch", method: "PATCH", path: "victim", contentType: ctMerge,
			body: []byte(`{"spec":{"deep":` + nested(100000, "[", "]") + `}}`), wantCode: 400},
		{name: "depth/100k nested arrays in a json patch value", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"add","path":"/metadata/annotations","value":` + nested(100000, "[", "]") + `}]`), wantCode: 400},

		// Names.
		{name: "name/uppercase", method: "POST", contentType: ctJSON, body: dbBody("Intruder", hostileOKSpec), wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "name/46 characters", method: "POST", contentType: ctJSON, body: dbBody(strings.Repeat("a", 46), hostileOKSpec), wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "name/empty", method: "POST", contentType: ctJSON, body: dbBody("", hostileOKSpec), wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "name/with dots", method: "POST", contentType: ctJSON, body: dbBody("in.tru.der", hostileOKSpec), wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "name/leading digit", method: "POST", contentType: ctJSON, body: dbBody("1ntruder", hostileOKSpec), wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "name/generateName with an underscore", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"generateName":"in_truder-"},"spec":` + hostileOKSpec + `}`),
			wantCode: 422, wantFields: []string{"metadata.generateName"}},
		{name: "name/generateName that generates 46 characters", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"generateName":"` + strings.Repeat("g", 41) + `"},"spec":` + hostileOKSpec + `}`),
			wantCode: 422, wantFields: []string{"metadata.name"}},
		{name: "name/namespace in body differs on create", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","namespace":"elsewhere"},"spec":` + hostileOKSpec + `}`),
			wantCode: 400, wantMessage: "does not match the namespace"},
		{name: "name/name in body differs on update", method: "PUT", path: "victim", contentType: ctJSON, edit: editVictim("metadata.name", "other"),
			wantCode: 400, wantMessage: "does not match the name on the URL"},
		{name: "name/namespace in body differs on update", method: "PUT", path: "victim", contentType: ctJSON, edit: editVictim("metadata.namespace", "elsewhere"),
			wantCode: 400, wantMessage: "does not match the namespace"},
		{name: "name/create over an existing name", method: "POST", contentType: ctJSON, body: dbBody("victim", hostileOKSpec), wantCode: 409},
		{name: "name/POST to an object's URL", method: "POST", path: "victim", contentType: ctJSON, body: dbBody("victim", hostileOKSpec), wantCode: 405},

		// Invalid specs and metadata on create.
		{name: "spec/engine oracle", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"oracle","storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "spec/engine missing", method: "POST", contentType: ctJSON, body: intruderBody(`{"storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "spec/engine in capitals", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"MySQL","storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "spec/mysql 5.7", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","version":"5.7","storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.version"}},
		{name: "spec/postgres 8.4", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"postgres","version":"8.4","storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.version"}},
		{name: "spec/replicas 0", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","replicas":0,"storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "spec/replicas 10", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","replicas":10,"storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "spec/replicas -2147483648", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","replicas":-2147483648,"storageSize":"1Gi"}`), wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "spec/storageSize 0", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"0"}`), wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "spec/storageSize 65Ti", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"65Ti"}`), wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "spec/storageSize missing", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql"}`), wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "spec/storageClassName Fast_SSD", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","storageClassName":"Fast_SSD"}`), wantCode: 422, wantFields: []string{"spec.storageClassName"}},
		{name: "spec/storageClassName empty", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","storageClassName":""}`), wantCode: 422, wantFields: []string{"spec.storageClassName"}},
		{name: "spec/cpu request above limit", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}`), wantCode: 422, wantFields: []string{"spec.resources.requests[cpu]"}},
		{name: "spec/unsupported resource", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","resources":{"limits":{"nvidia.com/gpu":"1"}}}`), wantCode: 422, wantFields: []string{"spec.resources.limits[nvidia.com/gpu]"}},
		{name: "spec/negative memory request", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","resources":{"requests":{"memory":"-1Gi"}}}`), wantCode: 422, wantFields: []string{"spec.resources.requests[memory]"}},
		{name: "spec/resource claims", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","resources":{"claims":[{"name":"gpu"}]}}`), wantCode: 422, wantFields: []string{"spec.resources.claims"}},
		{name: "spec/deletionPolicy Orphan", method: "POST", contentType: ctJSON,
			body: intruderBody(`{"engine":"mysql","storageSize":"1Gi","deletionPolicy":"Orphan"}`), wantCode: 422, wantFields: []string{"spec.deletionPolicy"}},
		{name: "metadata/bad label key", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","labels":{"-bad-":"x"}},"spec":` + hostileOKSpec + `}`),
			wantCode: 422, wantFields: []string{"metadata.labels"}},
		{name: "metadata/bad finalizer", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","finalizers":["not a finalizer"]},"spec":` + hostileOKSpec + `}`),
			wantCode: 422, wantFields: []string{"metadata.finalizers"}},
		{name: "metadata/ownerReference without uid", method: "POST", contentType: ctJSON,
			body:     []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"intruder","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"cm","uid":""}]},"spec":` + hostileOKSpec + `}`),
			wantCode: 422, wantFields: []string{"metadata.ownerReferences[0].uid"}},

		// Updates of the victim.
		{name: "update/stale resourceVersion", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("metadata.resourceVersion", "1", "spec.replicas", 4), wantCode: 409},
		// The generic store answers 500 (strconv.ParseUint) here, as kube-apiserver v1.37.2 does; common.ClientUpdate makes it a 400.
		{name: "update/resourceVersion abc", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("metadata.resourceVersion", "abc", "spec.replicas", 4), wantCode: 400, wantMessage: "resourceVersion"},
		{name: "update/wrong uid", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("metadata.uid", "00000000-0000-0000-0000-000000000000", "spec.replicas", 4), wantCode: 409},
		{name: "update/change engine", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("spec.engine", "postgres", "spec.version", "17"), wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "update/shrink storage", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("spec.storageSize", "10Gi"), wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "update/downgrade version", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("spec.version", "8.0"), wantCode: 422, wantFields: []string{"spec.version"}},
		{name: "update/set storageClassName", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("spec.storageClassName", "fast"), wantCode: 422, wantFields: []string{"spec.storageClassName"}},
		{name: "update/replicas 0", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("spec.replicas", 0), wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "update/empty body", method: "PUT", path: "victim", contentType: ctJSON, body: nil, wantCode: 400},
		{name: "update/a Scale to the main resource", method: "PUT", path: "victim", contentType: ctJSON, body: scaleBody(4, ""), wantCode: 400},
		{name: "update/nonexistent object", method: "PUT", path: "ghost", contentType: ctJSON, body: dbBody("ghost", hostileOKSpec), wantCode: 404},

		// Patches of the victim.
		{name: "patch/json patch changes engine", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"replace","path":"/spec/engine","value":"postgres"}]`), wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "patch/json patch removes storageSize", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"remove","path":"/spec/storageSize"}]`), wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "patch/json patch failing test op", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"test","path":"/spec/replicas","value":7},{"op":"replace","path":"/spec/replicas","value":7}]`), wantCode: 422},
		{name: "patch/json patch not an array", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`{"op":"replace","path":"/spec/replicas","value":2}`), wantCode: 400},
		{name: "patch/json patch unknown op", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"frobnicate","path":"/spec/replicas","value":2}]`), wantCode: 422},
		{name: "patch/json patch removes a missing path", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"remove","path":"/spec/nothing/here"}]`), wantCode: 422},
		{name: "patch/json patch renames the object", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"replace","path":"/metadata/name","value":"renamed"}]`), wantCode: 400},
		{name: "patch/merge patch shrinks storage", method: "PATCH", path: "victim", contentType: ctMerge,
			body: []byte(`{"spec":{"storageSize":"1Gi"}}`), wantCode: 422, wantFields: []string{"spec.storageSize"}},
		{name: "patch/merge patch that is an array", method: "PATCH", path: "victim", contentType: ctMerge, body: []byte(`[{"spec":{"replicas":2}}]`), wantCode: 400},
		{name: "patch/merge patch that is not JSON", method: "PATCH", path: "victim", contentType: ctMerge, body: []byte(`{"spec":`), wantCode: 400},
		{name: "patch/merge patch with force", method: "PATCH", path: "victim", query: "force=true", contentType: ctMerge,
			body: []byte(`{"spec":{"replicas":2}}`), wantCode: 422, wantFields: []string{"force"}},
		{name: "patch/strategic merge patch replicas 0", method: "PATCH", path: "victim", contentType: ctSMP,
			body: []byte(`{"spec":{"replicas":0}}`), wantCode: 422, wantFields: []string{"spec.replicas"}},
		// kube-apiserver v1.37.2 answers 500 for Deployments; common.ClientUpdate makes it a 400.
		{name: "patch/strategic merge patch bad directive", method: "PATCH", path: "victim", contentType: ctSMP,
			body: []byte(`{"status":{"conditions":[{"$patch":"frobnicate"}]}}`), wantCode: 400, wantMessage: "frobnicate"},
		// kube-apiserver v1.37.2 answers 500 for Deployments; common.ClientUpdate (in StatusREST) makes it a 400.
		{name: "patch/strategic merge patch list item without its merge key", method: "PATCH", path: "victim/status", contentType: ctSMP,
			body: []byte(`{"status":{"conditions":[{"status":"True"}]}}`), wantCode: 400, wantMessage: "merge key"},
		{name: "patch/merge patch that is null", method: "PATCH", path: "victim", contentType: ctMerge, body: []byte(`null`), wantCode: 400},
		{name: "patch/merge patch that is a string", method: "PATCH", path: "victim", contentType: ctMerge, body: []byte(`"spec"`), wantCode: 400},
		{name: "patch/merge patch with a wrong type", method: "PATCH", path: "victim", contentType: ctMerge,
			body: []byte(`{"spec":{"replicas":"three"}}`), wantCode: 422, wantFields: []string{"patch"}},
		{name: "patch/json patch copy bomb", method: "PATCH", path: "victim", contentType: ctJSONPatch, body: copyBomb, wantCode: 422},
		{name: "patch/apply without fieldManager", method: "PATCH", path: "victim", contentType: ctApply,
			body: applyBody("  engine: mysql\n  storageSize: 50Gi\n"), wantCode: 422, wantFields: []string{"fieldManager"}},
		{name: "patch/apply replicas 0", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body: applyBody("  engine: mysql\n  replicas: 0\n  storageSize: 50Gi\n"), wantCode: 409},
		{name: "patch/apply replicas 0, forced", method: "PATCH", path: "victim", query: "fieldManager=hostile&force=true", contentType: ctApply,
			body: applyBody("  engine: mysql\n  replicas: 0\n  storageSize: 50Gi\n"), wantCode: 422, wantFields: []string{"spec.replicas"}},
		// kube-apiserver v1.37.2 answers 500 for Deployments; common.ClientUpdate makes it a 400.
		{name: "patch/apply replicas as a string", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body: applyBody("  engine: mysql\n  replicas: three\n  storageSize: 50Gi\n"), wantCode: 400, wantMessage: "spec.replicas"},
		{name: "patch/apply with managedFields", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body:     []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: victim\n  managedFields: [{manager: x, operation: Apply}]\nspec:\n  engine: mysql\n"),
			wantCode: 400, wantMessage: "managedFields"},
		{name: "patch/apply changes engine, conflicts", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body: applyBody("  engine: postgres\n  storageSize: 50Gi\n"), wantCode: 409},
		{name: "patch/apply changes engine, forced", method: "PATCH", path: "victim", query: "fieldManager=hostile&force=true", contentType: ctApply,
			body: applyBody("  engine: postgres\n  version: \"17\"\n  storageSize: 50Gi\n"), wantCode: 422, wantFields: []string{"spec.engine"}},
		{name: "patch/apply invalid YAML", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body: []byte("apiVersion: example.com/v1\nkind: [MyDatabase\n"), wantCode: 400},
		{name: "patch/apply without kind", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body: []byte("apiVersion: example.com/v1\nmetadata:\n  name: victim\nspec:\n  replicas: 2\n"), wantCode: 400},
		{name: "patch/nonexistent object", method: "PATCH", path: "ghost", contentType: ctMerge, body: []byte(`{"spec":{"replicas":2}}`), wantCode: 404},

		// Status through the main resource, spec through /status.
		{name: "status/written through the main resource (ignored)", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("status.readyReplicas", 0, "status.endpoint", "evil:1"), wantCode: 200, check: respondsWithVictim},
		{name: "status/merge patched through the main resource (ignored)", method: "PATCH", path: "victim", contentType: ctMerge,
			body: []byte(`{"status":{"readyReplicas":3,"conditions":null}}`), wantCode: 200, check: respondsWithVictim},
		{name: "status/spec written through /status (ignored)", method: "PUT", path: "victim/status", contentType: ctJSON,
			edit: editVictim("spec.replicas", 9, "spec.storageSize", "1Ti"), wantCode: 200, check: respondsWithVictim},
		{name: "status/spec merge patched through /status (ignored)", method: "PATCH", path: "victim/status", contentType: ctMerge,
			body: []byte(`{"spec":{"replicas":9}}`), wantCode: 200, check: respondsWithVictim},
		// Built-in status strategies (Deployment's) and CRDs' both drop labels
		// written through /status; common.KeepMetadata restores them.
		{name: "status/labels written through /status (ignored)", method: "PATCH", path: "victim/status", contentType: ctMerge,
			body: []byte(`{"metadata":{"labels":{"via":"status"}}}`), wantCode: 200, check: respondsWithVictim},
		{name: "update/generation set by the client (ignored)", method: "PUT", path: "victim", contentType: ctJSON,
			edit: editVictim("metadata.generation", 99), wantCode: 200, check: respondsWithVictim},
		{name: "status/readyReplicas above replicas", method: "PATCH", path: "victim/status", contentType: ctMerge,
			body: []byte(`{"status":{"readyReplicas":7}}`), wantCode: 422, wantFields: []string{"status.readyReplicas"}},
		{name: "status/negative observedGeneration", method: "PATCH", path: "victim/status", contentType: ctMerge,
			body: []byte(`{"status":{"observedGeneration":-1}}`), wantCode: 422, wantFields: []string{"status.observedGeneration"}},
		{name: "status/condition with a bad type", method: "PUT", path: "victim/status", contentType: ctJSON,
			edit:     editVictim("status.conditions", []any{map[string]any{"type": "not a type!", "status": "True", "reason": "Why", "lastTransitionTime": "2026-01-01T00:00:00Z"}}),
			wantCode: 422, wantFields: []string{"status.conditions[0].type"}},
		{name: "status/condition status Maybe", method: "PUT", path: "victim/status", contentType: ctJSON,
			edit:     editVictim("status.conditions", []any{map[string]any{"type": "Ready", "status": "Maybe", "reason": "Why", "lastTransitionTime": "2026-01-01T00:00:00Z"}}),
			wantCode: 422, wantFields: []string{"status.conditions[0].status"}},
		{name: "status/condition without reason", method: "PUT", path: "victim/status", contentType: ctJSON,
			edit:     editVictim("status.conditions", []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}}),
			wantCode: 422, wantFields: []string{"status.conditions[0].reason"}},
		{name: "status/nonexistent object", method: "PATCH", path: "ghost/status", contentType: ctMerge, body: []byte(`{"status":{"replicas":1}}`), wantCode: 404},

		// The /scale subresource.
		{name: "scale/replicas -1", method: "PUT", path: "victim/scale", contentType: ctJSON, body: scaleBody(-1, ""), wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "scale/replicas 10", method: "PUT", path: "victim/scale", contentType: ctJSON, body: scaleBody(10, ""), wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "scale/replicas 0 by merge patch", method: "PATCH", path: "victim/scale", contentType: ctMerge, body: []byte(`{"spec":{"replicas":0}}`),
			wantCode: 422, wantFields: []string{"spec.replicas"}},
		{name: "scale/replicas as a string", method: "PUT", path: "victim/scale", contentType: ctJSON, body: scaleBody(`"three"`, ""), wantCode: 400},
		{name: "scale/a MyDatabase body", method: "PUT", path: "victim/scale", contentType: ctJSON, body: dbBody("victim", `{"engine":"mysql","replicas":4,"storageSize":"50Gi"}`), wantCode: 400},
		{name: "scale/wrong uid", method: "PUT", path: "victim/scale", contentType: ctJSON,
			body: scaleBody(4, `,"uid":"00000000-0000-0000-0000-000000000000"`), wantCode: 409},
		{name: "scale/stale resourceVersion", method: "PUT", path: "victim/scale", contentType: ctJSON, body: scaleBody(4, `,"resourceVersion":"1"`), wantCode: 409},
		// Without common.ClientUpdate, the same 500 as update/resourceVersion abc.
		{name: "scale/resourceVersion abc", method: "PUT", path: "victim/scale", contentType: ctJSON, body: scaleBody(4, `,"resourceVersion":"abc"`),
			wantCode: 400, wantMessage: "resourceVersion"},
		{name: "scale/name differs", method: "PUT", path: "victim/scale", contentType: ctJSON,
			body: []byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"other"},"spec":{"replicas":4}}`), wantCode: 400},
		{name: "scale/POST", method: "POST", path: "victim/scale", contentType: ctJSON, body: scaleBody(4, ""), wantCode: 405},
		{name: "scale/nonexistent object", method: "PUT", path: "ghost/scale", contentType: ctJSON,
			body: []byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"ghost"},"spec":{"replicas":4}}`), wantCode: 404},

		// Deletes.
		{name: "delete/wrong uid precondition", method: "DELETE", path: "victim", contentType: ctJSON,
			body: deleteBody(`,"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}`), wantCode: 409},
		{name: "delete/stale resourceVersion precondition", method: "DELETE", path: "victim", contentType: ctJSON,
			body: deleteBody(`,"preconditions":{"resourceVersion":"1"}`), wantCode: 409},
		{name: "delete/garbage body", method: "DELETE", path: "victim", contentType: ctJSON, body: []byte(`{"preconditions":`), wantCode: 400},
		{name: "delete/unknown propagationPolicy", method: "DELETE", path: "victim", contentType: ctJSON,
			body: deleteBody(`,"propagationPolicy":"Bogus"`), wantCode: 422, wantFields: []string{"propagationPolicy"}},
		{name: "delete/unknown dryRun", method: "DELETE", path: "victim", query: "dryRun=Bogus", wantCode: 422, wantFields: []string{"dryRun"}},
		{name: "delete/nonexistent object", method: "DELETE", path: "ghost", wantCode: 404},
		{name: "delete/collection with a bad labelSelector", method: "DELETE", query: "labelSelector=a+in+(", wantCode: 400},
		{name: "delete/dryRun All (nothing deleted)", method: "DELETE", path: "victim", query: "dryRun=All", wantCode: 200},

		// Dry runs.
		{name: "dryRun/All on create (nothing stored)", method: "POST", query: "dryRun=All", contentType: ctJSON, body: intruderBody(hostileOKSpec), wantCode: 201,
			check: func(t *testing.T, res rawResult) {
				var db examplev1.MyDatabase
				if err := json.Unmarshal(res.body, &db); err != nil || db.Name != "intruder" || db.Spec.Version != "9.7" {
					t.Errorf("dry-run create answered %v %+v, want the defaulted intruder", err, db)
				}
			}},
		{name: "dryRun/All on update (nothing stored)", method: "PUT", path: "victim", query: "dryRun=All", contentType: ctJSON, edit: editVictim("spec.replicas", 5), wantCode: 200, check: func(t *testing.T, res rawResult) {
			var db examplev1.MyDatabase
			if err := json.Unmarshal(res.body, &db); err != nil || *db.Spec.Replicas != 5 {
				t.Errorf("dry-run update answered %v %+v, want the victim with 5 replicas", err, db.Spec)
			}
		}},
		{name: "dryRun/unknown value on create", method: "POST", query: "dryRun=Bogus", contentType: ctJSON, body: intruderBody(hostileOKSpec),
			wantCode: 422, wantFields: []string{"dryRun"}},

		// Lists and watches.
		{name: "list/unsupported fieldSelector", method: "GET", query: "fieldSelector=status.replicas%3D3", wantCode: 400},
		{name: "list/fieldSelector without an operator", method: "GET", query: "fieldSelector=metadata.name", wantCode: 400},
		{name: "list/unclosed labelSelector", method: "GET", query: "labelSelector=a+in+(", wantCode: 400},
		{name: "list/invalid labelSelector key", method: "GET", query: "labelSelector=!!!%3Dx", wantCode: 400},
		// kube-apiserver ignores a negative limit too: the whole list, in one page.
		{name: "list/negative limit (ignored)", method: "GET", query: "limit=-1", wantCode: 200, check: func(t *testing.T, res rawResult) {
			var list examplev1.MyDatabaseList
			if err := json.Unmarshal(res.body, &list); err != nil || len(list.Items) != 1 || list.Continue != "" {
				t.Errorf("list with limit=-1: %v, %d items, continue %q; want the victim alone and no continue", err, len(list.Items), list.Continue)
			}
		}},
		{name: "list/limit abc", method: "GET", query: "limit=abc", wantCode: 400},
		{name: "list/garbage continue token", method: "GET", query: "limit=1&continue=garbage!", wantCode: 400},
		{name: "list/continue token escaping the namespace", method: "GET", query: "limit=1&continue=" + hostileContinueToken(2, "../../"+ns+"-other/x"), wantCode: 400},
		{name: "list/continue token of revision 0", method: "GET", query: "limit=1&continue=" + hostileContinueToken(0, "victim"), wantCode: 400},
		{name: "list/continue token of an unknown version", method: "GET", query: "limit=1&continue=" +
			base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v2","rv":2,"start":"victim"}`)), wantCode: 400},
		{name: "list/resourceVersion abc", method: "GET", query: "resourceVersion=abc", wantCode: 400},
		{name: "list/unknown resourceVersionMatch", method: "GET", query: "resourceVersion=0&resourceVersionMatch=Bogus", wantCode: 422, wantFields: []string{"resourceVersionMatch"}},
		{name: "list/resourceVersionMatch without resourceVersion", method: "GET", query: "resourceVersionMatch=Exact", wantCode: 422, wantFields: []string{"resourceVersionMatch"}},
		{name: "list/timeoutSeconds abc", method: "GET", query: "watch=true&timeoutSeconds=abc", wantCode: 400},
		// kube-apiserver v1.37.2 answers 500; common.REST checks the resourceVersion first.
		{name: "watch/resourceVersion abc", method: "GET", query: "watch=true&timeoutSeconds=1&resourceVersion=abc", wantCode: 400, wantMessage: "resourceVersion"},
		// kube-apiserver v1.37.2 answers 500; common.REST checks the resourceVersion first.
		{name: "get/resourceVersion abc", method: "GET", path: "victim", query: "resourceVersion=abc", wantCode: 400, wantMessage: "resourceVersion"},
		// Gets of the subresources check the resourceVersion like the main resource.
		{name: "get/status with resourceVersion abc", method: "GET", path: "victim/status", query: "resourceVersion=abc", wantCode: 400, wantMessage: "resourceVersion"},
		{name: "get/scale with resourceVersion abc", method: "GET", path: "victim/scale", query: "resourceVersion=abc", wantCode: 400, wantMessage: "resourceVersion"},
		// Decoding such a quantity is slow in k8s.io/apimachinery itself
		// (ParseQuantity rounds to nano units through 10^-exponent): mydb
		// refuses quantities beyond their bounds before any decoder parses
		// them, in every body that carries them (docs/security.md).
		{name: "dos/storageSize -1e-16000000", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"-1e-16000000"}`),
			wantCode: 400, maxDuration: time.Second, wantMessage: `spec.storageSize: Invalid value: "-1e-16000000": must have a decimal exponent from -1000 to 1000`},
		{name: "dos/storageSize 1e-2147483647 as a number", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":1e-2147483647}`),
			wantCode: 400, maxDuration: time.Second, wantMessage: `spec.storageSize: Invalid value: "1e-2147483647": must have a decimal exponent from -1000 to 1000`},
		{name: "dos/cpu limit of 100000 digits", method: "POST", contentType: ctJSON,
			body:     intruderBody(`{"engine":"mysql","storageSize":"1Gi","resources":{"limits":{"cpu":"` + strings.Repeat("9", 100000) + `"}}}`),
			wantCode: 400, maxDuration: time.Second, wantMessage: "spec.resources.limits[cpu]: Too long: may not be more than 64 bytes"},
		{name: "dos/storageSize 1e-99999999 in yaml", method: "POST", contentType: ctYAML,
			body:     []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata: {name: intruder}\nspec: {engine: mysql, storageSize: \"1e-99999999\"}\n"),
			wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e-99999999 by merge patch", method: "PATCH", path: "victim", contentType: ctMerge,
			body: []byte(`{"spec":{"storageSize":"1e-99999999"}}`), wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e-99999999 by json patch", method: "PATCH", path: "victim", contentType: ctJSONPatch,
			body: []byte(`[{"op":"replace","path":"/spec/storageSize","value":"1e-99999999"}]`), wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e-99999999 by strategic merge patch", method: "PATCH", path: "victim", contentType: ctSMP,
			body: []byte(`{"spec":{"storageSize":"1e-99999999"}}`), wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e-99999999 by apply", method: "PATCH", path: "victim", query: "fieldManager=hostile", contentType: ctApply,
			body:     []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata: {name: victim}\nspec: {storageSize: \"1e-99999999\"}\n"),
			wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e-99999999 in protobuf", method: "POST", contentType: ctProtobuf,
			body: protobufEnvelope(t, "example.com/v1", "MyDatabase", protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
				protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType),
					protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("1e-99999999"))))),
			wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e-99999999 by status update", method: "PUT", path: "victim/status", contentType: ctJSON,
			edit: editVictim("spec.storageSize", "1e-99999999"), wantCode: 400, maxDuration: time.Second, wantMessage: "spec.storageSize: Invalid value"},
		{name: "dos/storageSize 1e16000000", method: "POST", contentType: ctJSON, body: intruderBody(`{"engine":"mysql","storageSize":"1e16000000"}`),
			wantCode: 400, altCode: 422, maxDuration: time.Second},
	}
}

// respondsWithVictim checks that an accepted request that must change
// nothing answers with the victim as stored: same spec, status and labels.
func respondsWithVictim(t *testing.T, res rawResult) {
	t.Helper()
	var got examplev1.MyDatabase
	if err := json.Unmarshal(res.body, &got); err != nil {
		t.Fatal(err)
	}
	stored := do(t, http.MethodGet, dbPath(got.Namespace, "victim"), "", nil)
	var want examplev1.MyDatabase
	if err := json.Unmarshal(stored.body, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("answered spec differs from the stored one (-stored +answered):\n%s", diff)
	}
	if diff := cmp.Diff(want.Status, got.Status); diff != "" {
		t.Errorf("answered status differs from the stored one (-stored +answered):\n%s", diff)
	}
	if diff := cmp.Diff(want.Labels, got.Labels); diff != "" || got.Generation != want.Generation {
		t.Errorf("answered labels or generation differ from the stored ones (-stored +answered):\n%s\ngeneration %d, stored %d", diff, got.Generation, want.Generation)
	}
}

// hostileState is what the test namespace holds in etcd and what the API
// says of the victim.
type hostileState struct {
	keys   map[string]int64 // etcd key -> mod revision
	victim examplev1.MyDatabase
}

// TestHostileRequests sends malformed, invalid and malicious requests to
// the server. Each must get its exact 4xx answer, with the field paths or
// message it names, and none a 5xx; after each, etcd must hold exactly what
// it held before: the victim, at the same revision, and nothing else. The
// few requests that are accepted (status sent to the main resource, dry
// runs, ...) must leave the store unchanged as well. A case's bug, if any,
// names a known limit it runs into, and is reported when the case fails.
func TestHostileRequests(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	dbs := newClient(t).ExampleV1().MyDatabases(ns)

	victim, err := dbs.Create(ctx, newMyDatabase("victim"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	victim.Status = examplev1.MyDatabaseStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 2, Endpoint: "victim." + ns + ".svc:3306",
		Selector: "app=victim", Conditions: []metav1.Condition{{Type: examplev1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "ReplicasNotReady", Message: "2 of 3 replicas are ready", LastTransitionTime: metav1.Now()}}}
	if _, err := dbs.UpdateStatus(ctx, victim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	etcdClient, err := etcd.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer etcdClient.Close()
	prefix := server.EtcdPrefix + "/example.com/mydatabases/" + ns + "/"
	state := func(t *testing.T) hostileState {
		t.Helper()
		resp, err := etcdClient.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		s := hostileState{keys: map[string]int64{}}
		for _, kv := range resp.Kvs {
			s.keys[strings.TrimPrefix(string(kv.Key), prefix)] = kv.ModRevision
		}
		res := do(t, http.MethodGet, dbPath(ns, "victim"), "", nil)
		if res.code != http.StatusOK {
			t.Fatalf("getting the victim: %d %s", res.code, res.body)
		}
		if err := json.Unmarshal(res.body, &s.victim); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := state(t)
	if len(before.keys) != 1 {
		t.Fatalf("namespace holds %v, want the victim alone", before.keys)
	}

	cases := hostileCases(t, ns)
	type row struct {
		name, method string
		code, want   int
		failed       bool
	}
	var rows []row
	bad := 0
	for _, tc := range cases {
		if tc.wantCode >= 400 {
			bad++
		}
		var r row
		ok := t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if tc.edit != nil {
				res := do(t, http.MethodGet, dbPath(ns, "victim"), "", nil)
				obj := map[string]any{}
				if err := json.Unmarshal(res.body, &obj); err != nil {
					t.Fatal(err)
				}
				tc.edit(obj)
				if body, err = json.Marshal(obj); err != nil {
					t.Fatal(err)
				}
			}
			path := dbPath(ns, "")
			if tc.path != "" {
				path += "/" + tc.path
			}
			if tc.query != "" {
				path += "?" + tc.query
			}
			start := time.Now()
			res, _ := request(t, tc.method, path, tc.contentType, body)
			took := time.Since(start)
			if tc.maxDuration > 0 && took > tc.maxDuration {
				t.Errorf("the answer took %v, want at most %v", took.Round(time.Millisecond), tc.maxDuration)
			}
			if tc.altCode != 0 && res.code == tc.altCode {
				tc.wantCode = tc.altCode
			}
			r = row{name: tc.name, method: tc.method, code: res.code, want: tc.wantCode}
			t.Logf("%d %s", res.code, abbrev(res.body))
			defer func() {
				if tc.bug != "" && t.Failed() {
					t.Errorf("server bug: %s", tc.bug)
				}
			}()
			if res.code >= 500 {
				t.Errorf("server error %d: %s", res.code, abbrev(res.body))
			}
			if res.code != tc.wantCode {
				t.Errorf("code = %d, want %d: %s", res.code, tc.wantCode, abbrev(res.body))
			} else if res.code >= 400 {
				checkHostileStatus(t, res, tc)
			}
			if tc.check != nil {
				tc.check(t, res)
			}

			after := state(t)
			if diff := cmp.Diff(before.keys, after.keys); diff != "" {
				t.Errorf("stored keys changed (-before +after):\n%s", diff)
				// Delete what was stored, so the next cases start clean.
				for key := range after.keys {
					if _, ok := before.keys[key]; !ok {
						do(t, http.MethodDelete, dbPath(ns, key), "", nil)
					}
				}
				after = state(t)
			}
			if diff := cmp.Diff(before.victim, after.victim); diff != "" {
				t.Errorf("victim changed (-before +after):\n%s", diff)
			}
			before = after
		})
		r.failed = !ok
		rows = append(rows, r)
	}

	var table strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&table, "\n  %-60s %-6s %d", r.name, r.method, r.code)
		if r.code != r.want {
			fmt.Fprintf(&table, " (want %d)", r.want)
		}
		if r.failed {
			fmt.Fprintf(&table, " FAIL")
		}
	}
	t.Logf("%d requests, %d of them bad (4xx expected):%s", len(cases), bad, table.String())
	if bad < 50 {
		t.Errorf("only %d bad requests, want at least 50", bad)
	}
}

// checkHostileStatus checks a failure's Status: code, causes and message.
func checkHostileStatus(t *testing.T, res rawResult, tc hostileCase) {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal(res.body, &s); err != nil || s.Kind != "Status" {
		t.Errorf("answer %d is not a Status: %v: %s", res.code, err, abbrev(res.body))
		return
	}
	if int(s.Code) != res.code {
		t.Errorf("status.code = %d, HTTP code %d", s.Code, res.code)
	}
	var fields []string
	if s.Details != nil {
		for _, c := range s.Details.Causes {
			fields = append(fields, c.Field)
		}
	}
	for _, f := range tc.wantFields {
		if !slices.Contains(fields, f) {
			t.Errorf("causes name fields %q, want %q among them; message: %s", fields, f, s.Message)
		}
	}
	if tc.wantMessage != "" && !strings.Contains(s.Message, tc.wantMessage) {
		t.Errorf("message %q does not contain %q", abbrev([]byte(s.Message)), tc.wantMessage)
	}
}

func abbrev(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// TestHostileWarnings covers requests that are not bad but carry something
// the server drops or frowns upon: they succeed with a Warning header.
func TestHostileWarnings(t *testing.T) {
	ns := newNamespace(t)
	tests := []struct {
		name        string
		method      string
		path        string
		query       string
		contentType string
		body        []byte
		wantCode    int
		// wantWarning must be in a Warning header; "" wants none.
		wantWarning string
		// wantStored checks the object as stored afterwards.
		wantStored func(t *testing.T, stored map[string]any)
	}{
		{name: "unknown field, fieldValidation=Warn", method: "POST", query: "fieldValidation=Warn", contentType: ctJSON,
			body: dbBody("warn-unknown", `{"engine":"mysql","storageSize":"1Gi","shards":4}`), wantCode: 201, wantWarning: `unknown field "spec.shards"`,
			wantStored: func(t *testing.T, stored map[string]any) {
				if _, ok := stored["spec"].(map[string]any)["shards"]; ok {
					t.Errorf("the unknown field was stored: %v", stored["spec"])
				}
			}},
		{name: "unknown field, no fieldValidation", method: "POST", contentType: ctJSON,
			body: dbBody("default-unknown", `{"engine":"mysql","storageSize":"1Gi","shards":4}`), wantCode: 201, wantWarning: `unknown field "spec.shards"`},
		{name: "unknown field, fieldValidation=Ignore", method: "POST", query: "fieldValidation=Ignore", contentType: ctJSON,
			body: dbBody("ignore-unknown", `{"engine":"mysql","storageSize":"1Gi","shards":4}`), wantCode: 201, wantWarning: ""},
		{name: "duplicate field, fieldValidation=Warn", method: "POST", query: "fieldValidation=Warn", contentType: ctJSON,
			body: dbBody("warn-duplicate", `{"engine":"mysql","replicas":2,"replicas":5,"storageSize":"1Gi"}`), wantCode: 201, wantWarning: `duplicate field "spec.replicas"`,
			wantStored: func(t *testing.T, stored map[string]any) {
				if r := stored["spec"].(map[string]any)["replicas"]; r != float64(5) {
					t.Errorf("replicas = %v, want the last of the duplicates, 5", r)
				}
			}},
		{name: "yaml unknown field, fieldValidation=Warn", method: "POST", query: "fieldValidation=Warn", contentType: ctYAML,
			body:     []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata:\n  name: warn-yaml\nspec:\n  engine: mysql\n  storageSize: 1Gi\n  backups: daily\n"),
			wantCode: 201, wantWarning: `unknown field "spec.backups"`},
		{name: "merge patch unknown field, fieldValidation=Warn", method: "PATCH", path: "warn-unknown", query: "fieldValidation=Warn", contentType: ctMerge,
			body: []byte(`{"spec":{"shards":8}}`), wantCode: 200, wantWarning: `unknown field "spec.shards"`},
		{name: "deprecated version", method: "POST", contentType: ctJSON,
			body: dbBody("deprecated", `{"engine":"mysql","version":"8.0","storageSize":"1Gi"}`), wantCode: 201, wantWarning: "spec.version: mysql 8.0"},
		{name: "deletionPolicy Delete", method: "POST", contentType: ctJSON,
			body: dbBody("deleting", `{"engine":"mysql","storageSize":"1Gi","deletionPolicy":"Delete"}`), wantCode: 201, wantWarning: "spec.deletionPolicy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := dbPath(ns, "")
			if tc.path != "" {
				path += "/" + tc.path
			}
			if tc.query != "" {
				path += "?" + tc.query
			}
			res, header := request(t, tc.method, path, tc.contentType, tc.body)
			if res.code != tc.wantCode {
				t.Fatalf("code = %d, want %d: %s", res.code, tc.wantCode, abbrev(res.body))
			}
			parsed, errs := utilnet.ParseWarningHeaders(header.Values("Warning"))
			if len(errs) > 0 {
				t.Errorf("malformed Warning headers %q: %v", header.Values("Warning"), errs)
			}
			var texts []string
			for _, w := range parsed {
				texts = append(texts, w.Text)
			}
			warnings := strings.Join(texts, "\n")
			switch {
			case tc.wantWarning == "" && warnings != "":
				t.Errorf("warnings %q, want none", warnings)
			case !strings.Contains(warnings, tc.wantWarning):
				t.Errorf("warnings %q, want one containing %q", warnings, tc.wantWarning)
			}
			if tc.wantStored != nil {
				var stored map[string]any
				if err := json.Unmarshal(res.body, &stored); err != nil {
					t.Fatal(err)
				}
				get := do(t, http.MethodGet, dbPath(ns, stored["metadata"].(map[string]any)["name"].(string)), "", nil)
				if err := json.Unmarshal(get.body, &stored); err != nil {
					t.Fatal(err)
				}
				tc.wantStored(t, stored)
			}
		})
	}
}
