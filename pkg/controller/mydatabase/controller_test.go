package mydatabase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/internal/fixtures"
	"github.com/mydb-dev/mydb/pkg/controller/runner"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	"github.com/mydb-dev/mydb/pkg/engine"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pki"
	"github.com/mydb-dev/mydb/pkg/scope"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// myDatabase is the fixture's database.
var myDatabase = fixtures.MyDatabase

var now = fixtures.Now

var writes = fixtures.Writes

// fixture holds the state a test starts from and the writes it expects.
type fixture struct {
	t           *testing.T
	kubeClient  *k8sfake.Clientset
	mydbClient  *mydbfake.Clientset
	recorder    *record.FakeRecorder
	dbs         []*examplev1.MyDatabase
	kubeObjects []runtime.Object
	// statuses are the instance managers' answers, by pod IP; the
	// others do not answer. restores answers their restore endpoint.
	statuses fakeStatuses
	restores RestoreStarter
	archives ArchiveSetter
	pruner   ArchivePruner
	objects  *fakeObjects
	// store stands for mydb's store guard (nil: none).
	store StoreCoverage
	// namespaces are where the controller serves (nil: everywhere).
	namespaces scope.Namespaces
}

func newFixture(t *testing.T, dbs []*examplev1.MyDatabase, kubeObjects ...runtime.Object) *fixture {
	return &fixture{t: t, dbs: dbs, kubeObjects: kubeObjects, statuses: fakeStatuses{}, objects: &fakeObjects{}}
}

// fakeStatuses are instance managers' answers by address.
type fakeStatuses map[string]api.Status

func (f fakeStatuses) Status(_ context.Context, address string, auth api.Auth) (*api.Status, error) {
	if auth.Credentials == nil || auth.Credentials.Roots == nil || auth.Name == "" {
		return nil, fmt.Errorf("asked %s without credentials", address)
	}
	s, ok := f[address]
	if !ok {
		return nil, fmt.Errorf("dial tcp %s:8000: connection refused", address)
	}
	return &s, nil
}

// pod is replica ordinal of db as the StatefulSet controller and kubelet
// leave it, with the role label and an address.
func pod(db *examplev1.MyDatabase, ordinal int, role string) *corev1.Pod {
	labels := SelectorLabels(db)
	// The revision convergedState's StatefulSet runs.
	labels[appsv1.StatefulSetRevisionLabel] = "r1"
	if role != "" {
		labels[names.LabelRole] = role
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", db.Name, ordinal), Namespace: db.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: names.StatefulSet(db.Name),
				UID: statefulSetUID(names.StatefulSet(db.Name)), Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{PodIP: fmt.Sprintf("10.244.0.%d", 10+ordinal)},
	}
}

// statefulSetUID is the UID the fake API server gives the StatefulSet
// named name when it is created, which its pods' controller references
// name.
func statefulSetUID(name string) types.UID {
	return types.UID(name + "-statefulset-uid")
}

// serving is what a ready instance manager of pod reports.
func serving(p *corev1.Pod, primary string) api.Status {
	role := api.RoleReplica
	if p.Name == primary {
		role = api.RolePrimary
	}
	return api.Status{Name: p.Name, Role: role, Primary: primary, Ready: true}
}

// newController builds a controller whose caches hold exactly the fixture's
// objects, on fake clients that record every request.
func (f *fixture) newController() *Controller {
	f.t.Helper()
	var dbObjects, kubeObjects []runtime.Object
	var backups []*examplev1.MyDatabaseBackup
	for _, db := range f.dbs {
		dbObjects = append(dbObjects, db)
	}
	for _, obj := range f.kubeObjects {
		if b, ok := obj.(*examplev1.MyDatabaseBackup); ok {
			backups = append(backups, b)
			dbObjects = append(dbObjects, b)
			continue
		}
		kubeObjects = append(kubeObjects, obj)
	}
	f.kubeClient = k8sfake.NewClientset(kubeObjects...)
	// The fake API server gives no UIDs; the controller trusts pods by
	// their StatefulSet's.
	tracker := f.kubeClient.Tracker()
	f.kubeClient.PrependReactor("patch", "statefulsets", func(a core.Action) (bool, runtime.Object, error) {
		handled, obj, err := core.ObjectReaction(tracker)(a)
		if sts, ok := obj.(*appsv1.StatefulSet); ok && err == nil && sts.UID == "" {
			sts.UID = statefulSetUID(sts.Name)
			err = tracker.Update(a.GetResource(), sts, sts.Namespace)
		}
		return handled, obj, err
	})
	f.mydbClient = mydbfake.NewClientset(dbObjects...)
	f.recorder = record.NewFakeRecorder(100)

	kubeInf := kubeinformers.NewSharedInformerFactory(f.kubeClient, 0)
	mydbInf := mydbinformers.NewSharedInformerFactory(f.mydbClient, 0)
	informers := NewInformers(kubeInf, kubeInf, mydbInf)
	c, err := NewController(context.Background(), f.kubeClient, f.mydbClient, informers, f.recorder, clocktesting.NewFakePassiveClock(now),
		Config{InstanceImage: "mydb:test", PollInterval: 10 * time.Second, Statuses: f.statuses, Restores: f.restores, Archives: f.archives, Pruner: f.pruner, Objects: f.objects, Store: f.store, Namespaces: f.namespaces})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, db := range f.dbs {
		add(f.t, informers.MyDatabases.Informer().GetIndexer(), db)
	}
	for _, b := range backups {
		add(f.t, informers.Backups.Informer().GetIndexer(), b)
	}
	for _, obj := range kubeObjects {
		// The informers on children see only objects labelled as mydb's.
		if _, isClass := obj.(*storagev1.StorageClass); !isClass && obj.(metav1.Object).GetLabels()[names.LabelManagedBy] != names.ManagedBy {
			continue
		}
		switch o := obj.(type) {
		case *appsv1.StatefulSet:
			add(f.t, informers.StatefulSets.Informer().GetIndexer(), o)
		case *corev1.Service:
			add(f.t, informers.Services.Informer().GetIndexer(), o)
		case *corev1.Secret:
			add(f.t, informers.Secrets.Informers()[0].GetIndexer(), o)
		case *corev1.PersistentVolumeClaim:
			add(f.t, informers.PersistentVolumeClaims.Informer().GetIndexer(), o)
		case *policyv1.PodDisruptionBudget:
			add(f.t, informers.PodDisruptionBudgets.Informer().GetIndexer(), o)
		case *networkingv1.NetworkPolicy:
			add(f.t, informers.NetworkPolicies.Informer().GetIndexer(), o)
		case *storagev1.StorageClass:
			add(f.t, informers.StorageClasses.Informer().GetIndexer(), o)
		case *corev1.Pod:
			add(f.t, informers.Pods.Informer().GetIndexer(), o)
		case *corev1.ServiceAccount:
			add(f.t, informers.ServiceAccounts.Informer().GetIndexer(), o)
		case *rbacv1.Role:
			add(f.t, informers.Roles.Informer().GetIndexer(), o)
		case *rbacv1.RoleBinding:
			add(f.t, informers.RoleBindings.Informer().GetIndexer(), o)
		default:
			f.t.Fatalf("fixture cannot cache %T", obj)
		}
	}
	return c
}

func add(t *testing.T, indexer cache.Indexer, obj interface{}) {
	t.Helper()
	if err := indexer.Add(obj); err != nil {
		t.Fatal(err)
	}
}

// sync runs one reconcile of the fixture's first database.
func (f *fixture) sync() error {
	f.t.Helper()
	c := f.newController()
	return c.sync(context.Background(), cache.ObjectName{Namespace: f.dbs[0].Namespace, Name: f.dbs[0].Name})
}

func (f *fixture) expectWrites(wantKube, wantMydb []string) {
	f.t.Helper()
	if diff := cmp.Diff(wantKube, writes(f.kubeClient.Actions())); diff != "" {
		f.t.Errorf("writes to the main cluster (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantMydb, writes(f.mydbClient.Actions())); diff != "" {
		f.t.Errorf("writes to mydb (-want +got):\n%s", diff)
	}
}

// created returns the object of the first create of resource.
func created[T runtime.Object](t *testing.T, actions []core.Action, resource string) T {
	t.Helper()
	for _, a := range actions {
		if c, ok := a.(core.CreateAction); ok && a.GetResource().Resource == resource {
			return c.GetObject().(T)
		}
	}
	var zero T
	t.Fatalf("no %s was created", resource)
	return zero
}

// applied returns what the first server-side apply of resource sent.
func applied[T runtime.Object](t *testing.T, actions []core.Action, resource string) T {
	t.Helper()
	for _, a := range actions {
		if p, ok := a.(core.PatchAction); ok && a.GetResource().Resource == resource && p.GetPatchType() == types.ApplyPatchType {
			obj := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
			if err := json.Unmarshal(p.GetPatch(), obj); err != nil {
				t.Fatal(err)
			}
			return obj
		}
	}
	var zero T
	t.Fatalf("no %s was applied", resource)
	return zero
}

func updated[T runtime.Object](t *testing.T, actions []core.Action, resource, subresource string) T {
	t.Helper()
	for _, a := range actions {
		if u, ok := a.(core.UpdateAction); ok && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			return u.GetObject().(T)
		}
	}
	var zero T
	t.Fatalf("no %s/%s was updated", resource, subresource)
	return zero
}

