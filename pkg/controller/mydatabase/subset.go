package mydatabase

import (
	"encoding/json"
	"reflect"
)

// isSubset tells whether every field set in want has the same value in got,
// comparing their JSON forms. Fields the API server defaults (present in got
// only) do not count as differences, so a converged child compares equal,
// while a field someone changed or a list entry someone added does not.
func isSubset(want, got interface{}) (bool, error) {
	w, err := toJSONValue(want)
	if err != nil {
		return false, err
	}
	g, err := toJSONValue(got)
	if err != nil {
		return false, err
	}
	return subset(w, g), nil
}

func toJSONValue(v interface{}) (interface{}, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out interface{}
	err = json.Unmarshal(data, &out)
	return out, err
}

func subset(want, got interface{}) bool {
	switch w := want.(type) {
	case map[string]interface{}:
		g, ok := got.(map[string]interface{})
		if !ok {
			return false
		}
		for k, wv := range w {
			if !subset(wv, g[k]) {
				return false
			}
		}
		return true
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], g[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(want, got)
	}
}
