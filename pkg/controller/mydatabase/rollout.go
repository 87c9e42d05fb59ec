package mydatabase

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/rollout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Rolling out a new pod template, primary last: the StatefulSet updates
// no pod by itself (OnDelete), package rollout decides which pod to
// replace or where to move the primary role, and the controller deletes
// that pod (the StatefulSet makes it anew at its update revision) or
// writes that switchover.

// ReasonRollingUpdate is the Event of each step of a rolling update.
const ReasonRollingUpdate = "RollingUpdate"

// rolloutSlotStale is how long a database rolling out may take no step
// and still hold one of --max-concurrent-rollouts.
const rolloutSlotStale = 10 * time.Minute

// boundRollouts lets step act only when db may roll out now: it holds, or
// takes, one of the controller's rollout slots; a complete rollout frees
// its slot.
func (c *Controller) boundRollouts(db *examplev1.MyDatabase, step rollout.Step) rollout.Step {
	key := cache.MetaObjectToName(db).String()
	switch {
	case step.Complete:
		c.rolloutSlots.Release(key)
	case step.Delete != "" || step.SwitchoverTo != "":
		if ok, held := c.rolloutSlots.Take(key, c.clock.Now()); !ok {
			return rollout.Step{Updated: step.Updated, Waiting: fmt.Sprintf(
				"%d other databases are rolling out, at most %d at once (--max-concurrent-rollouts)", held, c.rolloutSlots.Max)}
		}
	}
	return step
}

// rolloutPoll is how soon a database is read again while a rollout waits
// for a replaced instance to serve: the managers report it, no event does.
const rolloutPoll = 2 * time.Second

// replacedPods remembers, per database, the pod this controller deleted
// last, until the cache shows it going: a sync from a cache that does not
// yet must not take it for a pod that still serves and replace another.
type replacedPods struct {
	mu   sync.Mutex
	byDB map[cache.ObjectName]types.UID
}

func (r *replacedPods) get(db cache.ObjectName) types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byDB[db]
}

func (r *replacedPods) set(db cache.ObjectName, pod types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byDB == nil {
		r.byDB = map[cache.ObjectName]types.UID{}
	}
	r.byDB[db] = pod
}

// forget drops what was remembered of a database that is gone.
func (r *replacedPods) forget(db cache.ObjectName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.byDB, db)
}

// rolloutRetryAfterAbort is how long a rollout waits after a switchover
// was given up before it asks for another: each one keeps writes down
// until it completes or times out.
const rolloutRetryAfterAbort = 5 * time.Minute

// rolloutBusy says why the primary role must not be touched by a rollout
// now ("" when nothing holds it). broken: nothing has served past the
// failover delay (no failover can help).
func rolloutBusy(db *examplev1.MyDatabase, hold, broken bool, decision failover.Decision, now time.Time) string {
	s := db.Status
	aborted := meta.FindStatusCondition(s.Conditions, examplev1.ConditionPrimaryChange)
	switch {
	case hold:
		return "the database hibernates or wakes"
	case s.TargetPrimary != "" && s.TargetPrimary != s.CurrentPrimary:
		return fmt.Sprintf("a %s to %s is under way", s.TargetPrimaryReason, s.TargetPrimary)
	case decision.Change != nil || (decision.Incident != nil && !broken):
		return fmt.Sprintf("the primary %s does not serve", s.CurrentPrimary)
	case db.Spec.RestoreFrom != nil && !meta.IsStatusConditionTrue(s.Conditions, examplev1.ConditionRestored):
		return "the backup is not loaded yet"
	case aborted != nil && aborted.Reason == failover.ReasonSwitchoverAborted && now.Sub(aborted.LastTransitionTime.Time) < rolloutRetryAfterAbort:
		return fmt.Sprintf("a switchover was given up at %s; the next is tried %s after it",
			aborted.LastTransitionTime.UTC().Format(time.RFC3339), rolloutRetryAfterAbort)
	}
	return ""
}

