package common

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// StatusOnlyResetFields are what a /status writer may not own: the spec,
// and the metadata KeepMetadata restores.
func StatusOnlyResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"example.com/v1": fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "labels"),
			fieldpath.MakePathOrDie("metadata", "annotations"),
			fieldpath.MakePathOrDie("metadata", "finalizers"),
			fieldpath.MakePathOrDie("metadata", "ownerReferences"),
		),
	}
}

// KeepMetadata restores the stored metadata on a /status write, but for the
// managedFields, which track the status fields the write changed: a client
// allowed only /status may not relabel an object or add finalizers.
func KeepMetadata(meta *metav1.ObjectMeta, old *metav1.ObjectMeta) {
	managedFields := meta.ManagedFields
	*meta = *old.DeepCopy()
	meta.ManagedFields = managedFields
}

// DropZeroManagedFieldsTimes clears the time of the managedFields entries
// that carry the zero time (protobuf can say so): JSON writes it as null,
// which reads back as no time, so an object stored with one would change
// each time a client read it as JSON and wrote it back.
func DropZeroManagedFieldsTimes(meta *metav1.ObjectMeta) {
	for i := range meta.ManagedFields {
		if t := meta.ManagedFields[i].Time; t != nil && t.IsZero() {
			meta.ManagedFields[i].Time = nil
		}
	}
}
