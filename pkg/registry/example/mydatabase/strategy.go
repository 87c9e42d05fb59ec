// Package mydatabase is the REST storage of MyDatabase: its strategies,
// its /status and /scale subresources and its table columns.
package mydatabase

import (
	"context"
	"fmt"
	"slices"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apis/example/validation"
	"github.com/mydb-dev/mydb/pkg/registry/common"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// strategy implements create, update and delete behaviour for MyDatabase.
type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the strategy of the main resource.
func NewStrategy(typer runtime.ObjectTyper) strategy {
	return strategy{typer, names.SimpleNameGenerator}
}

var (
	_ rest.RESTCreateStrategy              = strategy{}
	_ rest.RESTUpdateStrategy              = strategy{}
	_ rest.RESTDeleteStrategy              = strategy{}
	_ rest.ResetFieldsStrategy             = strategy{}
	_ rest.RESTUpdateStrategy              = statusStrategy{}
	_ rest.ResetFieldsStrategy             = statusStrategy{}
	_ rest.GarbageCollectionDeleteStrategy = strategy{}
)

func (strategy) NamespaceScoped() bool { return true }

// DefaultGarbageCollectionPolicy deletes a MyDatabase's dependents in the
// background, as for the built-in workloads.
func (strategy) DefaultGarbageCollectionPolicy(context.Context) rest.GarbageCollectionPolicy {
	return rest.DeleteDependents
}

// GetResetFields tells server-side apply that users do not own status.
func (strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"example.com/v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate drops status: only the controller writes it, through
// /status. It defaults spec.resources here rather than when decoding, so
// that the namespace's LimitRange (a mutating admission plugin, which runs
// before) defaults first.
func (strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	db := obj.(*example.MyDatabase)
	common.DropZeroManagedFieldsTimes(&db.ObjectMeta)
	db.Status = example.MyDatabaseStatus{}
	db.Generation = 1
	examplev1.SetDefaultResources(&db.Spec.Resources)
	syncFinalBackupFinalizer(db)
	syncDeleteDataFinalizer(db)
}

// PrepareForUpdate keeps the stored status and bumps the generation when,
// and only when, the spec changes.
func (strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	db, oldDB := obj.(*example.MyDatabase), old.(*example.MyDatabase)
	common.DropZeroManagedFieldsTimes(&db.ObjectMeta)
	db.Status = oldDB.Status
	examplev1.SetDefaultResources(&db.Spec.Resources)
	if !apiequality.Semantic.DeepEqual(db.Spec, oldDB.Spec) {
		db.Generation = oldDB.Generation + 1
	}
	// Once deletion began, only the final backup (or a user who removes the
	// finalizer by hand) lets the database go.
	if db.DeletionTimestamp == nil {
		syncFinalBackupFinalizer(db)
	}
	// A user may still choose to keep the data while the deletion waits.
	if db.DeletionTimestamp == nil || db.Spec.DeletionPolicy != example.DeletionPolicyDelete {
		syncDeleteDataFinalizer(db)
	}
}

// syncDeleteDataFinalizer holds a database with deletionPolicy Delete
// until the controller deleted its data, which nothing else deletes.
func syncDeleteDataFinalizer(db *example.MyDatabase) {
	want := db.Spec.DeletionPolicy == example.DeletionPolicyDelete
	has := slices.Contains(db.Finalizers, example.DeleteDataFinalizer)
	switch {
	case want && !has:
		db.Finalizers = append(db.Finalizers, example.DeleteDataFinalizer)
	case !want && has:
		db.Finalizers = slices.DeleteFunc(slices.Clone(db.Finalizers), func(f string) bool { return f == example.DeleteDataFinalizer })
	}
}

// syncFinalBackupFinalizer holds a database with spec.backup.finalBackup
// with a finalizer, set by the server so no client can forget it.
func syncFinalBackupFinalizer(db *example.MyDatabase) {
	want := db.Spec.Backup != nil && db.Spec.Backup.FinalBackup
	has := slices.Contains(db.Finalizers, example.FinalBackupFinalizer)
	switch {
	case want && !has:
		db.Finalizers = append(db.Finalizers, example.FinalBackupFinalizer)
	case !want && has:
		db.Finalizers = slices.DeleteFunc(slices.Clone(db.Finalizers), func(f string) bool { return f == example.FinalBackupFinalizer })
	}
}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMyDatabase(obj.(*example.MyDatabase))
}

func (strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	return validation.Warnings(obj.(*example.MyDatabase), nil)
}

func (strategy) AllowCreateOnUpdate(context.Context) bool { return false }

func (strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (strategy) Canonicalize(runtime.Object) {}

func (strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMyDatabaseUpdate(obj.(*example.MyDatabase), old.(*example.MyDatabase))
}

func (strategy) WarningsOnUpdate(_ context.Context, obj, old runtime.Object) []string {
	return validation.Warnings(obj.(*example.MyDatabase), old.(*example.MyDatabase))
}

// statusStrategy implements updates through /status.
type statusStrategy struct {
	strategy
}

// NewStatusStrategy returns the strategy of the /status subresource.
func NewStatusStrategy(s strategy) statusStrategy {
	return statusStrategy{s}
}

// GetResetFields tells the field manager that /status writers own neither
// spec nor the metadata PrepareForUpdate restores.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return common.StatusOnlyResetFields()
}

// PrepareForUpdate keeps the stored spec and metadata: /status writes only
// status, so a client allowed nothing but mydatabases/status cannot relabel
// the object or add finalizers. managedFields stay the new ones, which track
// the status fields this write changed.
func (statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	db, oldDB := obj.(*example.MyDatabase), old.(*example.MyDatabase)
	common.DropZeroManagedFieldsTimes(&db.ObjectMeta)
	common.KeepMetadata(&db.ObjectMeta, &oldDB.ObjectMeta)
	db.Spec = oldDB.Spec
}

func (statusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMyDatabaseStatusUpdate(obj.(*example.MyDatabase), old.(*example.MyDatabase))
}

func (statusStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// GetAttrs returns the labels and selectable fields of a MyDatabase.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	db, ok := obj.(*example.MyDatabase)
	if !ok {
		return nil, nil, fmt.Errorf("given object is not a MyDatabase")
	}
	return labels.Set(db.Labels), SelectableFields(db), nil
}

// SelectableFields returns the fields a field selector may name.
func SelectableFields(db *example.MyDatabase) fields.Set {
	return generic.AddObjectMetaFieldsSet(fields.Set{
		"spec.engine":  string(db.Spec.Engine),
		"spec.version": db.Spec.Version,
		"status.ready": ReadyStatus(db),
	}, &db.ObjectMeta, true)
}

// ReadyStatus returns the status of the Ready condition: "True", "False"
// or, before the controller has said, "Unknown".
func ReadyStatus(db *example.MyDatabase) string {
	if c := meta.FindStatusCondition(db.Status.Conditions, example.ConditionReady); c != nil {
		return string(c.Status)
	}
	return "Unknown"
}

// Match returns the selection predicate for label and field selectors.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
