package mydatabase

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mydb-dev/mydb/pkg/names"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
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
	// ReasonServerCertificateInvalid: spec.tls.serverCertificateSecret
	// names no usable certificate; the engines serve the one they had.
	ReasonServerCertificateInvalid = "ServerCertificateInvalid"
)

// A new database goes without a status while it comes up without a
// problem, until its primary has an address (what the instance managers
// wait for), so that one coming up costs one status write on its way there
// and one when it is Ready; something wrong is written at once. How long
// it may go so is bounded by what the cluster is doing meanwhile:
// newDatabaseGrace after its primary's pod was made (the scheduler and the
// kubelet start it), podCreationGrace after its StatefulSet was while that
// has made no pod (under a burst, the StatefulSet controller's queue), and
// newDatabaseGrace after its creation while mydb has made no StatefulSet.
const (
	newDatabaseGrace = 30 * time.Second
	podCreationGrace = time.Minute
)

// firstStatusDue is when a new database gets a status whether or not its
// primary has an address; pod is its primary's, sts its StatefulSet (each
// nil while there is none).
func firstStatusDue(db *examplev1.MyDatabase, sts *appsv1.StatefulSet, pod *corev1.Pod) time.Time {
	due := db.CreationTimestamp.Add(newDatabaseGrace)
	var then time.Time
	switch {
	case pod != nil:
		then = pod.CreationTimestamp.Add(newDatabaseGrace)
	case sts != nil:
		then = sts.CreationTimestamp.Add(podCreationGrace)
	}
	if then.After(due) {
		return then
	}
	return due
}

