package mydatabase

import (
	"context"
	"fmt"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	"github.com/mydb-dev/mydb/pkg/livelag"
	"github.com/mydb-dev/mydb/pkg/registry/common"
	"github.com/mydb-dev/mydb/pkg/scaled"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Storage holds the REST storage of MyDatabase and of its subresources.
type Storage struct {
	MyDatabase *common.REST
	Status     *common.StatusREST
	Scale      *ScaleREST
	Switchover *SwitchoverREST
	// Credentials make short-lived database users; their issuer is set
	// once the controllers are built.
	Credentials *CredentialsREST
	// Connect tunnels to the primary; its target is set with the issuer.
	Connect *ConnectREST

	table *tableConvertor
}

// SetLiveLag gives the tables the replicas' lag, read from their managers
// (the Replica Lag column of kubectl get mdb -o wide).
func (s Storage) SetLiveLag(r *livelag.Reader) { s.table.lag.Store(r) }

// NewStorage returns the REST storage of MyDatabase, backed by the store
// that optsGetter configures (etcd with a watch cache).
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (Storage, error) {
	s := NewStrategy(scheme)
	table := &tableConvertor{}
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &example.MyDatabase{} },
		NewListFunc:               func() runtime.Object { return &example.MyDatabaseList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  example.Resource("mydatabases"),
		SingularQualifiedResource: example.Resource("mydatabase"),

		CreateStrategy:      s,
		UpdateStrategy:      s,
		DeleteStrategy:      s,
		ResetFieldsStrategy: s,

		TableConvertor: table,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return Storage{}, err
	}

	statusStore := *store
	statusStore.UpdateStrategy = NewStatusStrategy(s)
	statusStore.ResetFieldsStrategy = NewStatusStrategy(s)

	return Storage{
		// "kubectl get mdb"; MyDatabases are in "kubectl get all" and "kubectl get mydb".
		MyDatabase:  common.NewREST(store, []string{"mdb"}, []string{"all", "mydb"}),
		Status:      &common.StatusREST{Store: &statusStore},
		Scale:       &ScaleREST{store: store},
		Switchover:  &SwitchoverREST{status: &statusStore, clock: clock.RealClock{}},
		Credentials: &CredentialsREST{databases: store, clock: clock.RealClock{}},
		Connect:     &ConnectREST{databases: store},
		table:       table,
	}, nil
}

// ScaleREST is the storage of mydatabases/scale, an autoscaling/v1 Scale
// over spec.replicas, so kubectl scale and HorizontalPodAutoscalers work.
type ScaleREST struct {
	store *genericregistry.Store
}

var (
	_ rest.Patcher                  = &ScaleREST{}
	_ rest.GroupVersionKindProvider = &ScaleREST{}
)

// replicasPaths maps each served version to the field a Scale's replicas are.
var replicasPaths = managedfields.ResourcePathMappings{
	schema.GroupVersion{Group: example.GroupName, Version: "v1"}.String(): fieldpath.MakePathOrDie("spec", "replicas"),
}

// GroupVersionKind says the subresource speaks autoscaling/v1 Scale.
func (r *ScaleREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return autoscalingv1.SchemeGroupVersion.WithKind("Scale")
}

// New returns an empty Scale.
func (r *ScaleREST) New() runtime.Object { return &autoscalingv1.Scale{} }

// Destroy does nothing: the store is shared with REST, which destroys it.
func (r *ScaleREST) Destroy() {}

// Get returns the Scale of a MyDatabase; like common.REST.Get it refuses a
// resourceVersion that is not a number.
func (r *ScaleREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	if options != nil {
		if err := common.CheckResourceVersion(options.ResourceVersion); err != nil {
			return nil, err
		}
	}
	obj, err := r.store.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	return scaleFromMyDatabase(obj.(*example.MyDatabase)), nil
}

