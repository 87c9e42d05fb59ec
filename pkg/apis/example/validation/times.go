package validation

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTime refuses a time JSON cannot carry. JSON writes times in RFC
// 3339, whose years have four digits; protobuf carries any second, so a
// protobuf client could store year 10000 in an object that no JSON client
// (kubectl among them) could read again, nor any list holding it.
func validateTime(t time.Time, fldPath *field.Path) field.ErrorList {
	if year := t.UTC().Year(); year < 0 || year > 9999 {
		return field.ErrorList{field.Invalid(fldPath, t.UTC().Format(time.RFC3339), "must be between the years 0000 and 9999")}
	}
	return nil
}

func validateTimePtr(t *metav1.Time, fldPath *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	return validateTime(t.Time, fldPath)
}

// validateMetadataTimes checks the times a client may write in metadata:
// those of metadata.managedFields, on a create or an update of the object
// itself (the server sets the others, and /status keeps the stored
// managed fields).
func validateMetadataTimes(meta *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, m := range meta.ManagedFields {
		allErrs = append(allErrs, validateTimePtr(m.Time, fldPath.Child("managedFields").Index(i).Child("time"))...)
	}
	return allErrs
}

func validateConditionTimes(conditions []metav1.Condition, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, c := range conditions {
		allErrs = append(allErrs, validateTime(c.LastTransitionTime.Time, fldPath.Index(i).Child("lastTransitionTime"))...)
	}
	return allErrs
}
