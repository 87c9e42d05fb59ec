package apiserver

import (
	"bytes"
	"encoding/json"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// fieldNamingSerializer wraps the API group's serializers.
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
	obj, gvk, err := s.Serializer.Decode(data, defaults, into)
	if err == nil {
		return obj, gvk, nil
	}
	if errs := badQuantities(data, s.yaml); len(errs) > 0 {
		return obj, gvk, errs.ToAggregate()
	}
	return obj, gvk, err
}

// badQuantities returns the quantities of a MyDatabase's spec in body that
// do not parse, by field path.
func badQuantities(body []byte, isYAML bool) field.ErrorList {
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
		var s string
		if len(raw) == 0 || !bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) || json.Unmarshal(raw, &s) != nil {
			return // a number always parses; another type has its own error
		}
		if _, err := resource.ParseQuantity(s); err != nil {
			errs = append(errs, field.Invalid(path, s, quantityDetail))
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