// convergedState returns the children and status a converged, ready database
// has, as the API server and the StatefulSet controller leave them.
func convergedState(t *testing.T, db *examplev1.MyDatabase) (*examplev1.MyDatabase, []runtime.Object, fakeStatuses) {
	t.Helper()
	f := newFixture(t, []*examplev1.MyDatabase{db})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	objects := storedChildren(t, f, db)
	replicas := desiredReplicas(db)
	for _, obj := range objects {
		if sts, ok := obj.(*appsv1.StatefulSet); ok {
			sts.Generation = 1
			sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: replicas, ReadyReplicas: replicas,
				UpdatedReplicas: replicas, CurrentRevision: "r1", UpdateRevision: "r1"}
		}
	}
	// The StatefulSet's pods, each instance manager serving its role.
	second := newFixture(t, []*examplev1.MyDatabase{db}, objects...)
	for i := 0; i < int(replicas); i++ {
		role := names.RoleReplica
		if i == 0 {
			role = names.RolePrimary
		}
		p := pod(db, i, role)
		objects = append(objects, p)
		second.kubeObjects = append(second.kubeObjects, p)
		second.statuses[p.Status.PodIP] = serving(p, db.Name+"-0")
	}
	// The status the controller writes once the StatefulSet is ready; the
	// certificates Secrets, once it reads the CA in its cache.
	if err := second.sync(); err != nil {
		t.Fatal(err)
	}
	for _, obj := range storedChildren(t, second, db) {
		if _, ok := obj.(*corev1.Secret); ok {
			objects = append(objects, obj)
		}
	}
	ready := db.DeepCopy()
	ready.Status = updated[*examplev1.MyDatabase](t, second.mydbClient.Actions(), "mydatabases", "status").Status
	return ready, objects, second.statuses
}

// storedChildren are the children the fake API server holds after f's
// sync of db, as the caches would hold them.
func storedChildren(t *testing.T, f *fixture, db *examplev1.MyDatabase) []runtime.Object {
	t.Helper()
	var objects []runtime.Object
	for _, a := range f.kubeClient.Actions() {
		var gvr schema.GroupVersionResource
		var name string
		switch a := a.(type) {
		case core.CreateAction:
			gvr, name = a.GetResource(), a.GetObject().(metav1.Object).GetName()
		case core.PatchAction:
			gvr, name = a.GetResource(), a.GetName()
		default:
			continue
		}
		obj, err := f.kubeClient.Tracker().Get(gvr, db.Namespace, name)
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, obj)
	}
	return objects
}

func findObject[T runtime.Object](objects []runtime.Object) T {
	for _, o := range objects {
		if t, ok := o.(T); ok {
			return t
		}
	}
	var zero T
	return zero
}

func TestCreatesChildren(t *testing.T) {
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase()})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites([]string{
		"create secrets prod-mysql-ca",
		"create secrets prod-mysql-instance-secrets",
		"create secrets prod-mysql-credentials",
		"create secrets prod-mysql-certificates",
		"create secrets prod-mysql-ca-bundle",
		"apply serviceaccounts prod-mysql-instance",
		"apply roles prod-mysql-instance",
		"apply rolebindings prod-mysql-instance",
		"apply services prod-mysql-headless",
		"apply services prod-mysql",
		"apply services prod-mysql-rw",
		"apply services prod-mysql-ro",
		"apply services prod-mysql-r",
		"apply statefulsets prod-mysql",
		"apply poddisruptionbudgets prod-mysql",
		"apply networkpolicies prod-mysql",
		"apply networkpolicies prod-mysql.dump",
	}, []string{"update mydatabases/status prod-mysql"})

	actions := f.kubeClient.Actions()
	sts := applied[*appsv1.StatefulSet](t, actions, "statefulsets")
	if *sts.Spec.Replicas != 3 || sts.Spec.ServiceName != "prod-mysql-headless" {
		t.Errorf("statefulset replicas %d service %q", *sts.Spec.Replicas, sts.Spec.ServiceName)
	}
	if n := len(sts.Spec.VolumeClaimTemplates); n != 1 || len(sts.Spec.Template.Spec.Volumes) != 4 {
		t.Errorf("want one claim template per replica and in the pod only the manager's, the credentials' and scratch volumes, got %d templates, volumes %v",
			n, sts.Spec.Template.Spec.Volumes)
	}
	podSpec := sts.Spec.Template.Spec
	if podSpec.ServiceAccountName != "prod-mysql-instance" || len(podSpec.InitContainers) != 1 ||
		podSpec.InitContainers[0].Image != "mydb:test" || !slices.Equal(podSpec.InitContainers[0].Command, []string{"/mydb-instance", "copy", "/mydb"}) {
		t.Errorf("pod service account %q, init containers %+v: want the instance manager copied from mydb's image", podSpec.ServiceAccountName, podSpec.InitContainers)
	}
	if c := podSpec.Containers[0]; !slices.Equal(c.Command, []string{"/mydb/mydb-instance"}) || !slices.Contains(c.Args, "--engine=mysql") ||
		!slices.Contains(c.Args, "--database=prod-mysql") || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("database container command %v args %v readiness %+v: want the instance manager, reporting readiness over HTTP", c.Command, c.Args, c.ReadinessProbe)
	}
	claim := sts.Spec.VolumeClaimTemplates[0]
	if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "50Gi" {
		t.Errorf("claim size %s, want 50Gi", got.String())
	}
	container := sts.Spec.Template.Spec.Containers[0]
	if container.Image != "docker.io/library/mysql:8.4.6" || container.Ports[0].ContainerPort != 3306 || container.VolumeMounts[0].MountPath != "/var/lib/mysql" {
		t.Errorf("container image %s port %d mount %s", container.Image, container.Ports[0].ContainerPort, container.VolumeMounts[0].MountPath)
	}
	if container.Resources.Limits.Memory().String() != "1Gi" || container.ReadinessProbe == nil || container.LivenessProbe == nil {
		t.Errorf("container resources %v, probes %v %v", container.Resources, container.ReadinessProbe, container.LivenessProbe)
	}
	if sc := container.SecurityContext; !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v", sc)
	}
	if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		t.Errorf("retention policy %+v, want Retain on delete", p)
	}
	for _, env := range container.Env {
		if env.ValueFrom == nil || env.ValueFrom.FieldRef == nil {
			t.Errorf("environment variable %s: want only the pod's own name, namespace and IP; credentials come as files", env.Name)
		}
	}

	secrets := map[string]*corev1.Secret{}
	for _, a := range actions {
		if c, ok := a.(core.CreateAction); ok && a.GetResource().Resource == "secrets" {
			secrets[c.GetObject().(*corev1.Secret).Name] = c.GetObject().(*corev1.Secret)
		}
	}
	instance, app, ca := secrets["prod-mysql-instance-secrets"], secrets["prod-mysql-credentials"], secrets["prod-mysql-ca"]
	if instance == nil || app == nil || ca == nil {
		t.Fatalf("created the Secrets %v, want the CA, the instance Secret and the credentials", maps.Keys(secrets))
	}
	if len(instance.Data["password"]) < 24 || len(instance.Data["superuser-password"]) < 24 || len(instance.Data["replication-password"]) < 24 ||
		string(instance.Data["password"]) == string(instance.Data["superuser-password"]) ||
		string(instance.Data["replication-password"]) == string(instance.Data["superuser-password"]) {
		t.Errorf("secret passwords are weak or equal")
	}
	// One credential per purpose: applications get their user and the CA
	// bundle, nothing that administers or replicates the database.
	if keys := slices.Sorted(maps.Keys(app.Data)); !slices.Equal(keys, []string{"ca.crt", "database", "password", "username"}) ||
		string(app.Data["password"]) != string(instance.Data["password"]) || string(app.Data["ca.crt"]) != string(ca.Data["ca.crt"]) {
		t.Errorf("the credentials Secret holds %v, want the application's user, password and database and the CA", keys)
	}
	if len(instance.Data["issuer.key"]) != 0 || len(instance.Data["ca.key"]) != 0 || len(ca.Data["ca.key"]) == 0 {
		t.Errorf("the instance Secret must hold passwords only (the issuer is the certificates Secret's), the CA Secret the CA's key")
	}
	// The instances' issuer is of the CA; the bundles hold the CA alone.
	certificates, bundle := secrets["prod-mysql-certificates"], secrets["prod-mysql-ca-bundle"]
	if certificates == nil || bundle == nil {
		t.Fatalf("created the Secrets %v, want the certificates and the CA bundle too", slices.Collect(maps.Keys(secrets)))
	}
	if issuer, err := pki.ParseCerts(certificates.Data["issuer.crt"]); err != nil || issuer[0].CheckSignatureFrom(mustParse(t, ca.Data["ca.crt"])) != nil ||
		len(certificates.Data["issuer.key"]) == 0 || string(certificates.Data["ca.crt"]) != string(ca.Data["ca.crt"]) ||
		string(bundle.Data["ca.crt"]) != string(ca.Data["ca.crt"]) || len(bundle.Data) != 1 {
		t.Errorf("the certificates Secret holds no issuer of the CA and the CA, or the bundle more than the CA (%v)", err)
	}
	// The Secrets name no owner: a MyDatabase that merely reads as absent
	// may not take them with it. Those with passwords are immutable; the
	// CA's change with a rotation.
	for name, secret := range secrets {
		immutable := !slices.Contains([]string{"prod-mysql-ca", "prod-mysql-certificates", "prod-mysql-ca-bundle"}, name)
		if len(secret.OwnerReferences) != 0 || secret.Immutable == nil || *secret.Immutable != immutable {
			t.Errorf("the Secret %s has owner references %+v and immutable %v, want none and %v", name, secret.OwnerReferences, secret.Immutable, immutable)
		}
	}
	// The pods mount the instance Secret's passwords and the certificates
	// Secret, not the applications' Secret.
	for _, v := range sts.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			t.Errorf("the pods mount the Secret %s", v.Secret.SecretName)
		}
		if v.Projected == nil {
			continue
		}
		var mounted []string
		for _, source := range v.Projected.Sources {
			if source.Secret == nil {
				t.Errorf("the pods' projected volume %s has a source of another kind: %+v", v.Name, source)
				continue
			}
			mounted = append(mounted, source.Secret.Name)
		}
		if !slices.Equal(mounted, []string{"prod-mysql-instance-secrets", "prod-mysql-certificates"}) {
			t.Errorf("the pods mount the Secrets %v", mounted)
		}
	}
	for _, secret := range secrets {
		if secret.Labels[names.LabelManagedBy] != names.ManagedBy || secret.Labels[names.LabelInstance] != "prod-mysql" {
			t.Errorf("%s labels %v", secret.Name, secret.Labels)
		}
	}
	for _, obj := range []metav1.Object{sts, applied[*corev1.Service](t, actions, "services"), applied[*policyv1.PodDisruptionBudget](t, actions, "poddisruptionbudgets")} {
		ref := metav1.GetControllerOf(obj)
		if ref == nil || ref.UID != "uid-1" || ref.Kind != "MyDatabase" || !*ref.BlockOwnerDeletion {
			t.Errorf("%s has controller reference %+v", obj.GetName(), ref)
		}
		if obj.GetLabels()[names.LabelManagedBy] != names.ManagedBy || obj.GetLabels()[names.LabelInstance] != "prod-mysql" {
			t.Errorf("%s labels %v", obj.GetName(), obj.GetLabels())
		}
	}

	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if status.ObservedGeneration != 1 || status.Endpoint != "prod-mysql.default.svc:3306" || status.Selector == "" {
		t.Errorf("status %+v", status)
	}
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonRollingOut {
		t.Errorf("Progressing = %+v", c)
	}
}

