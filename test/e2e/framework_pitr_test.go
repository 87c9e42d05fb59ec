//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/names"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recoverabilityOf is db's recoverability window and its
// ContinuousArchiving condition, as its status holds them.
func recoverabilityOf(t *testing.T, ns, db string) (*examplev1.Recoverability, *metav1.Condition, error) {
	d, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns).Get(context.Background(), db, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	return d.Status.Recoverability, meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionContinuousArchiving), nil
}

// waitArchiving waits until db's primary archives: ContinuousArchiving
// True, a file in the window.
func waitArchiving(t *testing.T, ns, db string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		r, c, err := recoverabilityOf(t, ns, db)
		if err != nil {
			return err
		}
		if c == nil || c.Status != metav1.ConditionTrue || r == nil || r.LastArchivedWAL == "" {
			return fmt.Errorf("ContinuousArchiving %+v, recoverability %+v", c, r)
		}
		return nil
	})
}

// waitRecoverablePast waits until db's lastRecoverableTime is past target
// and returns the window then.
func waitRecoverablePast(t *testing.T, ns, db string, target time.Time, timeout time.Duration) (*examplev1.Recoverability, *metav1.Condition) {
	t.Helper()
	var (
		r *examplev1.Recoverability
		c *metav1.Condition
	)
	eventually(t, timeout, func() error {
		var err error
		if r, c, err = recoverabilityOf(t, ns, db); err != nil {
			return err
		}
		if r == nil || r.LastRecoverableTime == nil || !r.LastRecoverableTime.After(target) {
			return fmt.Errorf("recoverable to %+v (ContinuousArchiving %+v), not yet past %s", r, c, target.Format(time.RFC3339))
		}
		return nil
	})
	return r, c
}

// waitHibernated waits until db's Hibernated condition is True and no pod
// of it is left.
func waitHibernated(t *testing.T, ns, db string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	eventually(t, timeout, func() error {
		d, err := mydbClient(t, restConfig(t)).ExampleV1().MyDatabases(ns).Get(ctx, db, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(d.Status.Conditions, examplev1.ConditionHibernated); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Hibernated = %+v", c)
		}
		pods, err := kubeClient(t).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: names.LabelInstance + "=" + db})
		if err != nil || len(pods.Items) > 0 {
			return fmt.Errorf("%d pods left (%v)", len(pods.Items), err)
		}
		return nil
	})
}
