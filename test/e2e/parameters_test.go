//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestParametersLiveAndAtStart, for postgres and mariadb with real engines
// on the rig, through the aggregator: a live parameter set on a running
// three-instance database reaches every instance with no pod replaced and
// no switchover (ParametersApplied True, saying so); a parameter read at
// start is rolled out primary last, one switchover, and every instance
// reads it; a value off the catalog is refused with its field path; and
// lowering max_connections on PostgreSQL with replicas is forbidden.
func TestParametersLiveAndAtStart(t *testing.T) {
	t.Parallel()
	type parameterCase struct {
		live, liveValue, liveQuery, liveRead string
		start, startValue, startQuery        string
		startRead                            string
	}
	cases := map[string]parameterCase{
		"postgres": {live: "work_mem", liveValue: "24MB", liveQuery: "SHOW work_mem", liveRead: "24MB",
			start: "max_connections", startValue: "140", startQuery: "SHOW max_connections", startRead: "140"},
		"mariadb": {live: "max_connections", liveValue: "222", liveQuery: "SELECT @@GLOBAL.max_connections", liveRead: "222",
			start: "performance_schema", startValue: "ON", startQuery: "SELECT @@GLOBAL.performance_schema", startRead: "1"},
	}
	for _, tc := range replicationCases {
		pc := cases[tc.engine.name]
		t.Run(tc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbs, _, h, _ := startShop(t, restConfig(t), tc, failoverDelay, "")
			kube := kubeClient(t)
			read := func(pod, query string) string {
				t.Helper()
				var v string
				if err := h.connect(pod).QueryRow(query).Scan(&v); err != nil {
					t.Fatalf("%s on %s: %v", query, pod, err)
				}
				return v
			}
			uids := func() map[string]types.UID {
				pods, err := kube.CoreV1().Pods(h.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=shop"})
				if err != nil {
					t.Fatal(err)
				}
				out := map[string]types.UID{}
				for _, p := range pods.Items {
					out[p.Name] = p.UID
				}
				return out
			}
			waitApplied := func(wantIn string) *metav1.Condition {
				t.Helper()
				var c *metav1.Condition
				eventually(t, 4*time.Minute, func() error {
					db, err := dbs.Get(ctx, "shop", metav1.GetOptions{})
					if err != nil {
						return err
					}
					c = meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionParametersApplied)
					if db.Status.ObservedGeneration != db.Generation || c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != db.Generation ||
						!strings.Contains(c.Message, wantIn) {
						return fmt.Errorf("ParametersApplied %s", conditionMessage(c))
					}
					return nil
				})
				return c
			}
			patch := func(params string) error {
				_, err := dbs.Patch(ctx, "shop", types.MergePatchType, []byte(`{"spec":{"parameters":`+params+`}}`), metav1.PatchOptions{})
				return err
			}

			// Live: no pod replaced, no switchover.
			before, switchovers := uids(), eventCount(t, h.ns, failover.ReasonSwitchoverCompleted)
			start := time.Now()
			if err := patch(fmt.Sprintf(`{%q:%q}`, pc.live, pc.liveValue)); err != nil {
				t.Fatal(err)
			}
			c := waitApplied(pc.live + " taken live on every instance (no restart)")
			t.Logf("%s: %s=%s applied on every instance in %s: %s", tc.engine.name, pc.live, pc.liveValue, time.Since(start).Round(100*time.Millisecond), c.Message)
			for _, pod := range []string{"shop-0", "shop-1", "shop-2"} {
				if got := read(pod, pc.liveQuery); got != pc.liveRead {
					t.Errorf("%s on %s: %s, want %s", pc.liveQuery, pod, got, pc.liveRead)
				}
			}
			if after := uids(); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("a live parameter replaced pods: %v -> %v", before, after)
			}
			if n := eventCount(t, h.ns, failover.ReasonSwitchoverCompleted) - switchovers; n != 0 {
				t.Errorf("%d switchovers for a live parameter", n)
			}

			// At start: a rolling update, primary last, one switchover.
			start = time.Now()
			if err := patch(fmt.Sprintf(`{%q:%q,%q:%q}`, pc.live, pc.liveValue, pc.start, pc.startValue)); err != nil {
				t.Fatal(err)
			}
			c = waitApplied(pc.start + " read at start (a rolling update, primary last)")
			status := h.waitStreaming(3)
			t.Logf("%s: %s=%s applied by a rolling update in %s (primary now %s)", tc.engine.name, pc.start, pc.startValue,
				time.Since(start).Round(100*time.Millisecond), status.CurrentPrimary)
			for _, pod := range []string{"shop-0", "shop-1", "shop-2"} {
				if got := read(pod, pc.startQuery); got != pc.startRead {
					t.Errorf("%s on %s: %s, want %s", pc.startQuery, pod, got, pc.startRead)
				}
				if got := read(pod, pc.liveQuery); got != pc.liveRead {
					t.Errorf("%s on %s after the rolling update: %s, want %s", pc.liveQuery, pod, got, pc.liveRead)
				}
			}
			after := uids()
			for pod, uid := range before {
				if after[pod] == uid {
					t.Errorf("pod %s was not replaced for a start parameter", pod)
				}
			}
			waitEvents(t, h.ns, failover.ReasonSwitchoverCompleted, switchovers, 1)
			if n := eventCount(t, h.ns, failover.ReasonFailoverCompleted); n != 0 {
				t.Errorf("%d failovers, want none", n)
			}

			// Refused at admission, with the field path.
			err := patch(fmt.Sprintf(`{%q:"lots"}`, pc.live))
			if err == nil || !strings.Contains(err.Error(), "spec.parameters["+pc.live+"]") {
				t.Errorf("a value off the catalog: %v, want a 422 on spec.parameters[%s]", err, pc.live)
			}
			if tc.engine.name == "postgres" {
				err := patch(`{"max_connections":"120"}`)
				if err == nil || !strings.Contains(err.Error(), "may not be lowered while the database has replicas") {
					t.Errorf("lowering max_connections with replicas: %v, want forbidden", err)
				}
			}
		})
	}
}