// updateStatus writes what the reconcile saw through /status when it is
// worth a write (statusWorthWriting), so a converged database costs none,
// and one whose replication positions move under a write load costs none
// either.
func (c *Controller) updateStatus(ctx context.Context, db *examplev1.MyDatabase, eng engine.Spec, sts *appsv1.StatefulSet, f findings, paused bool) error {
	now := c.clock.Now()
	status := computeStatus(db, eng, sts, f, paused, metav1.NewTime(now))
	var primaryPod *corev1.Pod
	if f.primary != "" {
		primaryPod, _ = c.podLister.Pods(db.Namespace).Get(f.primary)
	}
	write, wait := statusWorthWriting(db, status, paused, firstStatusDue(db, sts, primaryPod), now)
	if wait > 0 {
		c.queue.AddAfter(cache.MetaObjectToName(db), wait)
	}
	if !write {
		return nil
	}
	updated := db.DeepCopy()
	updated.Status = status
	_, err := c.mydbClient.ExampleV1().MyDatabases(db.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return err
}

// statusWorthWriting tells whether status, computed now, should replace
// db's stored one, and how soon to look again when a write is only put
// off. Every status write costs a write to etcd, an event held by the
// watch cache and one to every watcher, so it is made for a transition
// someone acts on (settled), and not for what only moves along:
//
//   - never for a status equal to the stored one;
//   - not for a database created paused: its empty status already says
//     that nothing reconciled it (one that had a status is written, so
//     that it says Paused);
//   - not, until firstDue, for a database that has no status yet and
//     comes up without a problem, until its primary has an address;
//   - otherwise when the settled parts differ, when an instance that was
//     ready is not any more (the write keeps the last position it
//     reported, which a failover decided by another leader reads), or
//     when the primary is ready again in a database that is Ready.
//
// What is left (replica counts, messages, the readiness a new primary
// gains on its way to Ready, replicas' addresses, positions) goes with the
// next write that has a reason; /metrics has the live replication lag.
func statusWorthWriting(db *examplev1.MyDatabase, status examplev1.MyDatabaseStatus, paused bool, firstDue, now time.Time) (bool, time.Duration) {
	stored := db.Status
	neverWritten := len(stored.Conditions) == 0
	switch {
	case apiequality.Semantic.DeepEqual(stored, status):
		return false, 0
	case neverWritten && paused:
		return false, 0
	case neverWritten && !hasTopology(status) && !notRoutine(status):
		if now.Before(firstDue) {
			return false, firstDue.Sub(now)
		}
		return true, 0
	}
	return !apiequality.Semantic.DeepEqual(settled(stored), settled(status)) || lostInstance(stored, status) ||
		(primaryGainedReadiness(stored, status) && meta.IsStatusConditionTrue(stored.Conditions, examplev1.ConditionReady)), 0
}

// hasTopology tells whether status names a primary with an address, which
// the instance managers need to take their roles.
func hasTopology(s examplev1.MyDatabaseStatus) bool {
	for _, in := range s.Instances {
		if in.Name == s.CurrentPrimary && in.Address != "" {
			return true
		}
	}
	return false
}

// notRoutine tells whether status says more than that a new database is
// coming up: a problem, a wait for a restore source, a pause, or a rollout
// already complete (a database of no replicas).
func notRoutine(s examplev1.MyDatabaseStatus) bool {
	return meta.IsStatusConditionTrue(s.Conditions, examplev1.ConditionDegraded) ||
		meta.IsStatusConditionPresentAndEqual(s.Conditions, examplev1.ConditionProgressing, metav1.ConditionFalse) ||
		slices.ContainsFunc(s.Conditions, func(c metav1.Condition) bool { return c.Reason == ReasonWaitingForRestore })
}

// settled is the part of a status whose every change is written at once:
// generations, the topology (primary, target, every instance's name and
// role, the primary's address, fencing) once the primary has an address,
// each replica's readiness, and each condition's status and reason.
func settled(s examplev1.MyDatabaseStatus) examplev1.MyDatabaseStatus {
	s = *s.DeepCopy()
	if !hasTopology(s) {
		// A primary without an address is no topology an instance can use.
		s.CurrentPrimary, s.Instances = "", nil
	}
	s.Replicas, s.ReadyReplicas = 0, 0
	for i := range s.Conditions {
		s.Conditions[i].Message, s.Conditions[i].LastTransitionTime = "", metav1.Time{}
	}
	if r := s.Recoverability; r != nil {
		// Each archived file moves these: they ride along with the writes
		// that have a reason. lastRecoverableTime moves once per
		// archiveTimeout (a heartbeat), and is worth a write: restores
		// are checked against it.
		r.LastArchivedWAL, r.LastArchivedTime, r.PendingWALFiles = "", nil, 0
	}
	for i := range s.Instances {
		in := &s.Instances[i]
		in.Message, in.Position = "", nil
		if in.Name == s.CurrentPrimary {
			in.Ready = false // lostInstance and primaryGainedReadiness
		} else {
			in.Address = ""
		}
	}
	return s
}

// primaryGainedReadiness tells whether status's primary is ready and was
// stored as not ready. While the stored Ready condition is False, that is
// the way to Ready, and goes with the write that says Ready.
func primaryGainedReadiness(stored, status examplev1.MyDatabaseStatus) bool {
	for _, in := range status.Instances {
		if in.Name != status.CurrentPrimary || !in.Ready {
			continue
		}
		for _, was := range stored.Instances {
			if was.Name == in.Name && !was.Ready {
				return true
			}
		}
	}
	return false
}

// lostInstance tells whether an instance stored as ready is not in status.
func lostInstance(stored, status examplev1.MyDatabaseStatus) bool {
	for _, in := range status.Instances {
		if in.Ready {
			continue
		}
		for _, was := range stored.Instances {
			if was.Name == in.Name && was.Ready {
				return true
			}
		}
	}
	return false
}

func computeStatus(db *examplev1.MyDatabase, eng engine.Spec, sts *appsv1.StatefulSet, f findings, paused bool, now metav1.Time) examplev1.MyDatabaseStatus {
	status := *db.Status.DeepCopy()
	status.ObservedGeneration = db.Generation
	status.Selector = labels.SelectorFromSet(SelectorLabels(db)).String()
	status.Endpoint = endpoint(db, eng)
	status.Replicas, status.ReadyReplicas = 0, 0
	status.UpdateRevision, status.UpdatedReplicas = "", 0
	if sts != nil {
		status.Replicas = sts.Status.Replicas
		status.ReadyReplicas = min(sts.Status.ReadyReplicas, sts.Status.Replicas)
		status.UpdateRevision, status.UpdatedReplicas = sts.Status.UpdateRevision, sts.Status.UpdatedReplicas
	}

	if f.certificateAuthority != nil {
		status.CertificateAuthority = f.certificateAuthority
	}
	if !paused {
		status.CurrentPrimary = f.primary
		status.Instances = withNamedInstances(db, f.instances, f.primary, status.TargetPrimary)
	}

	want := desiredReplicas(db)
	// ready: every pod runs the spec and reads Ready to Kubernetes. The
	// database is Ready only when its primary also serves, as its manager
	// reports: a pod's readiness alone says nothing where no container
	// runs (kwok), or in the moment before a probe sees an engine stop.
	ready := sts != nil && rolledOut(sts, want) && sts.Status.ReadyReplicas == want
	primary := instanceNamed(status.Instances, status.CurrentPrimary)
	serving := primary != nil && primary.Ready
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
	case db.Spec.Hibernate:
		set(examplev1.ConditionReady, metav1.ConditionFalse, ReasonHibernated, "the database hibernates (spec.hibernate): no instance runs")
	case notRestored:
		reason, message := ReasonRestoring, "the backup is not loaded yet"
		if restored != nil {
			reason, message = restored.Reason, "the backup is not loaded: "+restored.Message
		}
		set(examplev1.ConditionReady, metav1.ConditionFalse, reason, message)
	case ready && serving:
		set(examplev1.ConditionReady, metav1.ConditionTrue, ReasonAllReplicasReady, fmt.Sprintf("%d of %d replicas are ready and the primary %s serves", want, want, status.CurrentPrimary))
	case ready:
		set(examplev1.ConditionReady, metav1.ConditionFalse, ReasonPrimaryNotServing, primaryNotServingMessage(status.CurrentPrimary, primary))
	default:
		set(examplev1.ConditionReady, metav1.ConditionFalse, ReasonReplicasNotReady, fmt.Sprintf("%d of %d replicas are ready", status.ReadyReplicas, want))
	}

	switch {
	case paused:
		set(examplev1.ConditionProgressing, metav1.ConditionFalse, ReasonPaused, "reconciling is paused by the "+names.PausedAnnotation+" annotation")
	case f.hibernated != nil && f.hibernated.Status == metav1.ConditionTrue:
		set(examplev1.ConditionProgressing, metav1.ConditionFalse, ReasonHibernated, "every instance is stopped (spec.hibernate)")
	case f.hibernated != nil:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, f.hibernated.Reason, f.hibernated.Message)
	case f.restoreWait != "" && !ready:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, ReasonWaitingForRestore, f.restoreWait)
	case notRestored:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, ReasonRestoring, "loading the backup spec.restoreFrom names")
	case ready:
		set(examplev1.ConditionProgressing, metav1.ConditionFalse, ReasonRolloutComplete, "the database runs its spec")
	default:
		set(examplev1.ConditionProgressing, metav1.ConditionTrue, ReasonRollingOut, rolloutMessage(db, f.rollout))
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
	if f.hibernated != nil {
		set(f.hibernated.Type, f.hibernated.Status, f.hibernated.Reason, f.hibernated.Message)
	} else if !paused {
		meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionHibernated)
	}
	if f.archiving != nil {
		set(f.archiving.Type, f.archiving.Status, f.archiving.Reason, f.archiving.Message)
	} else if pointInTimeRecovery(db) == nil {
		meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionContinuousArchiving)
	}
	if f.recoverability != nil {
		status.Recoverability = f.recoverability
	}
	switch {
	case paused || db.Spec.Hibernate:
	case f.objects != nil:
		var c *metav1.Condition
		status.Databases, status.Roles, c = objectsStatus(db, f.objects, f.objectsReport, now)
		set(c.Type, c.Status, c.Reason, c.Message)
	default:
		status.Databases, status.Roles = nil, nil
		meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionRolesAndDatabasesApplied)
	}
	switch c := parametersApplied(db, f, now); {
	case paused || db.Spec.Hibernate:
		// Nothing runs to say: the last word stands.
	case c != nil:
		set(c.Type, c.Status, c.Reason, c.Message)
	default:
		meta.RemoveStatusCondition(&status.Conditions, examplev1.ConditionParametersApplied)
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
	case f.serverCertificateProblem != "":
		set(examplev1.ConditionDegraded, metav1.ConditionTrue, ReasonServerCertificateInvalid, f.serverCertificateProblem)
	default:
		set(examplev1.ConditionDegraded, metav1.ConditionFalse, ReasonAsExpected, "no problems found")
	}
	return status
}

