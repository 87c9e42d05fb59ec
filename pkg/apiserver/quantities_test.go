package apiserver

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/endpoints/request"
)

func TestQuantityBound(t *testing.T) {
	for s, bounded := range map[string]bool{
		"1Gi": true, "50Gi": true, "500m": true, "1.5G": true, "2": true, "-1": true,
		"1E": true, "1Ei": true, "3e9": true, "1e1000": true, "1e-1000": true, "+12.5e-3": true,
		"lots":   true, // not a quantity: the parser refuses it, cheaply
		"1e1001": false, "1e-99999999": false, "-1e-16000000": false, "1E-2147483648": false,
		"1e99999999999999999999": false, strings.Repeat("1", 65): false, "0." + strings.Repeat("0", 70) + "1": false,
		strings.Repeat("1", 64): true,
	} {
		if got := quantityBound(s) == ""; got != bounded {
			t.Errorf("%q: within bounds %v, want %v (%s)", s, got, bounded, quantityBound(s))
		}
	}
}

func serializerFor(t testing.TB, mediaType string) runtime.Serializer {
	t.Helper()
	for _, info := range (fieldNamingSerializer{NegotiatedSerializer: Codecs}).SupportedMediaTypes() {
		if info.MediaType == mediaType {
			return info.Serializer
		}
	}
	t.Fatalf("no serializer for %s", mediaType)
	return nil
}

func myDatabaseJSON(storageSize, cpuLimit string) []byte {
	return []byte(`{"apiVersion":"example.com/v1","kind":"MyDatabase","metadata":{"name":"db"},"spec":{"engine":"postgres","storageSize":` +
		storageSize + `,"resources":{"limits":{"cpu":` + cpuLimit + `}}}}`)
}

// protobufMyDatabase is a protobuf MyDatabase body whose spec.storageSize
// and resources.requests[memory] are the strings given, written field by
// field: the typed encoder writes only canonical quantities.
func protobufMyDatabase(storageSize, memoryRequest string) []byte {
	quantity := func(s string) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, quantityStringNumber, protowire.BytesType), []byte(s))
	}
	bytesField := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), v)
	}
	entry := bytesField(bytesField(nil, mapEntryKey, []byte("memory")), mapEntryValue, quantity(memoryRequest))
	spec := bytesField(nil, 1, []byte("postgres"))
	spec = bytesField(spec, specStorageSize, quantity(storageSize))
	spec = bytesField(spec, specResources, bytesField(nil, resourcesRequests, entry))
	obj := bytesField(nil, myDatabaseSpec, spec)
	typeMeta := bytesField(bytesField(nil, 1, []byte("example.com/v1")), typeMetaKind, []byte("MyDatabase"))
	unknown := bytesField(bytesField(nil, unknownTypeMeta, typeMeta), unknownRaw, obj)
	return append(append([]byte{}, protobufMagic...), unknown...)
}

