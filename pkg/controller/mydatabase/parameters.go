package mydatabase

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/parameters"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// spec.parameters reach the instances two ways (package parameters says
// which): those the engine takes while it runs through each manager's own
// watch of its MyDatabase (Topology.Parameters), applied without a restart;
// those it reads only at start as --engine-parameter flags of the pod
// template, so that changing one is a rolling update, primary last.

// Reasons of the ParametersApplied condition.
const (
	ReasonParametersApplied  = "Applied"
	ReasonApplyingParameters = "Applying"
	ReasonParameterRefused   = "ParameterRefused"
)

const engineParameterFlag = "--engine-parameter"

// withStartParameters puts the parameters db's engine reads only at start
// on the manager's command line.
func withStartParameters(spec *corev1.PodSpec, db *examplev1.MyDatabase) {
	_, start := parameters.Split(string(db.Spec.Engine), db.Spec.Parameters)
	for _, p := range parameters.Sorted(start) {
		spec.Containers[0].Args = append(spec.Containers[0].Args, engineParameterFlag+"="+p)
	}
}

// parametersApplied is the ParametersApplied condition of db (nil for a
// database without spec.parameters): True once every instance's manager
// reports the live parameters taken and every pod runs the template with
// the others.
func parametersApplied(db *examplev1.MyDatabase, f findings, now metav1.Time) *metav1.Condition {
	if len(db.Spec.Parameters) == 0 {
		return nil
	}
	live, start := parameters.Split(string(db.Spec.Engine), db.Spec.Parameters)
	want := parameters.Hash(parameters.Encode(live))
	var refused, waiting []string
	for i, in := range f.instances {
		var r *api.Status
		if i < len(f.reports) {
			r = f.reports[i]
		}
		switch {
		case r == nil || !r.EngineRunning:
			waiting = append(waiting, in.Name+" (its engine does not run)")
		case r.ParametersError != "":
			refused = append(refused, in.Name+": "+r.ParametersError)
		case r.Parameters != want:
			waiting = append(waiting, in.Name)
		}
	}
	c := &metav1.Condition{Type: examplev1.ConditionParametersApplied, ObservedGeneration: db.Generation, LastTransitionTime: now, Status: metav1.ConditionFalse}
	rolling := f.rollout == nil || !f.rollout.Complete
	switch {
	case len(refused) > 0:
		c.Reason, c.Message = ReasonParameterRefused, strings.Join(refused, "; ")
	case len(f.instances) == 0:
		c.Reason, c.Message = ReasonApplyingParameters, "no instance runs"
	case len(waiting) > 0:
		c.Reason, c.Message = ReasonApplyingParameters, "the live parameters are not yet taken by "+strings.Join(waiting, ", ")
	case len(start) > 0 && rolling:
		c.Reason, c.Message = ReasonApplyingParameters, fmt.Sprintf("%s read at start: a rolling update, primary last, is under way", parameterNames(start))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonParametersApplied
		var parts []string
		if len(live) > 0 {
			parts = append(parts, parameterNames(live)+" taken live on every instance (no restart)")
		}
		if len(start) > 0 {
			parts = append(parts, parameterNames(start)+" read at start (a rolling update, primary last)")
		}
		c.Message = strings.Join(parts, "; ")
	}
	return c
}

func parameterNames(params map[string]string) string {
	return strings.Join(slices.Sorted(maps.Keys(params)), ", ")
}
