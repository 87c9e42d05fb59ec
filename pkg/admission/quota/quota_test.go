package quota

import (
	"context"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	mydbfake "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned/fake"
	mydbinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/tools/cache"
)

// wantsQuota is a plugin that takes the quota configuration.
type wantsQuota struct {
	admission.Interface
	config quotav1.Configuration
}

func (w *wantsQuota) SetQuotaConfiguration(c quotav1.Configuration) { w.config = c }

func (w *wantsQuota) ValidateInitialization() error { return nil }

func database(ns, name string) runtime.Object {
	return &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

const countResource = corev1.ResourceName("count/mydatabases.example.com")

func TestCountsMyDatabasesPerNamespace(t *testing.T) {
	client := mydbfake.NewClientset(database("a", "one"), database("a", "two"), database("b", "three"))
	factory := mydbinformers.NewSharedInformerFactory(client, 0)
	informer := factory.Example().V1().MyDatabases()
	plugin := &wantsQuota{}
	NewInitializer(factory).Initialize(plugin)
	if plugin.config == nil || len(plugin.config.Evaluators()) != 1 {
		t.Fatalf("the plugin got no MyDatabase evaluator: %+v", plugin.config)
	}
	evaluator := plugin.config.Evaluators()[0]
	if got := evaluator.GroupResource().String(); got != "mydatabases.example.com" {
		t.Errorf("evaluator for %s", got)
	}

	// Counting from a cache that has not synced would admit past the quota.
	if _, err := evaluator.UsageStats(quotav1.UsageStatsOptions{Namespace: "a", Resources: []corev1.ResourceName{countResource}}); err == nil {
		t.Error("usage counted from an unsynced cache; want an error")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
		t.Fatal("cache never synced")
	}
	for ns, want := range map[string]int64{"a": 2, "b": 1, "c": 0} {
		stats, err := evaluator.UsageStats(quotav1.UsageStatsOptions{Namespace: ns, Resources: []corev1.ResourceName{countResource}})
		if err != nil {
			t.Fatal(err)
		}
		if got := stats.Used[countResource]; got.Value() != want {
			t.Errorf("namespace %s uses %s MyDatabases, want %d", ns, got.String(), want)
		}
	}
}