func TestDecodingRefusesUnboundedQuantitiesByField(t *testing.T) {
	for _, tc := range []struct {
		name, mediaType string
		body            []byte
		want            []string
	}{
		{"json string", runtime.ContentTypeJSON, myDatabaseJSON(`"1e-99999999"`, `"1"`),
			[]string{`spec.storageSize: Invalid value: "1e-99999999": must have a decimal exponent from -1000 to 1000`}},
		{"json number", runtime.ContentTypeJSON, myDatabaseJSON(`1e-99999999`, `"1"`), []string{"spec.storageSize: Invalid value"}},
		{"json long mantissa", runtime.ContentTypeJSON, myDatabaseJSON(`"1Gi"`, `"`+strings.Repeat("9", 5000)+`"`),
			[]string{"spec.resources.limits[cpu]: Too long: may not be more than 64 bytes"}},
		{"yaml", runtime.ContentTypeYAML, []byte("apiVersion: example.com/v1\nkind: MyDatabase\nmetadata: {name: db}\nspec:\n  engine: postgres\n  storageSize: \"1e-99999999\"\n"),
			[]string{"spec.storageSize: Invalid value"}},
		{"protobuf", runtime.ContentTypeProtobuf, protobufMyDatabase("1e-99999999", "0."+strings.Repeat("0", 4000)+"1"),
			[]string{`spec.storageSize: Invalid value: "1e-99999999"`, "spec.resources.requests[memory]: Too long"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := serializerFor(t, tc.mediaType).Decode(tc.body, nil, nil)
			if err == nil {
				t.Fatal("decoded")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	// Bounded quantities decode as before, in every media type.
	for mediaType, body := range map[string][]byte{
		runtime.ContentTypeJSON:     myDatabaseJSON(`"1Gi"`, `"1500m"`),
		runtime.ContentTypeProtobuf: protobufMyDatabase("1Gi", "512Mi"),
	} {
		if _, _, err := serializerFor(t, mediaType).Decode(body, nil, nil); err != nil {
			t.Errorf("%s: %v", mediaType, err)
		}
	}
}

func TestPatchesOfUnboundedQuantitiesAreRefused(t *testing.T) {
	var reached []byte
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
	})
	h := WithBoundedQuantities(next, 1<<20)
	patch := func(contentType, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPatch, "/apis/example.com/v1/namespaces/ns/mydatabases/db", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req = req.WithContext(request.WithRequestInfo(req.Context(), &request.RequestInfo{
			IsResourceRequest: true, Verb: "patch", APIGroup: "example.com", APIVersion: "v1", Resource: "mydatabases", Namespace: "ns", Name: "db"}))
		rec := httptest.NewRecorder()
		reached = nil
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, ct := range []string{"application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"} {
		rec := patch(ct, `{"spec":{"storageSize":"1e-99999999"}}`)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "spec.storageSize") || reached != nil {
			t.Errorf("%s: %d %s (handler reached: %v)", ct, rec.Code, rec.Body, reached != nil)
		}
		ok := `{"spec":{"storageSize":"2Gi"}}`
		if rec := patch(ct, ok); rec.Code != http.StatusOK || !bytes.Equal(reached, []byte(ok)) {
			t.Errorf("%s: a bounded patch: %d, handler read %q", ct, rec.Code, reached)
		}
	}
	for _, body := range []string{
		`[{"op":"replace","path":"/spec/storageSize","value":"1e-99999999"}]`,
		`[{"op":"add","path":"/spec/resources/limits/cpu","value":"1e-99999999"}]`,
		`[{"op":"add","path":"/spec","value":{"storageSize":"1e-99999999"}}]`,
	} {
		if rec := patch("application/json-patch+json", body); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "spec.") {
			t.Errorf("json patch %s: %d %s", body, rec.Code, rec.Body)
		}
	}
	// Another resource, or a bounded JSON patch, is passed on.
	if rec := patch("application/json-patch+json", `[{"op":"replace","path":"/spec/storageSize","value":"2Gi"}]`); rec.Code != http.StatusOK {
		t.Errorf("bounded json patch: %d", rec.Code)
	}
}

// BenchmarkDecodeQuantity compares decoding a MyDatabase whose storageSize
// is a normal quantity with one whose exponent would cost ParseQuantity
// tens of seconds: refused before the parser, it is cheaper than the
// normal decode.
func BenchmarkDecodeQuantity(b *testing.B) {
	s := serializerFor(b, runtime.ContentTypeJSON)
	for name, body := range map[string][]byte{
		"normal 50Gi":          myDatabaseJSON(`"50Gi"`, `"1"`),
		"exponent 1e-99999999": myDatabaseJSON(`"1e-99999999"`, `"1"`),
		"mantissa 5000 digits": myDatabaseJSON(`"50Gi"`, `"`+strings.Repeat("9", 5000)+`"`),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, _, _ = s.Decode(body, nil, nil)
			}
		})
	}
	// What the check costs a normal body: the decoder without it.
	for _, info := range Codecs.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			body := myDatabaseJSON(`"50Gi"`, `"1"`)
			b.Run("normal 50Gi without the check", func(b *testing.B) {
				for b.Loop() {
					_, _, _ = info.Serializer.Decode(body, nil, nil)
				}
			})
		}
	}
	pb := serializerFor(b, runtime.ContentTypeProtobuf)
	for name, body := range map[string][]byte{
		"protobuf normal 50Gi":          protobufMyDatabase("50Gi", "1Gi"),
		"protobuf exponent 1e-99999999": protobufMyDatabase("1e-99999999", "1Gi"),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, _, _ = pb.Decode(body, nil, nil)
			}
		})
	}
}

func TestMayHoldUnboundedQuantity(t *testing.T) {
	for body, want := range map[string]bool{
		`{"spec":{"storageSize":"50Gi","resources":{"limits":{"cpu":"1500m"}}}}`: false,
		`{"spec":{"storageSize":"1e-99999999"}}`:                                 true,
		`{"spec":{"storageSize":"1E+5"}}`:                                        true,
		`{"spec":{"storageSize":1e5}}`:                                           true,
		`{"metadata":{"name":"release-2"},"spec":{"engine":"postgres"}}`:         false,
		`{"spec":{"storageSize":"` + strings.Repeat("9", 65) + `"}}`:             true,
		`{"spec":{"storageSize":"` + strings.Repeat("9", 64) + `"}}`:             false,
	} {
		if got := mayHoldUnboundedQuantity([]byte(body)); got != want {
			t.Errorf("%.60s: %v, want %v", body, got, want)
		}
	}
}