// MessagePodGone is an instance's message while the status names it (as
// its primary or switchover target) and its pod does not exist: the
// StatefulSet controller makes it again, or the namespace is being
// deleted.
const MessagePodGone = "its pod does not exist"

// withNamedInstances is instances, in pod order, with an entry for each of
// primary and others that has none (its pod is gone): the status keeps
// naming them, since the instance comes back with its volume, and
// validation takes only names status.instances lists.
func withNamedInstances(db *examplev1.MyDatabase, instances []examplev1.InstanceStatus, primary string, others ...string) []examplev1.InstanceStatus {
	out := instances
	for _, name := range append([]string{primary}, others...) {
		if name == "" || instanceNamed(out, name) != nil {
			continue
		}
		role := examplev1.InstanceRoleReplica
		if name == primary {
			role = examplev1.InstanceRolePrimary
		}
		out = append(slices.Clip(out), examplev1.InstanceStatus{Name: name, Role: role, Message: MessagePodGone})
		slices.SortStableFunc(out, func(a, b examplev1.InstanceStatus) int { return ordinal(db, a.Name) - ordinal(db, b.Name) })
	}
	return out
}

// primaryNotServingMessage says why the primary named primary, whose
// instance is in (nil: none reported), does not serve.
func primaryNotServingMessage(primary string, in *examplev1.InstanceStatus) string {
	switch {
	case primary == "":
		return "no instance is the primary yet"
	case in == nil:
		return fmt.Sprintf("the primary %s has not reported", primary)
	case in.Message != "":
		return fmt.Sprintf("the primary %s does not serve: %s", primary, in.Message)
	}
	return fmt.Sprintf("the primary %s does not serve", primary)
}

// rolledOut tells whether the StatefulSet controller has seen its latest
// spec and every replica runs it. (Under OnDelete it never moves
// currentRevision on: updatedReplicas says it.)
func rolledOut(sts *appsv1.StatefulSet, want int32) bool {
	s := sts.Status
	onDelete := sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
	return s.ObservedGeneration >= sts.Generation &&
		s.Replicas == want && s.UpdatedReplicas == want &&
		(s.UpdateRevision == "" || onDelete || s.CurrentRevision == s.UpdateRevision)
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
