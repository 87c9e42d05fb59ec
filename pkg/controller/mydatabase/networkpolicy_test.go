package mydatabase

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// TestNetworkPoliciesAdmitOnlyWhoNeedsTheManagers: the managers' port of a
// database's pods, and its dump servers', admit only the database's own
// instances and mydb's namespace; the engine's port admits any client; a
// policy selects no other database's pods.
func TestNetworkPoliciesAdmitOnlyWhoNeedsTheManagers(t *testing.T) {
	db := myDatabase()
	eng, _ := engine.Lookup(string(db.Spec.Engine))
	if eng.AdminPort != 33062 {
		t.Fatalf("the fixture's engine %s has admin port %d, want MySQL's 33062", eng.Name, eng.AdminPort)
	}
	policies := newNetworkPolicies(db, eng, "mydb-system")
	if len(policies) != 2 {
		t.Fatalf("%d policies", len(policies))
	}
	instances, dumps := policies[0], policies[1]
	own := labels.Set(SelectorLabels(db))
	other := labels.Set(SelectorLabels(myDatabase(func(d *examplev1.MyDatabase) { d.Name = "other" })))
	dumpPod := labels.Set{"app.kubernetes.io/component": dump.Component, dump.LabelOf: db.Name}
	selects := func(p *networkingv1.NetworkPolicy, l labels.Set) bool {
		return labels.SelectorFromSet(p.Spec.PodSelector.MatchLabels).Matches(l)
	}
	if !selects(instances, own) || selects(instances, other) || selects(instances, dumpPod) {
		t.Errorf("the instances' policy selects %v", instances.Spec.PodSelector)
	}
	if !selects(dumps, dumpPod) || selects(dumps, own) {
		t.Errorf("the dump servers' policy selects %v", dumps.Spec.PodSelector)
	}
	// admits tells whether a peer of the given pod labels, in namespace ns,
	// may reach port under p.
	admits := func(p *networkingv1.NetworkPolicy, port int32, pod labels.Set, ns string) bool {
		for _, rule := range p.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, rp := range rule.Ports {
				portOK = portOK || rp.Port.IntVal == port
			}
			if !portOK {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, from := range rule.From {
				switch {
				case from.NamespaceSelector != nil:
					if labels.SelectorFromSet(from.NamespaceSelector.MatchLabels).Matches(labels.Set{corev1.LabelMetadataName: ns}) {
						return true
					}
				case from.PodSelector != nil && ns == db.Namespace:
					if labels.SelectorFromSet(from.PodSelector.MatchLabels).Matches(pod) {
						return true
					}
				}
			}
		}
		return false
	}
	app := labels.Set{"app": "shop"}
	for _, c := range []struct {
		who    string
		policy *networkingv1.NetworkPolicy
		port   int32
		pod    labels.Set
		ns     string
		want   bool
	}{
		{"an instance, to a manager", instances, api.Port, own, db.Namespace, true},
		{"mydb, to a manager", instances, api.Port, labels.Set{}, "mydb-system", true},
		{"an application, to a manager", instances, api.Port, app, db.Namespace, false},
		{"another database's instance, to a manager", instances, api.Port, other, db.Namespace, false},
		{"a pod of another namespace, to a manager", instances, api.Port, own, "elsewhere", false},
		{"an application, to the engine", instances, eng.Port, app, db.Namespace, true},
		{"Prometheus in another namespace, to the metrics", instances, api.MetricsPort, labels.Set{"app": "prometheus"}, "monitoring", true},
		{"Prometheus in another namespace, to a manager", instances, api.Port, labels.Set{"app": "prometheus"}, "monitoring", false},
		{"anyone, to a dump server's metrics port", dumps, api.MetricsPort, app, db.Namespace, false},
		{"an instance, to a dump server", dumps, api.Port, own, db.Namespace, true},
		{"mydb, to a dump server", dumps, api.Port, labels.Set{}, "mydb-system", true},
		{"an application, to a dump server", dumps, api.Port, app, db.Namespace, false},
		{"an instance, to another port", instances, 22, own, db.Namespace, false},
		// MySQL's admin interface, where replicas and clones connect.
		{"an instance, to the admin interface", instances, 33062, own, db.Namespace, true},
		{"an application, to the admin interface", instances, 33062, app, db.Namespace, false},
		{"mydb, to the admin interface", instances, 33062, labels.Set{}, "mydb-system", false},
	} {
		if got := admits(c.policy, c.port, c.pod, c.ns); got != c.want {
			t.Errorf("%s: admitted %v, want %v", c.who, got, c.want)
		}
	}
}

// TestNetworkPoliciesOpenNoAdminInterfaceWithoutOne: an engine without an
// admin interface gets no rule for one.
func TestNetworkPoliciesOpenNoAdminInterfaceWithoutOne(t *testing.T) {
	postgres, _ := engine.Lookup("postgres")
	for _, rule := range newNetworkPolicies(myDatabase(), postgres, "mydb-system")[0].Spec.Ingress {
		for _, p := range rule.Ports {
			if p.Port.IntVal == 0 || p.Port.IntVal == 33062 {
				t.Errorf("a PostgreSQL database's policy opens port %v", p.Port)
			}
		}
	}
}
