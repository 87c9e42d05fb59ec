package mydatabasebackup

import (
	"context"
	"fmt"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/registry/common"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Storage holds the REST storage of backups, their /status, and the
// mydatabases/backup action.
type Storage struct {
	Backup *common.REST
	Status *common.StatusREST
	Action *ActionREST
}

// NewStorage returns the storage of MyDatabaseBackup; databases reads the
// MyDatabase a /backup action names.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, databases rest.Getter) (Storage, error) {
	s := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &example.MyDatabaseBackup{} },
		NewListFunc:               func() runtime.Object { return &example.MyDatabaseBackupList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  example.Resource("mydatabasebackups"),
		SingularQualifiedResource: example.Resource("mydatabasebackup"),

		CreateStrategy:      s,
		UpdateStrategy:      s,
		DeleteStrategy:      s,
		ResetFieldsStrategy: s,

		TableConvertor: tableConvertor{},
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return Storage{}, err
	}
	statusStore := *store
	statusStore.UpdateStrategy = statusStrategy{s}
	statusStore.ResetFieldsStrategy = statusStrategy{s}
	return Storage{
		// "kubectl get mdbb"; backups are in "kubectl get mydb".
		Backup: common.NewREST(store, []string{"mdbb"}, []string{"mydb"}),
		Status: &common.StatusREST{Store: &statusStore},
		Action: &ActionREST{databases: databases, backups: store},
	}, nil
}

// ActionREST is the storage of mydatabases/backup: a POST there backs the
// database up, creating a MyDatabaseBackup. RBAC on the create verb of
// mydatabases/backup is all it takes, and all it grants.
type ActionREST struct {
	databases rest.Getter
	backups   *genericregistry.Store
}

var _ rest.NamedCreater = &ActionREST{}

// New returns an empty backup: the request body, all of it optional.
func (r *ActionREST) New() runtime.Object { return &example.MyDatabaseBackup{} }

// Destroy does nothing: the stores belong to their own REST.
func (r *ActionREST) Destroy() {}

// Create backs up the MyDatabase called name. The body may name the backup
// (name or generateName) and label it; everything else is the server's.
func (r *ActionREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	backup, ok := obj.(*example.MyDatabaseBackup)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected a MyDatabaseBackup, got %T", obj))
	}
	dbObj, err := r.databases.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	db := dbObj.(*example.MyDatabase)
	if db.DeletionTimestamp != nil {
		return nil, apierrors.NewConflict(example.Resource("mydatabases"), name, fmt.Errorf("the database is being deleted"))
	}
	if backup.Spec.DatabaseName != "" && backup.Spec.DatabaseName != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.databaseName %q does not match the database %q in the URL", backup.Spec.DatabaseName, name))
	}
	if db.Spec.Backup == nil || db.Spec.Backup.Destination == nil {
		return nil, apierrors.NewInvalid(example.Kind("MyDatabase"), name, field.ErrorList{field.Required(
			field.NewPath("spec", "backup", "destination"),
			"the database has no backup destination: set spec.backup.destination to say where its backups are written")})
	}
	backup.Spec.DatabaseName = name
	backup.Namespace = db.Namespace
	// The labels that mark the schedule's and the final backups are the
	// controller's: a backup-only user may not make a backup pass for one.
	for _, label := range []string{names.ScheduleLabel, names.FinalBackupLabel} {
		delete(backup.Labels, label)
	}
	if backup.Name == "" && backup.GenerateName == "" {
		backup.GenerateName = name + "-"
	}
	return r.backups.Create(ctx, backup, createValidation, options)
}