func TestPostgresGetsItsOwnPortAndPath(t *testing.T) {
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase(func(d *examplev1.MyDatabase) {
		d.Spec.Engine, d.Spec.Version = examplev1.EnginePostgres, "16"
	})})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
	c := sts.Spec.Template.Spec.Containers[0]
	if c.Image != "docker.io/library/postgres:16.10" || c.Ports[0].ContainerPort != 5432 || c.VolumeMounts[0].MountPath != "/var/lib/postgresql/data" {
		t.Errorf("postgres container: image %s port %d mount %s", c.Image, c.Ports[0].ContainerPort, c.VolumeMounts[0].MountPath)
	}
	svc := applied[*corev1.Service](t, f.kubeClient.Actions(), "services")
	if svc.Spec.Ports[0].Port != 5432 {
		t.Errorf("service port %d", svc.Spec.Ports[0].Port)
	}
}

func TestConvergedDatabaseCostsNoWrites(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites(nil, nil)
	if c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("a converged database is not Ready: %+v", db.Status.Conditions)
	}
}

func TestScale(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.Spec.Replicas, db.Generation = ptr.To[int32](5), 2
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites([]string{"apply statefulsets prod-mysql"}, []string{"update mydatabases/status prod-mysql"})
	if sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets"); *sts.Spec.Replicas != 5 {
		t.Errorf("replicas %d, want 5", *sts.Spec.Replicas)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if status.ObservedGeneration != 2 || meta.IsStatusConditionTrue(status.Conditions, examplev1.ConditionReady) {
		t.Errorf("after scaling: %+v", status)
	}
}

func TestScaleToOneDeletesTheDisruptionBudget(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.Spec.Replicas, db.Generation = ptr.To[int32](1), 2
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites([]string{"apply statefulsets prod-mysql", "delete poddisruptionbudgets prod-mysql"},
		[]string{"update mydatabases/status prod-mysql"})
}

func TestVersionChangeRollsTheImage(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase(func(d *examplev1.MyDatabase) { d.Spec.Version = "8.0" }))
	db.Spec.Version, db.Generation = "8.4", 2
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites([]string{"apply statefulsets prod-mysql"}, []string{"update mydatabases/status prod-mysql"})
	sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
	if img := sts.Spec.Template.Spec.Containers[0].Image; img != "docker.io/library/mysql:8.4.6" {
		t.Errorf("image %s", img)
	}
	if v := sts.Spec.Template.Labels[names.LabelVersion]; v != "8.4" {
		t.Errorf("pod version label %q", v)
	}
}

func TestDriftIsRepaired(t *testing.T) {
	tests := []struct {
		name  string
		drift func([]runtime.Object) []runtime.Object
		want  []string
	}{
		{name: "image edited by hand", want: []string{"apply statefulsets prod-mysql"},
			drift: func(objs []runtime.Object) []runtime.Object {
				findObject[*appsv1.StatefulSet](objs).Spec.Template.Spec.Containers[0].Image = "mysql:latest"
				return objs
			}},
		{name: "service port edited", want: []string{"apply services prod-mysql"},
			drift: func(objs []runtime.Object) []runtime.Object {
				for _, o := range objs {
					if svc, ok := o.(*corev1.Service); ok && svc.Name == "prod-mysql" {
						svc.Spec.Ports[0].Port = 13306
					}
				}
				return objs
			}},
		{name: "statefulset deleted", want: []string{"apply statefulsets prod-mysql"},
			drift: func(objs []runtime.Object) []runtime.Object { return without[*appsv1.StatefulSet](objs) }},
		{name: "headless service deleted", want: []string{"apply services prod-mysql-headless"},
			drift: func(objs []runtime.Object) []runtime.Object {
				var out []runtime.Object
				for _, o := range objs {
					if svc, ok := o.(*corev1.Service); ok && svc.Name == "prod-mysql-headless" {
						continue
					}
					out = append(out, o)
				}
				return out
			}},
		{name: "label removed", want: []string{"apply poddisruptionbudgets prod-mysql"},
			drift: func(objs []runtime.Object) []runtime.Object {
				delete(findObject[*policyv1.PodDisruptionBudget](objs).Labels, names.LabelManagedBy)
				return objs
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase())
			f := newFixture(t, []*examplev1.MyDatabase{db}, tc.drift(children)...)
			f.statuses = statuses
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			got := writes(f.kubeClient.Actions())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

func without[T runtime.Object](objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		if _, ok := o.(T); !ok {
			out = append(out, o)
		}
	}
	return out
}

func TestForeignChildIsLeftAlone(t *testing.T) {
	for name, labels := range map[string]map[string]string{
		// Not in the controller's cache: found by asking the API server.
		"unlabelled":         {"team": "other"},
		"labelled as mydb's": {names.LabelManagedBy: names.ManagedBy},
	} {
		t.Run(name, func(t *testing.T) {
			foreign := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql", Namespace: "default", Labels: labels}}
			f := newFixture(t, []*examplev1.MyDatabase{myDatabase()}, foreign)
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			for _, w := range writes(f.kubeClient.Actions()) {
				if strings.Contains(w, "statefulsets") {
					t.Errorf("touched the foreign StatefulSet: %s", w)
				}
			}
			var warnings []string
			for len(f.recorder.Events) > 0 {
				if ev := <-f.recorder.Events; strings.HasPrefix(ev, "Warning") {
					warnings = append(warnings, ev)
				}
			}
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "Warning ErrResourceExists") {
				t.Errorf("warnings %q, want one ErrResourceExists", warnings)
			}
			status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionDegraded)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonChildConflict || !strings.Contains(c.Message, `StatefulSet "prod-mysql"`) {
				t.Errorf("Degraded = %+v", c)
			}
		})
	}
}

