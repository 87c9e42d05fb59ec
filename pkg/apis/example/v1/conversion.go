package v1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// Field selectors MyDatabase supports beyond metadata.name and metadata.namespace.
const (
	FieldEngine  = "spec.engine"
	FieldVersion = "spec.version"
	FieldReady   = "status.ready"
)

func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	return scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("MyDatabase"),
		func(label, value string) (string, string, error) {
			switch label {
			case "metadata.name", "metadata.namespace", FieldEngine, FieldVersion, FieldReady:
				return label, value, nil
			default:
				return "", "", fmt.Errorf("field label not supported: %s", label)
			}
		})
}
