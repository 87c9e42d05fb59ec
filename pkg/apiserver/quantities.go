package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"sigs.k8s.io/yaml"
)

// A quantity that does not parse fails the decoding of the whole object, in
// resource.Quantity's UnmarshalJSON, with an error that names neither the
// field nor a valid value ("quantities must match the regular expression
// ..."). The API group's serializers for JSON and YAML look again at a body
// they could not decode, and when a quantity of a MyDatabase's spec is what
// failed, answer with its field path and what a quantity looks like, the way
// validation errors are written.

// quantityDetail is what a valid value looks like.
const quantityDetail = "must be a quantity: a number with an optional suffix, such as 50Gi, 512Mi, 1.5G, 500m or 2"

// Parsing a quantity is not bounded by its length: resource.ParseQuantity
// rounds to nano units by building 10^-exponent, so "1e-99999999" (11
// bytes) costs tens of seconds of CPU, and a mantissa of thousands of
// digits costs milliseconds in every later String(). Every quantity of a
// body is checked for these bounds before the body reaches a decoder
// (boundedQuantities, in the serializers of this file and in
// WithBoundedQuantities for the patches decoded without them). No real
// quantity comes near them: validation refuses a storageSize beyond 1e30
// bytes, and anything below 1n rounds up to 1n.
const (
	// maxQuantityLength bounds a quantity's string.
	maxQuantityLength = 64
	// maxQuantityExponent bounds the absolute value of a quantity's decimal
	// exponent (the e or E suffix).
	maxQuantityExponent = 1000
)

// quantityBound says how s exceeds the bounds, or "" when it does not.
// It reads only the decimal exponent's digits; a string that is not a
// quantity at all is within bounds here and refused by the parser.
func quantityBound(s string) string {
	if len(s) > maxQuantityLength {
		return fmt.Sprintf("may not be more than %d bytes", maxQuantityLength)
	}
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i >= len(s) || (s[i] != 'e' && s[i] != 'E') {
		return ""
	}
	exp, err := strconv.Atoi(s[i+1:])
	if err != nil {
		// "1E" and "1Ei" are suffixes, not exponents; too many digits
		// for an int is out of range.
		if numErr, ok := err.(*strconv.NumError); ok && numErr.Err == strconv.ErrRange {
			return fmt.Sprintf("must have a decimal exponent from -%d to %d", maxQuantityExponent, maxQuantityExponent)
		}
		return ""
	}
	if exp < -maxQuantityExponent || exp > maxQuantityExponent {
		return fmt.Sprintf("must have a decimal exponent from -%d to %d", maxQuantityExponent, maxQuantityExponent)
	}
	return ""
}

// fieldNamingSerializer wraps the API group's serializers. It relies on
// which bodies k8s.io/apiserver decodes through them: creates' and updates',
// and the results of JSON and merge patches, but not strategic merge and
// apply patches (k8s.io/apiserver/pkg/endpoints/handlers/patch.go
// jsonPatcher, smpPatcher, applyPatcher), which WithBoundedQuantities checks
// instead. It is on the review list of pkg/storagewrap/upstream.go.
type fieldNamingSerializer struct {
	runtime.NegotiatedSerializer
}

// SupportedMediaTypes are the wrapped ones, JSON's and YAML's decoders
// naming the quantity fields that did not parse.
func (s fieldNamingSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := s.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, 0, len(infos))
	for _, info := range infos {
		switch info.MediaType {
		case runtime.ContentTypeProtobuf:
			if info.Serializer != nil {
				info.Serializer = protobufQuantityBounds{Serializer: info.Serializer}
			}
			if info.StrictSerializer != nil {
				info.StrictSerializer = protobufQuantityBounds{Serializer: info.StrictSerializer}
			}
		case runtime.ContentTypeJSON, runtime.ContentTypeYAML:
			yamlBody := info.MediaType == runtime.ContentTypeYAML
			if info.Serializer != nil {
				info.Serializer = quantityErrors{Serializer: info.Serializer, yaml: yamlBody}
			}
			if info.StrictSerializer != nil {
				info.StrictSerializer = quantityErrors{Serializer: info.StrictSerializer, yaml: yamlBody}
			}
		}
		out = append(out, info)
	}
	return out
}

type quantityErrors struct {
	runtime.Serializer
	yaml bool
}

func (s quantityErrors) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if mayHoldUnboundedQuantity(data) {
		if errs := quantityFields(data, s.yaml, boundProblem); len(errs) > 0 {
			return nil, nil, errs.ToAggregate()
		}
	}
	obj, gvk, err := s.Serializer.Decode(data, defaults, into)
	if err == nil {
		return obj, gvk, nil
	}
	if errs := quantityFields(data, s.yaml, parseProblem); len(errs) > 0 {
		return obj, gvk, errs.ToAggregate()
	}
	return obj, gvk, err
}

// mayHoldUnboundedQuantity tells, in one pass over body, whether it can
// hold a quantity beyond the bounds: a run of more than maxQuantityLength
// digits, or a decimal exponent (a digit or dot, e or E, then a sign or a
// digit). Most bodies have neither, and skip quantityFields' parse.
func mayHoldUnboundedQuantity(body []byte) bool {
	isNum := func(c byte) bool { return c >= '0' && c <= '9' || c == '.' }
	run := 0
	for i, c := range body {
		switch {
		case isNum(c):
			if run++; run > maxQuantityLength {
				return true
			}
			continue
		case (c == 'e' || c == 'E') && run > 0 && i+1 < len(body) && (isNum(body[i+1]) || body[i+1] == '-' || body[i+1] == '+'):
			return true
		}
		run = 0
	}
	return false
}