func TestDeletedDatabaseCostsNoWrites(t *testing.T) {
	gone := myDatabase()
	deleting := myDatabase(func(d *examplev1.MyDatabase) { d.DeletionTimestamp = &metav1.Time{Time: now} })
	for name, dbs := range map[string][]*examplev1.MyDatabase{"not found": nil, "being deleted": {deleting}} {
		t.Run(name, func(t *testing.T) {
			_, children, statuses := convergedState(t, gone)
			f := newFixture(t, dbs, children...)
			f.statuses = statuses
			c := f.newController()
			if err := c.sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "prod-mysql"}); err != nil {
				t.Fatal(err)
			}
			f.expectWrites(nil, nil)
		})
	}
}

// deleteData is a database with deletionPolicy Delete, as the server
// stores it: with the finalizer.
func deleteData(d *examplev1.MyDatabase) {
	d.Spec.DeletionPolicy = examplev1.DeletionPolicyDelete
	d.Finalizers = append(d.Finalizers, examplev1.DeleteDataFinalizer)
}

// dataClaim is a claim the StatefulSet made for replica ordinal of db.
func dataClaim(db *examplev1.MyDatabase, ordinal int) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%s-%d", db.Name, ordinal), Namespace: db.Namespace,
			Labels: SelectorLabels(db), UID: types.UID(fmt.Sprintf("claim-%d", ordinal))},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

// TestClaimsAreNeverOwned: under either policy the StatefulSet keeps its
// claims unowned, so the garbage collector cannot take them with it.
func TestClaimsAreNeverOwned(t *testing.T) {
	for _, policy := range []examplev1.DeletionPolicy{examplev1.DeletionPolicyRetain, examplev1.DeletionPolicyDelete} {
		f := newFixture(t, []*examplev1.MyDatabase{myDatabase(func(d *examplev1.MyDatabase) {
			if policy == examplev1.DeletionPolicyDelete {
				deleteData(d)
			}
		})})
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
		if p := sts.Spec.PersistentVolumeClaimRetentionPolicy; p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
			p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
			t.Errorf("deletionPolicy %s: claim retention %+v, want Retain for both", policy, p)
		}
	}
}

// storedDatabase is the MyDatabase as the fake server now holds it (after
// the controller's patches).
func (f *fixture) storedDatabase(name string) *examplev1.MyDatabase {
	f.t.Helper()
	obj, err := f.mydbClient.Tracker().Get(examplev1.SchemeGroupVersion.WithResource("mydatabases"), "default", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return obj.(*examplev1.MyDatabase)
}

// TestDeleteDataFinalizerIsAddedToOlderDatabases: a database with
// deletionPolicy Delete made before the server set the finalizer gets it
// before anything else is done.
func TestDeleteDataFinalizerIsAddedToOlderDatabases(t *testing.T) {
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase(func(d *examplev1.MyDatabase) { d.Spec.DeletionPolicy = examplev1.DeletionPolicyDelete })})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites(nil, []string{"patch mydatabases prod-mysql"})
	db := f.storedDatabase("prod-mysql")
	if !slices.Contains(db.Finalizers, examplev1.DeleteDataFinalizer) {
		t.Errorf("finalizers %v, want %s", db.Finalizers, examplev1.DeleteDataFinalizer)
	}
}

// TestDeletionDeletesTheDataUnderDeletionPolicyDelete: only a deletion of
// the MyDatabase itself deletes its claims and credentials, after the
// StatefulSet, and then lets the database go.
func TestDeletionDeletesTheDataUnderDeletionPolicyDelete(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase(deleteData))
	deleting := db.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	// Another database's claim and a foreign claim with a matching name
	// are not this database's.
	other := dataClaim(myDatabase(func(d *examplev1.MyDatabase) { d.Name = "other" }), 0)
	children = append(children, dataClaim(db, 0), dataClaim(db, 1), dataClaim(db, 2), other)
	f := newFixture(t, []*examplev1.MyDatabase{deleting}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites([]string{
		"delete statefulsets prod-mysql",
		"delete persistentvolumeclaims data-prod-mysql-0",
		"delete persistentvolumeclaims data-prod-mysql-1",
		"delete persistentvolumeclaims data-prod-mysql-2",
		"delete secrets prod-mysql-credentials",
		"delete secrets prod-mysql-instance-secrets",
		"delete secrets prod-mysql-certificates",
		"delete secrets prod-mysql-ca-bundle",
		"delete secrets prod-mysql-ca",
	}, []string{"patch mydatabases prod-mysql"})
	if got := f.storedDatabase("prod-mysql").Finalizers; slices.Contains(got, examplev1.DeleteDataFinalizer) {
		t.Errorf("finalizers %v: the data is gone, the database must be let go", got)
	}
}

// TestDeletionWaitsForTheFinalBackup: the final backup reads the data, so
// nothing is deleted while its finalizer holds the database.
func TestDeletionWaitsForTheFinalBackup(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase(deleteData))
	deleting := db.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	deleting.Finalizers = append(deleting.Finalizers, examplev1.FinalBackupFinalizer)
	f := newFixture(t, []*examplev1.MyDatabase{deleting}, append(children, dataClaim(db, 0))...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites(nil, nil)
}

// TestOwnedSecretOfAnOlderVersionIsReported: a Secret an older mydb made
// with an owner reference, to this database or to an earlier one of its
// name (lost with its etcd and made again), is kept as it is (mydb may not
// update Secrets) and a Warning says how to remove the reference.
func TestOwnedSecretOfAnOlderVersionIsReported(t *testing.T) {
	for name, uid := range map[string]types.UID{"same database": "uid-1", "recreated database": "uid-old"} {
		t.Run(name, func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase())
			var secret *corev1.Secret
			children = slices.DeleteFunc(children, func(o runtime.Object) bool {
				s, ok := o.(*corev1.Secret)
				if ok && s.Name == "prod-mysql-credentials" {
					secret = s.DeepCopy()
					return true
				}
				return false
			})
			secret.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(
				myDatabase(func(d *examplev1.MyDatabase) { d.UID = uid }), examplev1.SchemeGroupVersion.WithKind("MyDatabase"))}
			children = append(children, secret)
			f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
			f.statuses = statuses
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			f.expectWrites(nil, nil)
			expectEvent(t, f.recorder, "Warning CredentialsOwned")
		})
	}
}

func TestStatusConflictIsRetried(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.Status = examplev1.MyDatabaseStatus{}
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	c := f.newController()
	conflicts := 1
	f.mydbClient.PrependReactor("update", "mydatabases", func(a core.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "example.com", Resource: "mydatabases"}, db.Name, fmt.Errorf("stale"))
		}
		return false, nil, nil
	})
	// Through the workers' own path: the conflict requeues the key with
	// backoff, and the retry succeeds and is forgotten.
	key := cache.ObjectName{Namespace: db.Namespace, Name: db.Name}
	c.queue.Add(key)
	runner.ProcessNext(context.Background(), c.queue, c.sync)
	if n := c.queue.NumRequeues(key); n != 1 {
		t.Fatalf("after the conflict the key was requeued %d times, want 1", n)
	}
	runner.ProcessNext(context.Background(), c.queue, c.sync)
	if got := writes(f.mydbClient.Actions()); len(got) != 2 {
		t.Errorf("status writes %v, want the failed one and the retry", got)
	}
	if n := c.queue.NumRequeues(key); n != 0 {
		t.Errorf("requeues = %d after the retry succeeded, want 0", n)
	}
}

