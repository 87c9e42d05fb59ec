// Package mydatabasebackup is the REST storage of MyDatabaseBackup, and of
// the mydatabases/backup action that creates one.
package mydatabasebackup

import (
	"context"
	"fmt"
	"slices"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/apis/example/validation"
	"github.com/mydb-dev/mydb/pkg/registry/common"
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

type strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the strategy of the main resource.
func NewStrategy(typer runtime.ObjectTyper) strategy {
	return strategy{typer, names.SimpleNameGenerator}
}

var (
	_ rest.RESTCreateStrategy  = strategy{}
	_ rest.RESTUpdateStrategy  = strategy{}
	_ rest.ResetFieldsStrategy = strategy{}
	_ rest.RESTUpdateStrategy  = statusStrategy{}
)

func (strategy) NamespaceScoped() bool { return true }

// GetResetFields tells server-side apply that users do not own status.
func (strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"example.com/v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate drops status: only the controller writes it. It holds
// every backup with BackupFinalizer, set here so no client can forget it:
// the controller deletes the backup's dump before the backup goes.
func (strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	b := obj.(*example.MyDatabaseBackup)
	common.DropZeroManagedFieldsTimes(&b.ObjectMeta)
	b.Status = example.MyDatabaseBackupStatus{}
	b.Generation = 1
	if !slices.Contains(b.Finalizers, example.BackupFinalizer) {
		b.Finalizers = append(b.Finalizers, example.BackupFinalizer)
	}
}

// PrepareForUpdate keeps the stored status.
func (strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	b := obj.(*example.MyDatabaseBackup)
	b.Status = old.(*example.MyDatabaseBackup).Status
	common.DropZeroManagedFieldsTimes(&b.ObjectMeta)
}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateMyDatabaseBackup(obj.(*example.MyDatabaseBackup))
}

func (strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

func (strategy) AllowCreateOnUpdate(context.Context) bool { return false }

func (strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (strategy) Canonicalize(runtime.Object) {}

func (strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMyDatabaseBackupUpdate(obj.(*example.MyDatabaseBackup), old.(*example.MyDatabaseBackup))
}

func (strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

type statusStrategy struct {
	strategy
}

// GetResetFields tells the field manager /status writers own only status.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return common.StatusOnlyResetFields()
}

// PrepareForUpdate keeps the stored spec and metadata but managedFields.
func (statusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	b, oldB := obj.(*example.MyDatabaseBackup), old.(*example.MyDatabaseBackup)
	common.DropZeroManagedFieldsTimes(&b.ObjectMeta)
	common.KeepMetadata(&b.ObjectMeta, &oldB.ObjectMeta)
	b.Spec = oldB.Spec
}

func (statusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateMyDatabaseBackupStatusUpdate(obj.(*example.MyDatabaseBackup), old.(*example.MyDatabaseBackup))
}

// GetAttrs returns the labels and selectable fields of a backup.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	b, ok := obj.(*example.MyDatabaseBackup)
	if !ok {
		return nil, nil, fmt.Errorf("given object is not a MyDatabaseBackup")
	}
	return labels.Set(b.Labels), generic.AddObjectMetaFieldsSet(fields.Set{
		"spec.databaseName": b.Spec.DatabaseName,
		"status.phase":      string(b.Status.Phase),
	}, &b.ObjectMeta, true), nil
}

// Match returns the selection predicate for label and field selectors.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
