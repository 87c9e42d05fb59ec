package quota

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/databasepod"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/scaled"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

const ns = "team"

func q(s string) resource.Quantity { return resource.MustParse(s) }

// quotaOf is a quota whose usage kube's quota controller has computed.
func quotaOf(name string, hard, used corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		Status:     corev1.ResourceQuotaStatus{Hard: hard, Used: used},
	}
}

// db is an internal MyDatabase as admission sees it (defaulted).
func db(name string, replicas int32, size string, mutate ...func(*example.MyDatabase)) *example.MyDatabase {
	d := &example.MyDatabase{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: example.MyDatabaseSpec{
			Engine: example.EnginePostgres, Version: "17", Replicas: replicas, StorageSize: q(size),
			Resources: *examplev1.DefaultResources.DeepCopy(), DeletionPolicy: example.DeletionPolicyRetain,
		},
	}
	for _, m := range mutate {
		m(d)
	}
	return d
}

// stored is the versioned copy the informer holds.
func stored(d *example.MyDatabase) *examplev1.MyDatabase {
	v := &examplev1.MyDatabase{
		ObjectMeta: *d.ObjectMeta.DeepCopy(),
		Spec: examplev1.MyDatabaseSpec{
			Engine: examplev1.Engine(d.Spec.Engine), Version: d.Spec.Version, Replicas: ptr.To(d.Spec.Replicas),
			StorageSize: d.Spec.StorageSize, StorageClassName: d.Spec.StorageClassName, Resources: d.Spec.Resources,
		},
	}
	if d.Spec.Backup != nil {
		v.Spec.Backup = &examplev1.BackupPolicy{Schedule: d.Spec.Backup.Schedule}
	}
	v.ResourceVersion = "5"
	return v
}

func claim(name, size string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{names.LabelManagedBy: names.ManagedBy}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q(size)}}},
	}
}

func pod(name string, resources corev1.ResourceRequirements) *corev1.Pod {
	p := databasepod.Pod(resources)
	p.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{names.LabelManagedBy: names.ManagedBy}}
	p.Status.Phase = corev1.PodRunning
	return p
}

func defaultClass(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}}}
}

// newPlugin initializes the plugin as the server does, on fake clusters.
func newPlugin(t *testing.T, kubeObjects []runtime.Object, dbs ...*example.MyDatabase) *Plugin {
	t.Helper()
	var mydbObjects []runtime.Object
	for _, d := range dbs {
		mydbObjects = append(mydbObjects, stored(d))
	}
	kube := kubefake.NewClientset(kubeObjects...)
	kubeFactory := informers.NewSharedInformerFactory(kube, 0)
	own := mydbinformers.NewSharedInformerFactory(mydbfake.NewClientset(mydbObjects...), 0)
	p, err := NewPlugin()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	p.SetDrainedNotification(stop)
	p.SetExternalKubeClientSet(kube)
	p.SetExternalKubeInformerFactory(kubeFactory)
	p.SetQuotaConfiguration(generic.NewConfiguration(nil, nil))
	p.SetMyDatabaseInformers(own)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	kubeFactory.Start(stop)
	own.Start(stop)
	if err := p.waitForCaches(context.Background()); err != nil {
		t.Fatal(err)
	}
	return p
}

var tenant = &user.DefaultInfo{Name: "tenant"}

func create(d *example.MyDatabase, dryRun bool) admission.Attributes {
	return admission.NewAttributesRecord(d, nil, v1.WithKind("MyDatabase"), ns, d.Name, v1.WithResource("mydatabases"), "",
		admission.Create, &metav1.CreateOptions{}, dryRun, tenant)
}