func TestStorageGrowth(t *testing.T) {
	claim := func(i int) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-prod-mysql-%d", i), Namespace: "default",
				Labels: SelectorLabels(myDatabase())},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard"),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Gi")}}},
		}
	}
	for _, expandable := range []bool{true, false} {
		t.Run(fmt.Sprintf("expandable=%v", expandable), func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase())
			db.Spec.StorageSize, db.Generation = resource.MustParse("100Gi"), 2
			sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, AllowVolumeExpansion: ptr.To(expandable)}
			f := newFixture(t, []*examplev1.MyDatabase{db}, append(children, sc, claim(0), claim(1))...)
			f.statuses = statuses
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			degraded := meta.FindStatusCondition(status.Conditions, examplev1.ConditionDegraded)
			if expandable {
				if diff := cmp.Diff([]string{"apply persistentvolumeclaims data-prod-mysql-0", "apply persistentvolumeclaims data-prod-mysql-1"},
					writes(f.kubeClient.Actions())); diff != "" {
					t.Errorf("writes (-want +got):\n%s", diff)
				}
				grown, err := f.kubeClient.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data-prod-mysql-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := grown.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "100Gi" {
					t.Errorf("claim request %s, want 100Gi", got.String())
				}
				if degraded.Status != metav1.ConditionFalse {
					t.Errorf("Degraded = %+v", degraded)
				}
				return
			}
			if w := writes(f.kubeClient.Actions()); len(w) != 0 {
				t.Errorf("wrote %v although the StorageClass cannot expand", w)
			}
			if degraded.Status != metav1.ConditionTrue || degraded.Reason != ReasonStorageNotExpanding {
				t.Errorf("Degraded = %+v", degraded)
			}
		})
	}
}

func TestPausedDatabaseIsNotReconciled(t *testing.T) {
	paused := func(d *examplev1.MyDatabase) { d.Annotations = map[string]string{names.PausedAnnotation: "true"} }
	// Created paused: its empty status already says nothing reconciled it.
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase(paused)})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites(nil, nil)

	// Paused later: its status says so.
	db, children, _ := convergedState(t, myDatabase())
	paused(db)
	f = newFixture(t, []*examplev1.MyDatabase{db}, children...)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	f.expectWrites(nil, []string{"update mydatabases/status prod-mysql"})
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing); c.Reason != ReasonPaused {
		t.Errorf("Progressing = %+v", c)
	}
}

// TestDatabaseOutsideTheServedNamespacesIsLeftAlone: a database made before
// mydb was limited to other namespaces gets nothing, new credentials least
// of all (mydb may not read the Secret it has), and an Event says why.
func TestDatabaseOutsideTheServedNamespacesIsLeftAlone(t *testing.T) {
	for name, db := range map[string]*examplev1.MyDatabase{
		"new":           myDatabase(),
		"being deleted": myDatabase(deleteData, func(d *examplev1.MyDatabase) { d.DeletionTimestamp = &metav1.Time{Time: now} }),
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, []*examplev1.MyDatabase{db})
			f.namespaces = scope.Namespaces{"team-a"}
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			f.expectWrites(nil, nil)
			expectEvent(t, f.recorder, "Warning NamespaceNotServed")
		})
	}
}

// restoreBackup is a succeeded backup of another database, in S3.
func restoreBackup(phase examplev1.BackupPhase) *examplev1.MyDatabaseBackup {
	return &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default", UID: "uid-nightly"},
		Spec:       examplev1.MyDatabaseBackupSpec{DatabaseName: "prod-mysql"},
		Status: examplev1.MyDatabaseBackupStatus{Phase: phase, SizeBytes: 4096, Checksum: "abc123", Format: "mariadb-backup-xbstream",
			Location: &examplev1.BackupLocation{S3: &examplev1.S3Location{
				Endpoint: "http://127.0.0.1:9000", Bucket: "backups", Key: "default/prod-mysql/uid-1/nightly-uid-nightly",
				CredentialsSecret: examplev1.S3CredentialsSecret{Name: "s3", AccessKeyIDKey: "id", SecretAccessKeyKey: "key"},
			}}},
	}
}

// s3Secret is the user's Secret of the bucket's access key: not mydb's, so
// no informer caches it.
func s3Secret() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: "default"},
		Data: map[string][]byte{"id": []byte("AKID"), "key": []byte("s3cret")}}
}

func TestRestoreWaitsForItsBackup(t *testing.T) {
	restoring := myDatabase(func(d *examplev1.MyDatabase) {
		d.Name = "copy"
		d.Spec.RestoreFrom = &examplev1.RestoreSource{BackupName: "nightly"}
	})
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		wantSTS bool
	}{
		{name: "no backup yet"},
		{name: "backup running", objects: []runtime.Object{restoreBackup(examplev1.BackupPhaseRunning)}},
		{name: "backup succeeded", objects: []runtime.Object{restoreBackup(examplev1.BackupPhaseSucceeded)}, wantSTS: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*examplev1.MyDatabase{restoring}, tc.objects...)
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			var sts *appsv1.StatefulSet
			if slices.Contains(writes(f.kubeClient.Actions()), "apply statefulsets "+restoring.Name) {
				sts = applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
			}
			status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			progressing := meta.FindStatusCondition(status.Conditions, examplev1.ConditionProgressing)
			restored := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored)
			if !tc.wantSTS {
				if sts != nil {
					t.Fatal("a StatefulSet was created before its backup was ready")
				}
				if progressing.Reason != ReasonWaitingForRestore {
					t.Errorf("Progressing = %+v", progressing)
				}
				if restored == nil || restored.Status != metav1.ConditionFalse || restored.Reason != ReasonWaitingForBackup {
					t.Errorf("Restored = %+v, want False/%s", restored, ReasonWaitingForBackup)
				}
				return
			}
			if sts == nil {
				t.Fatal("no StatefulSet")
			}
			if args := sts.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--restore") {
				t.Errorf("instance manager args %v: want --restore", args)
			}
			for _, v := range sts.Spec.Template.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					t.Errorf("the pods mount the claim %q: a restore reads its bucket, no shared volume", v.PersistentVolumeClaim.ClaimName)
				}
			}
		})
	}
}

// fakeRestores answers the restore endpoint and records the requests.
type fakeRestores struct {
	restores []api.RestoreRequest
	auth     []string
	answer   *api.Operation
	err      error
}

func (f *fakeRestores) StartRestore(_ context.Context, address string, auth api.Auth, req api.RestoreRequest) (*api.Operation, error) {
	f.restores = append(f.restores, req)
	f.auth = append(f.auth, address+" "+who(auth))
	if f.err != nil {
		return nil, f.err
	}
	if f.answer != nil {
		return f.answer, nil
	}
	return &api.Operation{ID: req.ID, Phase: api.OperationRunning}, nil
}

// restoringState is a converged database restored from nightly, whose
// primary reports primary (and whose Restored condition is cond, if any).
func restoringState(t *testing.T, primary api.Status, cond *metav1.Condition) (*fixture, *fakeRestores) {
	t.Helper()
	db, children, statuses := convergedState(t, myDatabase(func(d *examplev1.MyDatabase) {
		d.Spec.Replicas = ptr.To[int32](1)
		d.Spec.RestoreFrom = &examplev1.RestoreSource{BackupName: "nightly"}
	}))
	// convergedState ran without the backup: it holds the database back.
	db.Status.Conditions = slices.DeleteFunc(db.Status.Conditions, func(c metav1.Condition) bool { return c.Type == examplev1.ConditionRestored })
	if cond != nil {
		meta.SetStatusCondition(&db.Status.Conditions, *cond)
	}
	primary.Name, primary.Primary = "prod-mysql-0", "prod-mysql-0"
	if primary.Role == "" {
		primary.Role = api.RolePrimary
	}
	statuses["10.244.0.10"] = primary
	f := newFixture(t, []*examplev1.MyDatabase{db}, append(children, restoreBackup(examplev1.BackupPhaseSucceeded), s3Secret())...)
	f.statuses = statuses
	ops := &fakeRestores{}
	f.restores = ops
	return f, ops
}

func TestRestoreSendsTheBackupToThePrimaryThatAwaitsIt(t *testing.T) {
	f, ops := restoringState(t, api.Status{AwaitingRestore: true, Reason: "awaiting a restore"}, nil)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	want := []api.RestoreRequest{{
		ID: "uid-1-uid-nightly",
		Source: api.Destination{S3: &api.S3Object{Endpoint: "http://127.0.0.1:9000", Bucket: "backups",
			Key: "default/prod-mysql/uid-1/nightly-uid-nightly", AccessKeyID: "AKID", SecretAccessKey: "s3cret"}},
		SHA256: "abc123", Size: 4096, Format: "mariadb-backup-xbstream",
	}}
	if diff := cmp.Diff(want, ops.restores); diff != "" {
		t.Errorf("restore requests (-want +got):\n%s", diff)
	}
	if len(ops.auth) != 1 || !strings.HasPrefix(ops.auth[0], "10.244.0.10 ") || strings.TrimPrefix(ops.auth[0], "10.244.0.10 ") == "" {
		t.Errorf("requests sent to %v, want the primary's address with the replication password", ops.auth)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonRestoring {
		t.Errorf("Restored = %+v, want False/Restoring", c)
	}
	if ready := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v while the primary awaits its data", ready)
	}
	expectEvent(t, f.recorder, "Normal Restoring")
}