// nothingServes tells whether no instance of db serves and its primary has
// been unready, as this controller saw it, for longer than the failover
// delay.
func nothingServes(db *examplev1.MyDatabase, f *findings, decision failover.Decision, now time.Time) bool {
	in := decision.Incident
	if in == nil || now.Sub(in.Since) < failover.Delay(db.Spec) {
		return false
	}
	for _, inst := range f.instances {
		if inst.Ready {
			return false
		}
	}
	return true
}

// rolloutInput is what package rollout decides a step from: db's instance
// pods (f.pods, which f.instances and f.reports follow) against sts's
// update revision.
func (c *Controller) rolloutInput(db *examplev1.MyDatabase, sts *appsv1.StatefulSet, f *findings, busy string, broken bool) rollout.Input {
	in := rollout.Input{
		Primary:      f.primary,
		Want:         int(desiredReplicas(db)),
		Observed:     sts != nil && sts.Status.ObservedGeneration >= sts.Generation && sts.Status.UpdateRevision != "",
		Busy:         busy,
		Broken:       broken,
		MajorUpgrade: majorUpgrade(db, f.pods),
	}
	if !in.Observed {
		return in
	}
	replaced := c.replaced.get(cache.MetaObjectToName(db))
	for i, pod := range f.pods {
		inst := rollout.Instance{
			Name:        pod.Name,
			Updated:     pod.Labels[appsv1.StatefulSetRevisionLabel] == sts.Status.UpdateRevision,
			Terminating: pod.DeletionTimestamp != nil || (replaced != "" && pod.UID == replaced),
		}
		if i < len(f.instances) {
			inst.Ready = f.instances[i].Ready
		}
		if i < len(f.reports) && f.reports[i] != nil {
			inst.Position = f.reports[i].Position
		}
		in.Instances = append(in.Instances, inst)
	}
	return in
}

// majorUpgrade tells whether some of db's pods run a PostgreSQL major
// other than spec.version's: every PostgreSQL version is a major, and
// validation lets one change only upward.
func majorUpgrade(db *examplev1.MyDatabase, pods []*corev1.Pod) bool {
	return db.Spec.Engine == examplev1.EnginePostgres && lineChange(db, pods)
}

// replacePod deletes db's pod name, which the step chose, so that its
// StatefulSet makes it anew at the update revision.
func (c *Controller) replacePod(ctx context.Context, db *examplev1.MyDatabase, f *findings, name string, step rollout.Step) error {
	var pod *corev1.Pod
	for _, p := range f.pods {
		if p.Name == name {
			pod = p
		}
	}
	if pod == nil {
		return nil
	}
	role := "replica"
	switch {
	case name == f.primary && desiredReplicas(db) == 1:
		role = "the only instance"
	case name == f.primary && majorUpgrade(db, f.pods):
		role = "primary (its data is upgraded to PostgreSQL " + db.Spec.Version + " before it starts)"
	case name == f.primary:
		role = "primary (nothing serves)"
	}
	err := c.kubeClient.CoreV1().Pods(db.Namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or made anew: the cache is behind.
		return nil
	}
	if err != nil {
		return err
	}
	c.replaced.set(cache.MetaObjectToName(db), pod.UID)
	klog.FromContext(ctx).Info("Replacing a pod for a rolling update", "pod", name, "role", role)
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonRollingUpdate, "Replacing %s %s to run the new template (%d of %d instances updated)",
		role, name, step.Updated, desiredReplicas(db))
	return nil
}