// update changes old, which is stored (it has a resourceVersion), into d.
func update(d, old *example.MyDatabase) admission.Attributes {
	old = old.DeepCopy()
	old.ResourceVersion = "5"
	return admission.NewAttributesRecord(d, old, v1.WithKind("MyDatabase"), ns, d.Name, v1.WithResource("mydatabases"), "",
		admission.Update, &metav1.UpdateOptions{}, false, tenant)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func storageQuota(hard, used string) *corev1.ResourceQuota {
	return quotaOf("storage", corev1.ResourceList{corev1.ResourceRequestsStorage: q(hard)}, corev1.ResourceList{corev1.ResourceRequestsStorage: q(used)})
}

func TestCreatesAndUpdates(t *testing.T) {
	fast := ptr.To("fast")
	two := db("shop", 2, "50Gi")
	three := db("shop", 3, "50Gi")
	cases := []struct {
		name    string
		kube    []runtime.Object
		dbs     []*example.MyDatabase // in the informer
		attrs   admission.Attributes
		wantErr string
	}{{
		name:    "3x50Gi does not fit 100Gi",
		kube:    []runtime.Object{storageQuota("100Gi", "0")},
		attrs:   create(three, false),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=150Gi, used: requests.storage=0, limited: requests.storage=100Gi`,
	}, {
		name:    "dry run is refused alike",
		kube:    []runtime.Object{storageQuota("100Gi", "0")},
		attrs:   create(three, true),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=150Gi, used: requests.storage=0, limited: requests.storage=100Gi`,
	}, {
		name:  "2x50Gi fits 100Gi",
		kube:  []runtime.Object{storageQuota("100Gi", "0")},
		attrs: create(two, false),
	}, {
		name:    "scale to 3 once the claims exist",
		kube:    []runtime.Object{storageQuota("100Gi", "100Gi"), claim("data-shop-0", "50Gi", nil), claim("data-shop-1", "50Gi", nil)},
		dbs:     []*example.MyDatabase{two},
		attrs:   update(three, two),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=50Gi, used: requests.storage=100Gi, limited: requests.storage=100Gi`,
	}, {
		name:    "scale to 3 before the claims exist: what the database will make counts",
		kube:    []runtime.Object{storageQuota("100Gi", "0")},
		dbs:     []*example.MyDatabase{two},
		attrs:   update(three, two),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=50Gi, used: requests.storage=100Gi, limited: requests.storage=100Gi`,
	}, {
		name:  "scaling down is never refused",
		kube:  []runtime.Object{storageQuota("100Gi", "150Gi")},
		dbs:   []*example.MyDatabase{three},
		attrs: update(two, three),
	}, {
		name:    "another database's claims to come count",
		kube:    []runtime.Object{storageQuota("100Gi", "0")},
		dbs:     []*example.MyDatabase{db("other", 1, "50Gi")},
		attrs:   create(two, false),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=100Gi, used: requests.storage=50Gi, limited: requests.storage=100Gi`,
	}, {
		name:  "another database's existing claims count once",
		kube:  []runtime.Object{storageQuota("200Gi", "100Gi"), claim("data-other-0", "50Gi", nil), claim("data-other-1", "50Gi", nil)},
		dbs:   []*example.MyDatabase{db("other", 2, "50Gi")},
		attrs: create(two, false),
	}, {
		name:    "storage growth is charged per claim",
		kube:    []runtime.Object{storageQuota("110Gi", "100Gi"), claim("data-shop-0", "50Gi", nil), claim("data-shop-1", "50Gi", nil)},
		dbs:     []*example.MyDatabase{two},
		attrs:   update(db("shop", 2, "60Gi"), two),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=20Gi, used: requests.storage=100Gi, limited: requests.storage=110Gi`,
	}, {
		name: "claims per StorageClass",
		kube: []runtime.Object{quotaOf("fast", corev1.ResourceList{"fast.storageclass.storage.k8s.io/persistentvolumeclaims": q("1")},
			corev1.ResourceList{"fast.storageclass.storage.k8s.io/persistentvolumeclaims": q("0")})},
		attrs:   create(db("shop", 2, "1Gi", func(d *example.MyDatabase) { d.Spec.StorageClassName = fast }), false),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: fast, requested: fast.storageclass.storage.k8s.io/persistentvolumeclaims=2, used: fast.storageclass.storage.k8s.io/persistentvolumeclaims=0, limited: fast.storageclass.storage.k8s.io/persistentvolumeclaims=1`,
	}, {
		name: "a claim that names no class is charged to the default class",
		kube: []runtime.Object{defaultClass("standard"), quotaOf("standard", corev1.ResourceList{"standard.storageclass.storage.k8s.io/requests.storage": q("10Gi")},
			corev1.ResourceList{"standard.storageclass.storage.k8s.io/requests.storage": q("0")})},
		attrs:   create(db("shop", 1, "11Gi"), false),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: standard, requested: standard.storageclass.storage.k8s.io/requests.storage=11Gi, used: standard.storageclass.storage.k8s.io/requests.storage=0, limited: standard.storageclass.storage.k8s.io/requests.storage=10Gi`,
	}, {
		name:  "a scheduled database has no backup volume: its backups go to object storage",
		kube:  []runtime.Object{quotaOf("claims", corev1.ResourceList{"persistentvolumeclaims": q("2")}, corev1.ResourceList{"persistentvolumeclaims": q("0")})},
		attrs: create(db("shop", 2, "1Gi", func(d *example.MyDatabase) { d.Spec.Backup = &example.BackupPolicy{Schedule: "0 3 * * *"} }), false),
	}, {
		name: "pods and their effective requests and limits",
		kube: []runtime.Object{quotaOf("compute",
			corev1.ResourceList{"pods": q("3"), "requests.cpu": q("1"), "limits.memory": q("2Gi")},
			corev1.ResourceList{"pods": q("0"), "requests.cpu": q("0"), "limits.memory": q("0")})},
		attrs:   create(db("shop", 5, "1Gi"), false),
		wantErr: `mydatabases.example.com "shop" is forbidden: exceeded quota: compute, requested: limits.memory=5Gi,pods=5,requests.cpu=1250m, used: limits.memory=0,pods=0,requests.cpu=0, limited: limits.memory=2Gi,pods=3,requests.cpu=1`,
	}, {
		name: "an existing pod with the same resources is charged once",
		kube: []runtime.Object{quotaOf("compute", corev1.ResourceList{"pods": q("2")}, corev1.ResourceList{"pods": q("2")}),
			pod("shop-0", examplev1.DefaultResources), pod("shop-1", examplev1.DefaultResources)},
		dbs:   []*example.MyDatabase{two},
		attrs: update(db("shop", 2, "50Gi", func(d *example.MyDatabase) { d.Spec.Version = "16" }), two),
	}, {
		name:    "a quota whose usage is not computed yet refuses, as in kube-apiserver",
		kube:    []runtime.Object{quotaOf("storage", corev1.ResourceList{corev1.ResourceRequestsStorage: q("100Gi")}, nil)},
		attrs:   create(two, false),
		wantErr: `mydatabases.example.com "shop" is forbidden: status unknown for quota: storage, resources: requests.storage`,
	}, {
		name:  "an update that makes nothing more passes a quota whose usage is not computed yet",
		kube:  []runtime.Object{quotaOf("storage", corev1.ResourceList{corev1.ResourceRequestsStorage: q("100Gi")}, nil)},
		dbs:   []*example.MyDatabase{two},
		attrs: update(db("shop", 2, "50Gi", func(d *example.MyDatabase) { d.Labels = map[string]string{"team": "a"} }), two),
	}, {
		name:  "a quota on other things does not matter",
		kube:  []runtime.Object{quotaOf("services", corev1.ResourceList{"services": q("1")}, corev1.ResourceList{"services": q("1")})},
		attrs: create(three, false),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, tc.kube, tc.dbs...)
			err := p.Validate(context.Background(), tc.attrs, nil)
			if got := errString(err); got != tc.wantErr {
				t.Errorf("got error\n  %s\nwant\n  %s", got, tc.wantErr)
			}
		})
	}
}

