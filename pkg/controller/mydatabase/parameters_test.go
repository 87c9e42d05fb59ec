package mydatabase

import (
	"slices"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/parameters"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func withParameters(d *examplev1.MyDatabase) {
	d.Spec.Parameters = map[string]string{"max_connections": "500", "performance_schema": "OFF", "long_query_time": "0.5"}
}

// Only the parameters the engine reads at start are in the pod template:
// changing a live one changes no pod.
func TestStartParametersAreInThePodTemplate(t *testing.T) {
	f := newFixture(t, []*examplev1.MyDatabase{myDatabase(withParameters)})
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
	var flags []string
	for _, arg := range sts.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(arg, engineParameterFlag) {
			flags = append(flags, arg)
		}
	}
	if want := []string{"--engine-parameter=performance_schema=OFF"}; !slices.Equal(flags, want) {
		t.Errorf("engine parameters in the template: %v, want %v", flags, want)
	}
}

func TestParametersAppliedCondition(t *testing.T) {
	live := parameters.Hash(parameters.Encode(map[string]string{"max_connections": "500", "long_query_time": "0.5"}))
	for _, tc := range []struct {
		name       string
		reported   []string // each instance's reported hash; "!" for a refusal
		wantStatus metav1.ConditionStatus
		wantReason string
		wantIn     string
	}{
		{"every instance took them", []string{live, live, live}, metav1.ConditionTrue, ReasonParametersApplied,
			"long_query_time, max_connections taken live on every instance (no restart); performance_schema read at start"},
		{"one has not yet", []string{live, "", live}, metav1.ConditionFalse, ReasonApplyingParameters, "not yet taken by"},
		{"one refused", []string{live, "!", live}, metav1.ConditionFalse, ReasonParameterRefused, "prod-mysql-1: the server refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, children, statuses := convergedState(t, myDatabase(withParameters))
			for i, ip := range []string{"10.244.0.10", "10.244.0.11", "10.244.0.12"} {
				s := statuses[ip]
				s.EngineRunning = true
				if tc.reported[i] == "!" {
					s.ParametersError = "the server refused max_connections: out of range"
				} else {
					s.Parameters = tc.reported[i]
				}
				statuses[ip] = s
			}
			f := newFixture(t, []*examplev1.MyDatabase{db}, children...)
			f.statuses = statuses
			if err := f.sync(); err != nil {
				t.Fatal(err)
			}
			// A condition whose status and reason stay is not written again.
			status := db.Status
			if len(writes(f.mydbClient.Actions())) > 0 {
				status = updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
			}
			c := meta.FindStatusCondition(status.Conditions, examplev1.ConditionParametersApplied)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantIn) {
				t.Errorf("ParametersApplied = %+v, want %s/%s with %q", c, tc.wantStatus, tc.wantReason, tc.wantIn)
			}
		})
	}
}

// spec.tls.clientTLS: Required puts --require-client-tls in the pod
// template; Preferred, or no spec.tls, does not.
func TestClientTLSRequiredIsInThePodTemplate(t *testing.T) {
	for _, tc := range []struct {
		tls  *examplev1.TLSSpec
		want bool
	}{
		{nil, false},
		{&examplev1.TLSSpec{ClientTLS: examplev1.ClientTLSPreferred}, false},
		{&examplev1.TLSSpec{ClientTLS: examplev1.ClientTLSRequired}, true},
	} {
		f := newFixture(t, []*examplev1.MyDatabase{myDatabase(func(d *examplev1.MyDatabase) { d.Spec.TLS = tc.tls })})
		if err := f.sync(); err != nil {
			t.Fatal(err)
		}
		sts := applied[*appsv1.StatefulSet](t, f.kubeClient.Actions(), "statefulsets")
		if got := slices.Contains(sts.Spec.Template.Spec.Containers[0].Args, requireClientTLSFlag); got != tc.want {
			t.Errorf("spec.tls %+v: %s in the template: %v, want %v", tc.tls, requireClientTLSFlag, got, tc.want)
		}
	}
}

// MySQL's and MariaDB's pods open the admin interface (MariaDB's is the
// instance manager's relay), where replicas and clones connect while
// clients get a certificate of the user's own; PostgreSQL's have none.
func TestTheAdminInterfaceIsInMySQLFamilyPodTemplates(t *testing.T) {
	for _, tc := range []struct {
		engine examplev1.Engine
		want   bool
	}{{examplev1.EngineMySQL, true}, {examplev1.EngineMariaDB, true}, {examplev1.EnginePostgres, false}} {
		db := myDatabase(func(d *examplev1.MyDatabase) {
			d.Spec.Engine, d.Spec.Version = tc.engine, ""
		})
		eng, _ := engine.Lookup(string(tc.engine))
		pod := podSpec(db, eng, "image", "instance-image", false)
		c := pod.Containers[len(pod.Containers)-1]
		hasFlag := slices.Contains(c.Args, "--admin-port=33062")
		hasPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return p.Name == engine.AdminPortName && p.ContainerPort == 33062
		})
		if hasFlag != tc.want || hasPort != tc.want {
			t.Errorf("%s: --admin-port=33062 %v, container port %q %v; want %v", tc.engine, hasFlag, engine.AdminPortName, hasPort, tc.want)
		}
	}
}
