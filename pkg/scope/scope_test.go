package scope

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

func TestServes(t *testing.T) {
	if !Namespaces(nil).Serves("anything") {
		t.Error("no list must serve every namespace")
	}
	n := Namespaces{"team-a", "team-b"}
	if !n.Serves("team-b") || n.Serves("team-c") || n.Serves("") {
		t.Errorf("%v serves the wrong namespaces", n)
	}
}

func TestValidate(t *testing.T) {
	if errs := (Namespaces{"team-a", "b"}).Validate(); len(errs) != 0 {
		t.Errorf("valid names refused: %v", errs)
	}
	errs := Namespaces{"Team_A", "b", "b", ""}.Validate()
	if len(errs) != 3 {
		t.Fatalf("got %v, want three errors", errs)
	}
	for i, want := range []string{`"Team_A"`, `"b" is given twice`, `""`} {
		if !strings.Contains(errs[i].Error(), want) {
			t.Errorf("error %d = %q, want it to name %s", i, errs[i], want)
		}
	}
}

// TestPerNamespaceListsOnlyServedNamespaces: the informers list and watch
// each served namespace on its own, never the cluster, and the lister
// refuses a namespace it does not serve with an error that is not
// NotFound (a missing Secret would make the controller mint new ones).
func TestPerNamespaceListsOnlyServedNamespaces(t *testing.T) {
	secret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	client := fake.NewClientset(secret("team-a", "one"), secret("team-b", "two"), secret("other", "three"))
	byNamespace := map[string]coreinformers.SecretInformer{}
	var factories []informers.SharedInformerFactory
	for _, ns := range []string{"team-a", "team-b"} {
		f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		byNamespace[ns] = f.Core().V1().Secrets()
		factories = append(factories, f)
	}
	secrets := PerNamespace(byNamespace)
	infs := secrets.Informers()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	for _, f := range factories {
		f.Start(ctx.Done())
		defer f.Shutdown()
	}
	defer cancel() // before the Shutdowns, which wait for the informers to stop
	synced := make([]cache.InformerSynced, 0, len(infs))
	for _, inf := range infs {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("the informers did not sync")
	}

	for _, a := range client.Actions() {
		if (a.GetVerb() == "list" || a.GetVerb() == "watch") && a.GetNamespace() != "team-a" && a.GetNamespace() != "team-b" {
			t.Errorf("%s of %s in namespace %q: only the served namespaces may be read", a.GetVerb(), a.GetResource().Resource, a.GetNamespace())
		}
	}
	lister := secrets.Lister()
	all, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range all {
		got = append(got, s.Namespace+"/"+s.Name)
	}
	slices.Sort(got)
	if want := []string{"team-a/one", "team-b/two"}; !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	if s, err := lister.Secrets("team-b").Get("two"); err != nil || s.Name != "two" {
		t.Errorf("Get team-b/two = %v, %v", s, err)
	}
	if _, err := lister.Secrets("team-a").Get("two"); !apierrors.IsNotFound(err) {
		t.Errorf("Get team-a/two = %v, want NotFound", err)
	}
	for _, read := range []func() error{
		func() error { _, err := lister.Secrets("other").Get("three"); return err },
		func() error { _, err := lister.Secrets("other").List(labels.Everything()); return err },
	} {
		if err := read(); err == nil || apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `"other" is not one of them`) {
			t.Errorf("a read in a namespace not served = %v, want an error that is not NotFound", err)
		}
	}
}