func TestScaleSubresource(t *testing.T) {
	two, three := db("shop", 2, "50Gi"), db("shop", 3, "50Gi")
	two.ResourceVersion = "5"
	p := newPlugin(t, []runtime.Object{storageQuota("100Gi", "100Gi"), claim("data-shop-0", "50Gi", nil), claim("data-shop-1", "50Gi", nil)}, two)
	attrs := admission.NewAttributesRecord(nil, nil, v1.WithKind("Scale"), ns, "shop", v1.WithResource("mydatabases"), "scale",
		admission.Update, &metav1.UpdateOptions{}, false, tenant)
	ctx := scaled.With(context.Background(), scaled.Databases{New: three, Old: two})
	want := `mydatabases.example.com "shop" is forbidden: exceeded quota: storage, requested: requests.storage=50Gi, used: requests.storage=100Gi, limited: requests.storage=100Gi`
	if got := errString(p.Validate(ctx, attrs, nil)); got != want {
		t.Errorf("scale to 3: %s, want %s", got, want)
	}
	ctx = scaled.With(context.Background(), scaled.Databases{New: db("shop", 1, "50Gi"), Old: two})
	if err := p.Validate(ctx, attrs, nil); err != nil {
		t.Errorf("scale to 1: %v", err)
	}
}

// Two creates admitted before mydb's informer shows either: the second sees
// the first.
func TestAdmittedButNotYetObservedCounts(t *testing.T) {
	p := newPlugin(t, []runtime.Object{storageQuota("100Gi", "0")})
	if err := p.Validate(context.Background(), create(db("first", 1, "50Gi"), true), nil); err != nil {
		t.Fatal(err)
	}
	// A dry run records nothing.
	if err := p.Validate(context.Background(), create(db("second", 1, "50Gi"), false), nil); err != nil {
		t.Fatal(err)
	}
	want := `mydatabases.example.com "third" is forbidden: exceeded quota: storage, requested: requests.storage=100Gi, used: requests.storage=50Gi, limited: requests.storage=100Gi`
	if got := errString(p.Validate(context.Background(), create(db("third", 2, "50Gi"), false), nil)); got != want {
		t.Errorf("third: %s, want %s", got, want)
	}
	// Once the ledger entry is older than ledgerTTL only the informer counts.
	now := time.Now()
	p.now = func() time.Time { return now.Add(ledgerTTL + time.Second) }
	if err := p.Validate(context.Background(), create(db("third", 2, "50Gi"), false), nil); err != nil {
		t.Errorf("after the ledger expired: %v", err)
	}
}