func TestRestoreIsSentAgainToAManagerThatRestarted(t *testing.T) {
	// The controller saw the load running; the manager then restarted and
	// forgot it, and awaits its data again.
	restoring := &metav1.Condition{Type: examplev1.ConditionRestored, Status: metav1.ConditionFalse, Reason: ReasonRestoring, Message: "loading"}
	f, ops := restoringState(t, api.Status{AwaitingRestore: true}, restoring)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(ops.restores) != 1 || ops.restores[0].ID != "uid-1-uid-nightly" {
		t.Errorf("restore requests %+v, want the same restore asked again", ops.restores)
	}
	for len(f.recorder.Events) > 0 {
		if e := <-f.recorder.Events; strings.Contains(e, ReasonRestoring) {
			t.Errorf("event %q: the restore was already under way", e)
		}
	}
}

func TestRestoreRunningIsNotAskedAgain(t *testing.T) {
	f, ops := restoringState(t, api.Status{AwaitingRestore: true,
		Restore: &api.Operation{ID: "uid-1-uid-nightly", Phase: api.OperationRunning, Bytes: 1024}}, nil)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(ops.restores) != 0 {
		t.Errorf("restore requests %+v while one runs", ops.restores)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored); c == nil || c.Reason != ReasonRestoring || !strings.Contains(c.Message, "1024 bytes") {
		t.Errorf("Restored = %+v, want Restoring with the bytes so far", c)
	}
}

func TestFailedRestoreIsAConditionAndAWarning(t *testing.T) {
	f, ops := restoringState(t, api.Status{AwaitingRestore: true,
		Restore: &api.Operation{ID: "uid-1-uid-nightly", Phase: api.OperationFailed, Message: "sha256 mismatch"}}, nil)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(ops.restores) != 0 {
		t.Errorf("restore requests %+v: a failed load is not retried behind the user's back", ops.restores)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonRestoreFailed || !strings.Contains(c.Message, "sha256 mismatch") {
		t.Errorf("Restored = %+v, want False/RestoreFailed with the manager's message", c)
	}
	if ready := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v after a failed restore", ready)
	}
	expectEvent(t, f.recorder, "Warning RestoreFailed")
}

func TestRestoreRefusedByTheManagerFails(t *testing.T) {
	f, ops := restoringState(t, api.Status{AwaitingRestore: true}, nil)
	ops.err = fmt.Errorf("%w: format: Unsupported value", api.ErrRefused)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored); c == nil || c.Reason != ReasonRestoreFailed || !strings.Contains(c.Message, "Unsupported") {
		t.Errorf("Restored = %+v, want RestoreFailed with the manager's reason", c)
	}
	expectEvent(t, f.recorder, "Warning RestoreFailed")
}

func TestRestoreOfAnotherDatabasesOperationIsNotOurs(t *testing.T) {
	// The manager reports a restore with another ID: this database asks its own.
	f, ops := restoringState(t, api.Status{AwaitingRestore: true,
		Restore: &api.Operation{ID: "other", Phase: api.OperationFailed, Message: "no"}}, nil)
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(ops.restores) != 1 {
		t.Errorf("restore requests %+v, want this database's", ops.restores)
	}
}

func TestRestoredOnceThePrimaryServes(t *testing.T) {
	f, _ := restoringState(t, api.Status{Ready: true,
		Restore: &api.Operation{ID: "uid-1-uid-nightly", Phase: api.OperationSucceeded}},
		&metav1.Condition{Type: examplev1.ConditionRestored, Status: metav1.ConditionFalse, Reason: ReasonRestoring, Message: "loading"})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonRestored {
		t.Errorf("Restored = %+v, want True", c)
	}
	expectEvent(t, f.recorder, "Normal Restored")
}

func TestRestoreWithoutItsCredentialsFails(t *testing.T) {
	f, ops := restoringState(t, api.Status{AwaitingRestore: true}, nil)
	f.kubeObjects = slices.DeleteFunc(f.kubeObjects, func(o runtime.Object) bool {
		s, ok := o.(*corev1.Secret)
		return ok && s.Name == "s3"
	})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if len(ops.restores) != 0 {
		t.Errorf("restore requests %+v without credentials", ops.restores)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	if c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored); c == nil || c.Reason != ReasonRestoreFailed || !strings.Contains(c.Message, `"s3"`) {
		t.Errorf("Restored = %+v, want RestoreFailed naming the Secret", c)
	}
}

// expectEvent checks that the first event begins with prefix.
func expectEvent(t *testing.T, recorder *record.FakeRecorder, prefix string) {
	t.Helper()
	for {
		select {
		case e := <-recorder.Events:
			if strings.HasPrefix(e, prefix) {
				return
			}
		default:
			t.Errorf("no event %q", prefix)
			return
		}
	}
}

func TestForeignSecretIsReportedNotRetried(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "prod-mysql-credentials", Namespace: "default"}}
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase()}, foreign)
	if err := f.sync(); err != nil {
		t.Fatalf("a foreign Secret must be reported, not retried: %v", err)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionDegraded)
	if c == nil || c.Reason != ReasonChildConflict || !strings.Contains(c.Message, `Secret "prod-mysql-credentials"`) {
		t.Errorf("Degraded = %+v", c)
	}
}

func TestRolesFollowTheCurrentPrimary(t *testing.T) {
	for _, tc := range []struct {
		name           string
		currentPrimary string
		wantPrimary    string
	}{
		{name: "a new database's primary is its first pod", wantPrimary: "prod-mysql-0"},
		{name: "the current primary keeps its role", currentPrimary: "prod-mysql-1", wantPrimary: "prod-mysql-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, children, _ := convergedState(t, myDatabase())
			db.Status.CurrentPrimary = tc.currentPrimary
			// Pods as the StatefulSet controller makes them: no role yet.
			children = without[*corev1.Pod](children)
			var pods []runtime.Object
			for i := 0; i < 3; i++ {
				pods = append(pods, pod(db, i, ""))
			}
			f := newFixture(t, []*examplev1.MyDatabase{db}, append(children, pods...)...)
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				name := fmt.Sprintf("prod-mysql-%d", i)
				got, err := f.kubeClient.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want := names.RoleReplica
				if name == tc.wantPrimary {
					want = names.RolePrimary
				}
				if got.Labels[names.LabelRole] != want || got.Labels[names.LabelInstance] != "prod-mysql" {
					t.Errorf("pod %s labels %v, want role %s and its other labels kept", name, got.Labels, want)
				}
			}
			status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			if status.CurrentPrimary != tc.wantPrimary {
				t.Errorf("status.currentPrimary = %q, want %q", status.CurrentPrimary, tc.wantPrimary)
			}
		})
	}
}

func TestInstanceStatusReportsWhatTheManagersSay(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	// Replica 2's manager is down; replica 1 still follows an old primary.
	delete(statuses, "10.244.0.12")
	stale := statuses["10.244.0.11"]
	stale.Primary = "prod-mysql-7"
	statuses["10.244.0.11"] = stale
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	want := []examplev1.InstanceStatus{
		{Name: "prod-mysql-0", Address: "10.244.0.10", Role: examplev1.InstanceRolePrimary, Ready: true, Revision: "r1"},
		{Name: "prod-mysql-1", Address: "10.244.0.11", Role: examplev1.InstanceRoleReplica, Revision: "r1",
			Message: `the instance still follows "prod-mysql-7" as its primary`},
		{Name: "prod-mysql-2", Address: "10.244.0.12", Role: examplev1.InstanceRoleReplica, Revision: "r1",
			Message: "the instance manager did not answer: dial tcp 10.244.0.12:8000: connection refused"},
	}
	if diff := cmp.Diff(want, status.Instances); diff != "" {
		t.Errorf("status.instances (-want +got):\n%s", diff)
	}
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReplicating)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonReplicasBehind ||
		!strings.Contains(c.Message, "prod-mysql-1: ") || !strings.Contains(c.Message, "prod-mysql-2: ") {
		t.Errorf("Replicating = %+v, want False naming both replicas", c)
	}
	if c := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionReplicating); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonReplicasStreaming {
		t.Errorf("the converged database: Replicating = %+v, want True", c)
	}
}

