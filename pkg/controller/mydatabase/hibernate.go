package mydatabase

import (
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Reasons of the Hibernated condition (and of Ready and Progressing while
// hibernated).
const (
	ReasonHibernated  = "Hibernated"
	ReasonHibernating = "Hibernating"
	ReasonWaking      = "Waking"
)

// hibernation is the Hibernated condition (nil: none), decided from the
// spec, how many of the database's pods are left, whether the primary
// serves and what the status said before; hold tells the failover
// decision to wait: no primary runs while hibernated, and on waking the
// one that was primary is given the time it takes to start, however long,
// before anything moves.
func hibernation(db *examplev1.MyDatabase, podsLeft int, primaryServing bool) (cond *metav1.Condition, hold bool) {
	replicas := ptr.Deref(db.Spec.Replicas, 1)
	switch {
	case db.Spec.Hibernate && podsLeft == 0:
		return hibernatedCondition(metav1.ConditionTrue, ReasonHibernated, fmt.Sprintf(
			"every instance is stopped; the %d volumes and the credentials are kept, and scheduled backups and failover pause. "+
				"With spec.hibernate false, %s starts again as the primary", replicas, db.Status.CurrentPrimary)), true
	case db.Spec.Hibernate:
		return hibernatedCondition(metav1.ConditionFalse, ReasonHibernating, fmt.Sprintf("stopping the instances: %d pods left", podsLeft)), true
	}
	old := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionHibernated)
	if old == nil || primaryServing {
		return nil, false
	}
	return hibernatedCondition(metav1.ConditionFalse, ReasonWaking, fmt.Sprintf("waiting for %s, the primary before hibernation, to serve again", db.Status.CurrentPrimary)), true
}

func hibernatedCondition(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
	return &metav1.Condition{Type: examplev1.ConditionHibernated, Status: status, Reason: reason, Message: message}
}

// hibernationEvent tells, once, that the database went to sleep or woke.
func (c *Controller) hibernationEvent(db *examplev1.MyDatabase, cond *metav1.Condition) {
	old := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionHibernated)
	switch {
	case cond != nil && cond.Status == metav1.ConditionTrue && (old == nil || old.Status != metav1.ConditionTrue):
		c.recorder.Event(db, corev1.EventTypeNormal, ReasonHibernated, "every instance is stopped (spec.hibernate)")
	case cond == nil && old != nil && old.Reason == ReasonWaking:
		c.recorder.Event(db, corev1.EventTypeNormal, "Woke", fmt.Sprintf("%s serves again after hibernation", db.Status.CurrentPrimary))
	}
}