func TestBackups(t *testing.T) {
	backup := &example.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "shop-"}}
	action := admission.NewAttributesRecord(backup, nil, v1.WithKind("MyDatabaseBackup"), ns, "shop", v1.WithResource("mydatabases"), "backup",
		admission.Create, &metav1.CreateOptions{}, false, tenant)
	two := db("shop", 2, "1Gi")
	cases := []struct {
		name    string
		kube    []runtime.Object
		wantErr string
	}{{
		name: "the count of backups",
		kube: []runtime.Object{quotaOf("backups", corev1.ResourceList{"count/mydatabasebackups.example.com": q("1")},
			corev1.ResourceList{"count/mydatabasebackups.example.com": q("1")})},
		wantErr: `mydatabasebackups.example.com "shop-" is forbidden: exceeded quota: backups, requested: count/mydatabasebackups.example.com=1, used: count/mydatabasebackups.example.com=1, limited: count/mydatabasebackups.example.com=1`,
	}, {
		name: "room for one more backup",
		kube: []runtime.Object{quotaOf("backups", corev1.ResourceList{"count/mydatabasebackups.example.com": q("2")},
			corev1.ResourceList{"count/mydatabasebackups.example.com": q("1")})},
	}, {
		name: "no pod and no claim: a full pod or claim quota does not refuse a backup",
		kube: []runtime.Object{quotaOf("pods", corev1.ResourceList{"pods": q("2"), "persistentvolumeclaims": q("2")}, corev1.ResourceList{"pods": q("2"), "persistentvolumeclaims": q("2")}),
			pod("shop-0", examplev1.DefaultResources), pod("shop-1", examplev1.DefaultResources), claim("data-shop-0", "1Gi", nil), claim("data-shop-1", "1Gi", nil)},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPlugin(t, tc.kube, two)
			if got := errString(p.Validate(context.Background(), action, nil)); got != tc.wantErr {
				t.Errorf("got error\n  %s\nwant\n  %s", got, tc.wantErr)
			}
		})
	}
}

func TestPodUsage(t *testing.T) {
	cases := []struct {
		name      string
		resources corev1.ResourceRequirements
		want      corev1.ResourceList
	}{{
		name:      "the container's figures above the init container's",
		resources: *examplev1.DefaultResources.DeepCopy(),
		want: corev1.ResourceList{"pods": q("1"), "count/pods": q("1"), "cpu": q("250m"), "requests.cpu": q("250m"), "limits.cpu": q("1"),
			"memory": q("512Mi"), "requests.memory": q("512Mi"), "limits.memory": q("1Gi")},
	}, {
		name: "the init container's figures above the container's",
		resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"cpu": q("5m"), "memory": q("16Mi")},
			Limits:   corev1.ResourceList{"cpu": q("50m"), "memory": q("48Mi")},
		},
		want: corev1.ResourceList{"pods": q("1"), "count/pods": q("1"), "cpu": q("10m"), "requests.cpu": q("10m"), "limits.cpu": q("100m"),
			"memory": q("32Mi"), "requests.memory": q("32Mi"), "limits.memory": q("64Mi")},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PodUsage(databasepod.Pod(tc.resources))
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for name, want := range tc.want {
				if g := got[name]; g.Cmp(want) != 0 {
					t.Errorf("%s = %s, want %s", name, g.String(), want.String())
				}
			}
		})
	}
}

// Ten creates at once, none in the informer yet, each 50Gi against 100Gi:
// decisions are made one at a time and each sees those admitted before it.
func TestConcurrentCreatesDoNotOvershoot(t *testing.T) {
	p := newPlugin(t, []runtime.Object{storageQuota("100Gi", "0")})
	const n = 10
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			errs <- p.Validate(context.Background(), create(db(fmt.Sprintf("db-%d", i), 1, "50Gi"), false), nil)
		}(i)
	}
	admitted := 0
	for i := 0; i < n; i++ {
		err := <-errs
		switch {
		case err == nil:
			admitted++
		case !strings.Contains(err.Error(), "exceeded quota: storage, requested: requests.storage=50Gi, used: requests.storage=100Gi, limited: requests.storage=100Gi"):
			t.Errorf("unexpected refusal: %v", err)
		}
	}
	if admitted != 2 {
		t.Errorf("%d of %d admitted, want 2", admitted, n)
	}
}