// TestALostInstanceKeepsItsLastPosition: a manager that stops answering
// keeps, in status.instances, the position it reported last, so a Sync
// failover knows how far a replica lost with the primary went, across a
// leader change too.
func TestALostInstanceKeepsItsLastPosition(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	db.Status.Instances[2].Position = &examplev1.InstancePosition{GTID: "0-1-42"}
	delete(statuses, "10.244.0.12")
	up := statuses["10.244.0.11"]
	up.Position = &api.Position{GTID: "0-1-40"}
	statuses["10.244.0.11"] = up
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	got := map[string]*examplev1.InstancePosition{}
	for _, in := range status.Instances {
		got[in.Name] = in.Position
	}
	if p := got["prod-mysql-2"]; p == nil || p.GTID != "0-1-42" {
		t.Errorf("the lost instance's position %+v, want the last reported 0-1-42", p)
	}
	if p := got["prod-mysql-1"]; p == nil || p.GTID != "0-1-40" {
		t.Errorf("the answering instance's position %+v, want its report 0-1-40", p)
	}
}

func TestOrdinal(t *testing.T) {
	db := myDatabase()
	for pod, want := range map[string]int{"prod-mysql-0": 0, "prod-mysql-12": 12, "prod-mysql-x": -1, "prod-mysql-01": -1, "other-0": -1, "prod-mysql--1": -1} {
		if got := ordinal(db, pod); got != want {
			t.Errorf("ordinal(%q) = %d, want %d", pod, got, want)
		}
	}
}

func TestInstanceMetricsFollowTheInstances(t *testing.T) {
	RegisterMetrics()
	db, children, statuses := convergedState(t, myDatabase())
	lagging := statuses["10.244.0.11"]
	lagging.LagSeconds, lagging.LagBytes = ptr.To(2.5), ptr.To[int64](4096)
	statuses["10.244.0.11"] = lagging
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP mydb_instance_replication_lag_bytes [ALPHA] How much WAL a Postgres replica has yet to replay, as its manager last reported.
# TYPE mydb_instance_replication_lag_bytes gauge
mydb_instance_replication_lag_bytes{database="prod-mysql",instance="prod-mysql-1",namespace="default"} 4096
# HELP mydb_instance_replication_lag_seconds [ALPHA] How far a replica is behind its primary in time, as its manager last reported.
# TYPE mydb_instance_replication_lag_seconds gauge
mydb_instance_replication_lag_seconds{database="prod-mysql",instance="prod-mysql-1",namespace="default"} 2.5
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want),
		"mydb_instance_replication_lag_bytes", "mydb_instance_replication_lag_seconds"); err != nil {
		t.Error(err)
	}
	// A health line moves the lag between polls; one of a pod the polls
	// do not know brings no series.
	key := cache.ObjectName{Namespace: "default", Name: "prod-mysql"}
	series.observeLag(key, "prod-mysql-1", api.Health{LagSeconds: ptr.To(0.5), LagBytes: ptr.To[int64](128)})
	series.observeLag(key, "prod-mysql-9", api.Health{LagSeconds: ptr.To(9.0)})
	want = strings.ReplaceAll(strings.ReplaceAll(want, "} 4096", "} 128"), "} 2.5", "} 0.5")
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want),
		"mydb_instance_replication_lag_bytes", "mydb_instance_replication_lag_seconds"); err != nil {
		t.Errorf("after health lines: %v", err)
	}

	// The database is deleted: its series go with it.
	gone := newFixture(t, nil)
	c := gone.newController()
	if err := c.sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "prod-mysql"}); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(""),
		"mydb_instance_ready", "mydb_instance_replication_lag_seconds", "mydb_instance_replication_lag_bytes"); err != nil {
		t.Errorf("series left for a deleted database: %v", err)
	}
}

func TestDegradedWhenTheRolloutIsBlocked(t *testing.T) {
	quotaEvent := func(age time.Duration) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "prod-mysql.1", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Name: "prod-mysql", Namespace: "default"},
			Reason:         "FailedCreate", Type: corev1.EventTypeWarning,
			Message:       `create Claim data-prod-mysql-2 for Pod prod-mysql-2 in StatefulSet prod-mysql failed error: persistentvolumeclaims "data-prod-mysql-2" is forbidden: exceeded quota: storage, requested: requests.storage=50Gi, used: requests.storage=100Gi, limited: requests.storage=100Gi`,
			LastTimestamp: metav1.NewTime(now.Add(-age)),
		}
	}
	for _, tc := range []struct {
		name        string
		change      func(objects []runtime.Object) []runtime.Object
		event       *corev1.Event
		wantReason  string
		wantMessage string
	}{
		{name: "a claim waits for a StorageClass that does not exist",
			change: func(objs []runtime.Object) []runtime.Object {
				return append(objs, &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: "data-prod-mysql-0", Namespace: "default", Labels: SelectorLabels(myDatabase())},
					Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast-ssd")},
					Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
				})
			},
			wantReason: ReasonStorageClassNotFound, wantMessage: `PersistentVolumeClaim "data-prod-mysql-0" waits for StorageClass "fast-ssd", which does not exist`},
		{name: "an image cannot be pulled",
			change: func(objs []runtime.Object) []runtime.Object {
				p := findObject[*corev1.Pod](objs)
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: databasepod.DatabaseContainerName, State: corev1.ContainerState{
					Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
				return objs
			},
			wantReason: ReasonImagePullFailed, wantMessage: `container "database" of pod "prod-mysql-0": ImagePullBackOff: Back-off pulling image`},
		{name: "a pod cannot be scheduled",
			change: func(objs []runtime.Object) []runtime.Object {
				p := findObject[*corev1.Pod](objs)
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: 3 Insufficient memory."}}
				return objs
			},
			wantReason: ReasonUnschedulable, wantMessage: `pod "prod-mysql-0" cannot be scheduled: 0/3 nodes are available: 3 Insufficient memory.`},
		{name: "a new pod waits for its claim to bind",
			change: func(objs []runtime.Object) []runtime.Object {
				p := findObject[*corev1.Pod](objs)
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
					LastTransitionTime: metav1.NewTime(now.Add(-5 * time.Second))}}
				return objs
			},
			wantReason: ReasonAsExpected},
		{name: "a new pod waits for its claim's volume",
			change: func(objs []runtime.Object) []runtime.Object {
				p := findObject[*corev1.Pod](objs)
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: `0/3 nodes are available: persistentvolumeclaim "data-prod-mysql-0" bound to non-existent persistentvolume "".`,
					LastTransitionTime: metav1.NewTime(now.Add(-5 * time.Second))}}
				return objs
			},
			wantReason: ReasonAsExpected},
		{name: "a pod waits too long for its claim to bind",
			change: func(objs []runtime.Object) []runtime.Object {
				p := findObject[*corev1.Pod](objs)
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
					LastTransitionTime: metav1.NewTime(now.Add(-claimBindGrace))}}
				return objs
			},
			wantReason: ReasonUnschedulable, wantMessage: "unbound immediate PersistentVolumeClaims"},
		{name: "the StatefulSet controller was refused a claim",
			change: func(objs []runtime.Object) []runtime.Object {
				findObject[*appsv1.StatefulSet](objs).Status.Replicas = 2
				return objs
			},
			event: quotaEvent(time.Minute), wantReason: ReasonFailedCreate, wantMessage: "exceeded quota: storage"},
		{name: "an old refusal no longer counts",
			change: func(objs []runtime.Object) []runtime.Object {
				findObject[*appsv1.StatefulSet](objs).Status.Replicas = 2
				return objs
			},
			event: quotaEvent(time.Hour), wantReason: ReasonAsExpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase())
			for i, obj := range children {
				children[i] = obj.DeepCopyObject()
			}
			children = tc.change(children)
			f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
			f.statuses = statuses
			c := f.newController()
			if tc.event != nil {
				if _, err := f.kubeClient.CoreV1().Events("default").Create(context.Background(), tc.event, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.sync(context.Background(), cache.ObjectName{Namespace: "default", Name: "prod-mysql"}); err != nil {
				t.Fatal(err)
			}
			status := db.Status
			for _, a := range f.mydbClient.Actions() {
				if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "status" {
					status = u.GetObject().(*examplev1.MyDatabase).Status
				}
			}
			c2 := meta.FindStatusCondition(status.Conditions, examplev1.ConditionDegraded)
			if c2 == nil || c2.Reason != tc.wantReason || !strings.Contains(c2.Message, tc.wantMessage) {
				t.Errorf("Degraded = %+v, want reason %s and a message with %q", c2, tc.wantReason, tc.wantMessage)
			}
			if want := tc.wantReason != ReasonAsExpected; (c2 != nil && c2.Status == metav1.ConditionTrue) != want {
				t.Errorf("Degraded status %s, want True: %v", c2.Status, want)
			}
		})
	}
}