// boundProblem is a quantity beyond the bounds.
func boundProblem(path *field.Path, s string) *field.Error {
	if detail := quantityBound(s); detail != "" {
		if len(s) > maxQuantityLength {
			return field.TooLong(path, "", maxQuantityLength)
		}
		return field.Invalid(path, s, detail)
	}
	return nil
}

// parseProblem is a quantity that does not parse (bounded ones only reach it).
func parseProblem(path *field.Path, s string) *field.Error {
	if _, err := resource.ParseQuantity(s); err != nil {
		return field.Invalid(path, s, quantityDetail)
	}
	return nil
}

// quantityFields runs problem on every quantity string of a MyDatabase's
// spec in body (a JSON or YAML object, or a merge patch of one) and
// returns the problems by field path.
func quantityFields(body []byte, isYAML bool, problem func(*field.Path, string) *field.Error) field.ErrorList {
	if isYAML {
		converted, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil
		}
		body = converted
	}
	var obj struct {
		Kind string `json:"kind"`
		Spec struct {
			StorageSize json.RawMessage `json:"storageSize"`
			Resources   struct {
				Requests map[string]json.RawMessage `json:"requests"`
				Limits   map[string]json.RawMessage `json:"limits"`
			} `json:"resources"`
		} `json:"spec"`
	}
	// A body of another shape fails here, and its own error stands.
	if err := json.Unmarshal(body, &obj); err != nil || (obj.Kind != "" && obj.Kind != "MyDatabase") {
		return nil
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	check := func(path *field.Path, raw json.RawMessage) {
		raw = bytes.TrimSpace(raw)
		var s string
		var n json.Number
		switch {
		case len(raw) == 0:
			return
		case raw[0] == '"':
			if json.Unmarshal(raw, &s) != nil {
				return
			}
		case json.Unmarshal(raw, &n) == nil:
			// resource.Quantity parses a bare JSON number's text too.
			s = n.String()
		default:
			return // another type has its own error
		}
		if err := problem(path, s); err != nil {
			errs = append(errs, err)
		}
	}
	check(spec.Child("storageSize"), obj.Spec.StorageSize)
	for _, list := range []struct {
		name   string
		values map[string]json.RawMessage
	}{{"requests", obj.Spec.Resources.Requests}, {"limits", obj.Spec.Resources.Limits}} {
		keys := make([]string, 0, len(list.values))
		for k := range list.values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			check(spec.Child("resources", list.name).Key(k), list.values[k])
		}
	}
	return errs
}

// patchBodies are the patch media types whose quantities are checked
// before the patch handler reads them. The serializers above would see a
// JSON patch's or a merge patch's result, but the handler reports their
// errors as the whole patched object; a strategic merge patch and an
// apply configuration are turned into the object through
// runtime.DefaultUnstructuredConverter, which parses each quantity itself.
var patchBodies = map[string]func([]byte) field.ErrorList{
	string(types.MergePatchType):          func(b []byte) field.ErrorList { return quantityFields(b, false, boundProblem) },
	string(types.StrategicMergePatchType): func(b []byte) field.ErrorList { return quantityFields(b, false, boundProblem) },
	string(types.ApplyYAMLPatchType):      func(b []byte) field.ErrorList { return quantityFields(b, true, boundProblem) },
	string(types.JSONPatchType):           jsonPatchQuantities,
}

// jsonPatchQuantities checks the value of every operation of a JSON patch
// as if it stood at its path in a MyDatabase. (A quantity copied or moved
// from elsewhere in the object reaches the serializers' check.)
func jsonPatchQuantities(body []byte) field.ErrorList {
	var ops []struct {
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if json.Unmarshal(body, &ops) != nil {
		return nil // the patch handler answers a malformed patch
	}
	var errs field.ErrorList
	for _, op := range ops {
		if len(op.Value) == 0 {
			continue
		}
		obj := op.Value
		segments := strings.Split(op.Path, "/")
		for i := len(segments) - 1; i >= 1; i-- {
			key := strings.NewReplacer("~1", "/", "~0", "~").Replace(segments[i])
			wrapped, err := json.Marshal(map[string]json.RawMessage{key: obj})
			if err != nil {
				return nil
			}
			obj = wrapped
		}
		errs = append(errs, quantityFields(obj, false, boundProblem)...)
	}
	return errs
}

// WithBoundedQuantities refuses, with 400 naming the field, a patch of a
// MyDatabase whose quantities are beyond the bounds, before the patch
// handler reads it. It runs inside the handler chain, after
// authentication and authorization.
func WithBoundedQuantities(handler http.Handler, maxBodyBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := request.RequestInfoFrom(req.Context())
		if !ok || !info.IsResourceRequest || info.Verb != "patch" || info.APIGroup != example.GroupName || info.Resource != "mydatabases" || req.Body == nil {
			handler.ServeHTTP(w, req)
			return
		}
		mediaType, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		check, ok := patchBodies[mediaType]
		if !ok {
			handler.ServeHTTP(w, req)
			return
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, maxBodyBytes+1))
		if err != nil || int64(len(body)) > maxBodyBytes {
			// The patch handler answers a body it cannot read, or one too
			// large (413), on its own.
			req.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), req.Body), Closer: req.Body}
			handler.ServeHTTP(w, req)
			return
		}
		if mayHoldUnboundedQuantity(body) {
			if errs := check(body); len(errs) > 0 {
				gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
				responsewriters.ErrorNegotiated(apierrors.NewBadRequest(errs.ToAggregate().Error()), Codecs, gv, w, req)
				return
			}
		}
		req.Body = readCloser{Reader: bytes.NewReader(body), Closer: req.Body}
		handler.ServeHTTP(w, req)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}
