package mydatabase

import (
	"context"
	"fmt"
	"github.com/mydb-dev/mydb/pkg/names"
	"strings"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Condition reasons.
const (
	ReasonAllReplicasReady    = "AllReplicasReady"
	ReasonReplicasNotReady    = "ReplicasNotReady"
	ReasonRollingOut          = "RollingOut"
	ReasonRolloutComplete     = "RolloutComplete"
	ReasonPaused              = "Paused"
	ReasonChildConflict       = "ChildConflict"
	ReasonStorageNotExpanding = "StorageExpansionUnsupported"
	ReasonAsExpected          = "AsExpected"
	ReasonWaitingForRestore   = "WaitingForRestoreSource"
	ReasonReplicasStreaming   = "ReplicasStreaming"
	ReasonNoReplicas          = "NoReplicas"
	ReasonReplicasBehind      = "ReplicasNotStreaming"
	ReasonNoInstances         = "NoInstances"
	ReasonCredentialsMissing  = "CredentialsMissing"
)

// updateStatus writes what the reconcile saw through /status, and only when
// it differs from what is stored, so a converged database costs no writes.
func (c *Controller) updateStatus(ctx context.Context, db *examplev1.MyDatabase, eng engine.Engine, sts *appsv1.StatefulSet, f findings, paused bool) error {
	status := computeStatus(db, eng, sts, f, paused, metav1.NewTime(c.clock.Now()))
	if apiequality.Semantic.DeepEqual(db.Status, status) {
		return nil
	}
	updated := db.DeepCopy()
	updated.Status = status
	_, err := c.mydbClient.ExampleV1().MyDatabases(db.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return err
}

func computeStatus(db *examplev1.MyDatabase, eng engine.Engine, sts *appsv1.StatefulSet, f findings, paused bool, now metav1.Time) examplev1.MyDatabaseStatus {
	status := *db.Status.DeepCopy()
	status.ObservedGeneration = db.Generation
	status.Selector = labels.SelectorFromSet(SelectorLabels(db)).String()
	status.Endpoint = endpoint(db, eng)
	status.Replicas, status.ReadyReplicas = 0, 0
	if sts != nil {
		status.Replicas = sts.Status.Replicas
		status.ReadyReplicas = min(sts.Status.ReadyReplicas, sts.Status.Replicas)
	}

	if !paused {
		status.CurrentPrimary, status.Instances = f.primary, f.instances
	}

	want := desiredReplicas(db)
	ready := sts != nil && rolledOut(sts, want) && sts.Status.ReadyReplicas == want
	set := func(typ string, s metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: typ, Status: s, Reason: reason, Message: message,
			ObservedGeneration: db.Generation, LastTransitionTime: now,
		})
	}
	// A restored database is not Ready before its data is loaded, whatever
	// its pods say.
	restored := f.restored
	if restored == nil {
		restored = meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionRestored)
	}
	notRestored := db.Spec.RestoreFrom != nil && (restored == nil || restored.Status != metav1.ConditionTrue)

	switch {
	case notRestored:
		reason, message := ReasonRestoring, "the backup is not loaded yet"
		if restored != nil {
			reason, message = restored.Reason, "the backup is not loaded: "+restored.Message
		}
		set(examplev1.ConditionReady, metav1.ConditionFalse, reason, message)
	case ready:
		set(examplev1.ConditionReady, metav1.ConditionTrue, ReasonAllReplicasReady, fmt.Sprintf("%d of %d replicas are ready", want, want))
	default:
		set(examplev1.ConditionReady, metav1.ConditionFalse, ReasonReplicasNotReady, fmt.Sprintf("%d of %d replicas are ready", status.ReadyReplicas, want))
	}

	switch {
	case paused:
		set(examplev1.ConditionProgressing, metav1.ConditionFalse, ReasonPaused, "reconciling is paused by the "+names.PausedAnnotation+" annotation")
	case f.restoreWait != "" && !ready:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, ReasonWaitingForRestore, f.restoreWait)
	case notRestored:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, ReasonRestoring, "loading the backup spec.restoreFrom names")
	case ready:
		set(examplev1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete, "the database runs its spec")
	default:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, fmt.Sprintf("rolling out generation %d", db.Generation))
	}

	if !paused {
		typ, reason, message := replication(status.Instances)
		set(examplev1.ConditionReplicating, typ, reason, message)
	}
	if f.primaryChange != nil {
		set(f.primaryChange.Type, f.primaryChange.Status, f.primaryChange.Reason, f.primaryChange.Message)
	}
	if f.restored != nil {
		set(f.restored.Type, f.restored.Status, f.restored.Reason, f.restored.Message)
	}

	switch {
	case len(f.conflicts) > 0:
		set(examplev1.ConditionDegraded, metav1.ConditionTrue, ReasonChildConflict, strings.Join(f.conflicts, "; "))
	case f.credentialsMissing != "":
		set(examplev1.ConditionDegraded, metav1.ConditionTrue, ReasonCredentialsMissing, f.credentialsMissing)
	case len(f.blockages) > 0:
		messages := make([]string, 0, len(f.blockages))
		for _, b := range f.blockages {
			messages = append(messages, b.message)
		}
		set(examplev1.ConditionDegraded, metav1.ConditionTrue, f.blockages[0].reason, strings.Join(messages, "; "))
	case len(f.storageProblems) > 0:
		set(examplev1.ConditionDegraded, metav1.ConditionTrue, ReasonStorageNotExpanding, strings.Join(f.storageProblems, "; "))
	default:
		set(examplev1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "no problems found")
	}
	return status
}

// rolledOut tells whether the StatefulSet controller has seen its latest
// spec and every replica runs it.
func rolledOut(sts *appsv1.StatefulSet, want int32) bool {
	s := sts.Status
	return s.ObservedGeneration >= sts.Generation &&
		s.Replicas == want && s.UpdatedReplicas == want &&
		(s.UpdateRevision == "" || s.CurrentRevision == s.UpdateRevision)
}

// replication says whether every replica streams from the primary, from
// what the instance managers reported.
func replication(instances []examplev1.InstanceStatus) (metav1.ConditionStatus, string, string) {
	if len(instances) == 0 {
		return metav1.ConditionUnknown, ReasonNoInstances, "no instance has reported yet"
	}
	var replicas, behind []string
	for _, in := range instances {
		if in.Role != examplev1.InstanceRoleReplica {
			continue
		}
		replicas = append(replicas, in.Name)
		if !in.Ready {
			behind = append(behind, fmt.Sprintf("%s: %s", in.Name, in.Message))
		}
	}
	switch {
	case len(replicas) == 0:
		return metav1.ConditionTrue, ReasonNoReplicas, "the database has no replicas"
	case len(behind) > 0:
		return metav1.ConditionFalse, ReasonReplicasBehind, strings.Join(behind, "; ")
	}
	return metav1.ConditionTrue, ReasonReplicasStreaming, fmt.Sprintf("%d replicas stream from the primary", len(replicas))
}
