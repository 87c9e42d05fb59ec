package v1

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime"
)

// Field selectors MyDatabase supports beyond metadata.name and metadata.namespace.
const (
	FieldEngine  = "spec.engine"
	FieldVersion = "spec.version"
	FieldReady   = "status.ready"

	// FieldDatabaseName selects the backups of one MyDatabase.
	FieldDatabaseName = "spec.databaseName"
	// FieldPhase selects backups by phase.
	FieldPhase = "status.phase"
)

func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	if err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("MyDatabase"), supportedFields(FieldEngine, FieldVersion, FieldReady)); err != nil {
		return err
	}
	return scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind("MyDatabaseBackup"), supportedFields(FieldDatabaseName, FieldPhase))
}

// supportedFields accepts the metadata fields and the given ones as they are.
func supportedFields(fields ...string) runtime.FieldLabelConversionFunc {
	return func(label, value string) (string, string, error) {
		if label == "metadata.name" || label == "metadata.namespace" || slices.Contains(fields, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported: %s", label)
	}
}