// Update sets spec.replicas from a Scale; the MyDatabase's own validation
// bounds the value.
func (r *ScaleREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	obj, _, err := r.store.Update(ctx, name, common.ClientUpdate{UpdatedObjectInfo: &scaleUpdatedObjectInfo{name: name, reqObjInfo: objInfo}},
		toScaleCreateValidation(createValidation), toScaleUpdateValidation(updateValidation), false, options)
	if err != nil {
		return nil, false, err
	}
	return scaleFromMyDatabase(obj.(*example.MyDatabase)), false, nil
}

// ConvertToTable prints the Scale's MyDatabase.
func (r *ScaleREST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return rest.NewDefaultTableConvertor(example.Resource("mydatabases/scale")).ConvertToTable(ctx, object, tableOptions)
}

// Admission sees the Scale, not the MyDatabase, as for built-in workloads;
// the MyDatabases are in the context for quota and LimitRange (scaled.From).
func toScaleCreateValidation(f rest.ValidateObjectFunc) rest.ValidateObjectFunc {
	return func(ctx context.Context, obj runtime.Object) error {
		return f(ctx, scaleFromMyDatabase(obj.(*example.MyDatabase)))
	}
}

func toScaleUpdateValidation(f rest.ValidateObjectUpdateFunc) rest.ValidateObjectUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object) error {
		db, oldDB := obj.(*example.MyDatabase), old.(*example.MyDatabase)
		return f(scaled.With(ctx, scaled.Databases{New: db, Old: oldDB}), scaleFromMyDatabase(db), scaleFromMyDatabase(oldDB))
	}
}

func scaleFromMyDatabase(db *example.MyDatabase) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{
			Name:              db.Name,
			Namespace:         db.Namespace,
			UID:               db.UID,
			ResourceVersion:   db.ResourceVersion,
			CreationTimestamp: db.CreationTimestamp,
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: db.Spec.Replicas},
		Status: autoscalingv1.ScaleStatus{Replicas: db.Status.Replicas, Selector: db.Status.Selector},
	}
}

// scaleUpdatedObjectInfo turns the stored MyDatabase into the old Scale,
// applies the request to it, and writes the new replicas back, carrying
// managedFields between the two shapes.
type scaleUpdatedObjectInfo struct {
	name       string
	reqObjInfo rest.UpdatedObjectInfo
}

func (i *scaleUpdatedObjectInfo) Preconditions() *metav1.Preconditions {
	return i.reqObjInfo.Preconditions()
}

func (i *scaleUpdatedObjectInfo) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	db := oldObj.DeepCopyObject().(*example.MyDatabase)
	if db.ResourceVersion == "" {
		return nil, apierrors.NewNotFound(example.Resource("mydatabases/scale"), i.name)
	}
	handler := managedfields.NewScaleHandler(db.ManagedFields, schema.GroupVersion{Group: example.GroupName, Version: "v1"}, replicasPaths)

	oldScale := scaleFromMyDatabase(db)
	scaleManagedFields, err := handler.ToSubresource()
	if err != nil {
		return nil, err
	}
	oldScale.ManagedFields = scaleManagedFields

	newObj, err := i.reqObjInfo.UpdatedObject(ctx, oldScale)
	if err != nil {
		return nil, err
	}
	scale, ok := newObj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("expected an autoscaling/v1 Scale, got %T", newObj))
	}
	if scale.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), db.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "replicas"), scale.Spec.Replicas, "must be greater than or equal to 0"),
		})
	}
	if scale.UID != "" && scale.UID != db.UID {
		return nil, apierrors.NewConflict(example.Resource("mydatabases/scale"), db.Name,
			fmt.Errorf("precondition failed: UID in precondition: %v, UID in object meta: %v", scale.UID, db.UID))
	}

	db.Spec.Replicas = scale.Spec.Replicas
	db.ResourceVersion = scale.ResourceVersion
	db.ManagedFields, err = handler.ToParent(scale.ManagedFields)
	if err != nil {
		return nil, err
	}
	return db, nil
}