// rolloutSwitchover is the status change that moves the primary role to
// an updated replica, so that the primary's pod is replaced last.
func rolloutSwitchover(db *examplev1.MyDatabase, to string, step rollout.Step, now metav1.Time) *failover.Change {
	msg := fmt.Sprintf("switchover from %s to %s for a rolling update: %d of %d instances run the new template, the primary's pod is replaced last",
		db.Status.CurrentPrimary, to, step.Updated, desiredReplicas(db))
	return &failover.Change{
		Current: db.Status.CurrentPrimary, Target: to, Reason: examplev1.TargetPrimaryReasonRollingUpdate,
		Condition: metav1.Condition{Type: examplev1.ConditionPrimaryChange, Status: metav1.ConditionTrue,
			Reason: failover.ReasonSwitchoverInProgress, Message: msg, ObservedGeneration: db.Generation, LastTransitionTime: now},
		Event: &failover.Event{Type: corev1.EventTypeNormal, Reason: ReasonRollingUpdate, Message: msg},
	}
}

// rolloutMessage says where a rollout is, for the Progressing condition.
func rolloutMessage(db *examplev1.MyDatabase, step *rollout.Step) string {
	msg := fmt.Sprintf("rolling out generation %d", db.Generation)
	if step == nil {
		return msg
	}
	msg += fmt.Sprintf(": %d of %d instances run the new template, primary last", step.Updated, desiredReplicas(db))
	switch {
	case step.Delete != "":
		msg += "; replacing " + step.Delete
	case step.SwitchoverTo != "":
		msg += "; switching over to " + step.SwitchoverTo
	case step.Waiting != "":
		msg += "; waiting: " + step.Waiting
	}
	return msg
}

// upgradeBackupName is the backup taken of db before it is upgraded to
// spec.version's line.
func upgradeBackupName(db *examplev1.MyDatabase) string {
	return db.Name + "-before-" + string(db.Spec.Engine) + "-" + strings.ReplaceAll(db.Spec.Version, ".", "-")
}

// lineChange tells whether some of db's pods run another release line
// than spec.version's (an upgrade: validation refuses a downgrade).
func lineChange(db *examplev1.MyDatabase, pods []*corev1.Pod) bool {
	for _, pod := range pods {
		if v := pod.Labels[names.LabelVersion]; v != "" && v != db.Spec.Version {
			return true
		}
	}
	return false
}

// backupBeforeUpgrade says why an upgrade of db to another line waits (""
// when it need not: the backup succeeded, db has no backup destination,
// or a pod runs the new line already), and takes the backup of the primary
// when there is none: the way back if the new line does not suit the
// applications (it restores into a database of the old line).
func (c *Controller) backupBeforeUpgrade(ctx context.Context, db *examplev1.MyDatabase, f *findings) (string, error) {
	if db.Spec.Backup == nil || db.Spec.Backup.Destination == nil {
		return "", nil
	}
	for _, pod := range f.pods {
		if pod.Labels[names.LabelVersion] == db.Spec.Version {
			return "", nil
		}
	}
	name := upgradeBackupName(db)
	b, err := c.backupLister.MyDatabaseBackups(db.Namespace).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		_, err := c.mydbClient.ExampleV1().MyDatabaseBackups(db.Namespace).Create(ctx, &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: db.Namespace},
			Spec:       examplev1.MyDatabaseBackupSpec{DatabaseName: db.Name, Target: examplev1.BackupTargetPrimary},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		if err == nil {
			c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonRollingUpdate, "Backing the primary up (%s) before the upgrade to %s %s", name, db.Spec.Engine, db.Spec.Version)
		}
		return fmt.Sprintf("the backup %s is taken before the upgrade", name), nil
	case err != nil:
		return "", err
	case b.Status.DatabaseUID != "" && b.Status.DatabaseUID != db.UID:
		return fmt.Sprintf("the backup %s, to be taken before the upgrade, is of an earlier database of this name: delete it", name), nil
	case b.Status.Phase == examplev1.BackupPhaseSucceeded:
		return "", nil
	case b.Status.Phase == examplev1.BackupPhaseFailed:
		return fmt.Sprintf("the backup %s before the upgrade failed (%s): delete it to have another taken", name, b.Status.Message), nil
	}
	return fmt.Sprintf("the backup %s runs; the data is upgraded once it succeeded", name), nil
}
