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
)

// TestHibernateAndWake, for postgres and mariadb with real engines on the
// rig: a two-instance database with rows hibernates (no pod left, its
// claims and credentials kept, Hibernated True, kubectl get mdb says so,
// nothing failed over in twice the failoverDelay,
// the primary's name kept; it is the second pod, after a switchover),
// then wakes: the same primary serves again,
// the replica streams from it, and both hold every row.
func TestHibernateAndWake(t *testing.T) {
	t.Parallel()
	for _, dc := range dataCases {
		t.Run(dc.engine.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := newNamespace(t)
			const delay = 5 * time.Second
			source := dc.startSource(t, ns, examplev1.MyDatabaseSpec{Replicas: int32Ptr(2), StorageSize: quantity("1Gi"),
				FailoverDelay: &metav1.Duration{Duration: delay}}, 60)
			h, want := source.h, source.sums
			dbs := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns)
			kube := kubeClient(t)
			// The primary is the second pod, so that waking cannot pass by
			// starting the first as the primary, as a new database does.
			if _, err := dbs.Switchover(ctx, "src", &examplev1.MyDatabaseSwitchover{Spec: examplev1.MyDatabaseSwitchoverSpec{TargetInstance: "src-1"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			h.waitPrimary("src-1", 2*time.Minute)
			before := h.waitStreaming(2)

			if r := kubectlMydb(t, "hibernate", "src", "-n", ns); r.err != nil {
				t.Fatal(r)
			}
			start := time.Now()
			waitHibernated(t, ns, "src", 3*time.Minute)
			t.Logf("%s: hibernated in %s", dc.engine.name, time.Since(start).Round(100*time.Millisecond))
			claims, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(claims.Items) != 2 {
				t.Errorf("claims while hibernated: %d, %v; want both kept", len(claims.Items), err)
			}
			if _, err := kube.CoreV1().Secrets(ns).Get(ctx, "src-credentials", metav1.GetOptions{}); err != nil {
				t.Errorf("the credentials while hibernated: %v", err)
			}
			// Twice the failoverDelay asleep: nothing is failed over.
			time.Sleep(2 * delay)
			d, err := dbs.Get(ctx, "src", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + failover.ReasonFailoverImpossible})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				// Events have whole seconds; a new database's primary may
				// have been slow to start, long before.
				if !e.LastTimestamp.Time.Before(start.Truncate(time.Second)) {
					t.Errorf("failover was considered while hibernated: %s", e.Message)
				}
			}
			if d.Status.CurrentPrimary != before.CurrentPrimary || d.Status.TargetPrimary != before.CurrentPrimary {
				t.Errorf("hibernated with primary %q (target %q), was %q", d.Status.CurrentPrimary, d.Status.TargetPrimary, before.CurrentPrimary)
			}
			if out := mustKubectl(t, "", "get", "mdb", "src", "-n", ns); !strings.Contains(out, "Hibernated") {
				t.Errorf("kubectl get mdb while hibernated:\n%s", out)
			}

			if r := kubectlMydb(t, "wake", "src", "-n", ns); r.err != nil {
				t.Fatal(r)
			}
			start = time.Now()
			after := h.waitStreaming(2)
			t.Logf("%s: woke in %s, primary %s", dc.engine.name, time.Since(start).Round(100*time.Millisecond), after.CurrentPrimary)
			if after.CurrentPrimary != before.CurrentPrimary {
				t.Errorf("woke with primary %s, hibernated with %s", after.CurrentPrimary, before.CurrentPrimary)
			}
			eventually(t, time.Minute, func() error {
				d, err := dbs.Get(ctx, "src", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionHibernated); c != nil {
					return fmt.Errorf("Hibernated = %+v", c)
				}
				if c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("Ready = %+v", c)
				}
				return nil
			})
			dc.waitSums(t, h, 2, want)
		})
	}
}