// TestLostCredentialsAreNotRemade: with the Secret gone and the data still
// there, mydb makes no new passwords and says why.
func TestLostCredentialsAreNotRemade(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	children = without[*corev1.Secret](children)
	children = append(children, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-prod-mysql-0", Namespace: "default", Labels: SelectorLabels(db)},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	})
	f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	for _, w := range writes(f.kubeClient.Actions()) {
		if strings.Contains(w, "secrets") {
			t.Errorf("wrote a Secret for a database that has data: %s", w)
		}
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionDegraded)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonCredentialsMissing || !strings.Contains(c.Message, `Secret "prod-mysql-instance-secrets"`) {
		t.Errorf("Degraded = %+v, want CredentialsMissing", c)
	}
}

func TestRestoredDatabaseIsNotReadyBeforeItsData(t *testing.T) {
	db := myDatabase(func(d *examplev1.MyDatabase) {
		d.Spec.Replicas = ptr.To[int32](1)
		d.Spec.RestoreFrom = &examplev1.RestoreSource{BackupName: "nightly"}
	})
	eng, _ := engine.Lookup(string(db.Spec.Engine))
	// Every pod reports ready, as a pod whose readiness probe is not the
	// instance's might.
	sts := &appsv1.StatefulSet{Status: appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1}}
	for _, tc := range []struct {
		name       string
		restored   *metav1.Condition
		wantReady  metav1.ConditionStatus
		wantReason string
	}{
		{name: "loading", restored: restoredCondition(metav1.ConditionFalse, ReasonRestoring, "loading"), wantReady: metav1.ConditionFalse, wantReason: ReasonRestoring},
		{name: "failed", restored: restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed, "sha256 mismatch"), wantReady: metav1.ConditionFalse, wantReason: ReasonRestoreFailed},
		{name: "loaded", restored: restoredCondition(metav1.ConditionTrue, ReasonRestored, "loaded"), wantReady: metav1.ConditionTrue, wantReason: ReasonAllReplicasReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serving := []examplev1.InstanceStatus{{Name: "prod-mysql-0", Role: examplev1.InstanceRolePrimary, Ready: true}}
			status := computeStatus(db, eng, sts, findings{restored: tc.restored, primary: "prod-mysql-0", instances: serving}, false, metav1.NewTime(now))
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionReady)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason {
				t.Errorf("Ready = %+v, want %s/%s", c, tc.wantReady, tc.wantReason)
			}
		})
	}
}

// A pod whose IP an earlier pod had, whose manager still answers there (a
// ready primary of another database), is not taken for restored.
func TestAnotherPodsManagerAtTheIPIsNotThisInstance(t *testing.T) {
	f, ops := restoringState(t, api.Status{AwaitingRestore: true}, nil)
	f.statuses["10.244.0.10"] = api.Status{Name: "src-0", Role: api.RolePrimary, Primary: "src-0", Ready: true}
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if c := restoredCond(t, f); c == nil || c.Status == metav1.ConditionTrue {
		t.Errorf("Restored = %+v while another database's manager answers at the primary's IP", c)
	}
	if len(ops.restores) != 0 {
		t.Errorf("asked %+v of another database's manager", ops.restores)
	}
}

// fakeStoreGuard records the revisions it is asked to cover and answers err.
type fakeStoreGuard struct {
	covered []int64
	err     error
}

func (g *fakeStoreGuard) Cover(_ context.Context, revision int64) error {
	g.covered = append(g.covered, revision)
	return g.err
}

func TestTheClusterFollowsOnlyWhatTheStoreGuardCovers(t *testing.T) {
	// Generation 2 at resourceVersion 42, the status still at generation 1.
	changed := func(d *examplev1.MyDatabase) {
		d.Generation, d.ResourceVersion, d.Status.ObservedGeneration = 2, "42", 1
	}
	t.Run("a spec not covered changes nothing", func(t *testing.T) {
		guard := &fakeStoreGuard{err: errors.New("the store is not verified")}
		f := newFixture(t, []*examplev1.MyDatabase{myDatabase(changed)})
		f.store = guard
		if err := f.sync(); err == nil || !strings.Contains(err.Error(), "the store is not verified") {
			t.Fatalf("sync: %v, want the guard's error", err)
		}
		f.expectWrites(nil, nil)
		if want := []int64{42}; !slices.Equal(guard.covered, want) {
			t.Fatalf("covered %v, want %v", guard.covered, want)
		}
	})
	t.Run("a covered spec is acted on", func(t *testing.T) {
		guard := &fakeStoreGuard{}
		f := newFixture(t, []*examplev1.MyDatabase{myDatabase(changed)})
		f.store = guard
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		if got := writes(f.kubeClient.Actions()); !slices.Contains(got, "apply statefulsets prod-mysql") {
			t.Fatalf("writes %q, want the StatefulSet", got)
		}
		if want := []int64{42}; !slices.Equal(guard.covered, want) {
			t.Fatalf("covered %v, want %v", guard.covered, want)
		}
	})
	t.Run("a spec the status says was acted on needs no cover", func(t *testing.T) {
		db, children, statuses := convergedState(t, myDatabase())
		guard := &fakeStoreGuard{err: errors.New("must not be asked")}
		f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
		f.statuses, f.store = statuses, guard
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		if len(guard.covered) != 0 {
			t.Fatalf("covered %v for a converged database", guard.covered)
		}
	})
	t.Run("a deletion not covered deletes nothing", func(t *testing.T) {
		db, children, statuses := convergedState(t, myDatabase(deleteData))
		deleting := db.DeepCopy()
		deleting.DeletionTimestamp, deleting.ResourceVersion = &metav1.Time{Time: now}, "43"
		guard := &fakeStoreGuard{err: errors.New("the store is not verified")}
		f := newFixture(t, []*examplev1.MyDatabase{deleting}, append(children, dataClaim(db, 0))...)
		f.statuses, f.store = statuses, guard
		if err := f.sync(); err == nil {
			t.Fatal("sync deleted with the guard refusing")
		}
		f.expectWrites(nil, nil)
		if want := []int64{43}; !slices.Equal(guard.covered, want) {
			t.Fatalf("covered %v, want %v", guard.covered, want)
		}
	})
}

// TestOnlyTheStatefulSetsPodsAreInstances: a pod is an instance only when
// db's StatefulSet controls it (by UID) and its ordinal is below the
// StatefulSet's replicas. Labels and a <db>-<n> name prove nothing: a pod
// anyone could add, reporting a position beyond every replica's, would be
// chosen by a failover or sent backups.
func TestOnlyTheStatefulSetsPodsAreInstances(t *testing.T) {
	db, children, statuses := convergedState(t, myDatabase())
	impostor := func(p *corev1.Pod) *corev1.Pod {
		statuses[p.Status.PodIP] = api.Status{Name: p.Name, Role: api.RoleReplica, Primary: "prod-mysql-0", Ready: true,
			EngineRunning: true, Position: &api.Position{GTID: "0-1-999999"}}
		return p
	}
	var objects []runtime.Object
	for _, obj := range children {
		if p, ok := obj.(*corev1.Pod); ok && p.Name == "prod-mysql-2" {
			// Made by someone else under the instance's name and labels.
			p = p.DeepCopy()
			p.OwnerReferences = nil
			obj = impostor(p)
		}
		objects = append(objects, obj)
	}
	// The StatefulSet's own pod, but beyond its replicas.
	beyond := pod(db, 3, "")
	objects = append(objects, impostor(beyond))
	// Controlled by another StatefulSet of the same name (an earlier one).
	other := pod(db, 4, "")
	other.OwnerReferences[0].UID = "an-earlier-statefulset"
	objects = append(objects, impostor(other))

	f := newFixture(t, []*examplev1.MyDatabase{db}, objects...)
	f.statuses = statuses
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	var got []string
	for _, in := range status.Instances {
		got = append(got, in.Name)
	}
	if want := []string{"prod-mysql-0", "prod-mysql-1"}; !slices.Equal(got, want) {
		t.Errorf("status.instances %v, want %v", got, want)
	}
	for _, a := range f.kubeClient.Actions() {
		if p, ok := a.(core.PatchAction); ok && a.GetResource().Resource == "pods" && p.GetName() != "prod-mysql-0" && p.GetName() != "prod-mysql-1" {
			t.Errorf("mydb labelled %s, which is not its instance", p.GetName())
		}
	}
}

// who is the manager auth reaches, when it carries credentials of the
// database's CA.
func who(auth api.Auth) string {
	if auth.Credentials == nil || auth.Credentials.Roots == nil {
		return "without-credentials"
	}
	return auth.Name
}
