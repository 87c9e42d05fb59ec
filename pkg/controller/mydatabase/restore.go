package mydatabase

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/internal/s3location"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// restoreFlag tells mydb-instance that the database starts from a backup:
// an instance with no data that is to be the primary waits, unready, for
// POST /v1/restore instead of bootstrapping an empty database.
const restoreFlag = "--restore"

// RestoreStarter asks an instance manager to load a backup (POST
// /v1/restore): *api.Client, or a test's fake.
type RestoreStarter interface {
	StartRestore(ctx context.Context, host string, auth api.Auth, req api.RestoreRequest) (*api.Operation, error)
}

// Reasons of the Restored condition.
const (
	ReasonWaitingForBackup = "WaitingForBackup"
	ReasonRestoring        = "Restoring"
	ReasonRestoreFailed    = "RestoreFailed"
	ReasonRestored         = "Restored"
)

// restoreWaitOf says why a database with spec.restoreFrom may not start
// yet ("" when it may): its backup must exist and have succeeded. A
// StatefulSet that exists started already: its pods keep --restore even
// once the backup is gone, so an instance that lost its data never
// bootstraps an empty database in place of the restored one.
func (c *Controller) restoreWaitOf(db *examplev1.MyDatabase, existing *appsv1.StatefulSet) (string, error) {
	if db.Spec.RestoreFrom == nil || existing != nil {
		return "", nil
	}
	b, wait, err := c.restoreBackup(db)
	if err != nil || wait != "" || b == nil {
		return wait, err
	}
	return "", nil
}

// restoreBackup is the succeeded backup spec.restoreFrom names, or why
// there is none.
func (c *Controller) restoreBackup(db *examplev1.MyDatabase) (*examplev1.MyDatabaseBackup, string, error) {
	if from := db.Spec.RestoreFrom; from.BackupName == "" {
		backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.Everything())
		if err != nil {
			return nil, "", err
		}
		b := pitrwindow.Pick(backups, from.DatabaseName, from.PointInTime, db.CreationTimestamp.Time)
		if b == nil {
			return nil, fmt.Sprintf("waiting for a succeeded backup in S3 of MyDatabase %q, made before this database, that ends before %s",
				from.DatabaseName, describeTarget(from.PointInTime)), nil
		}
		return b, "", nil
	}
	name := db.Spec.RestoreFrom.BackupName
	b, err := c.backupLister.MyDatabaseBackups(db.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("waiting for MyDatabaseBackup %q to exist", name), nil
	}
	if err != nil {
		return nil, "", err
	}
	if b.Status.Phase != examplev1.BackupPhaseSucceeded {
		return nil, fmt.Sprintf("waiting for MyDatabaseBackup %q to succeed (it is %s)", name, phaseOf(b)), nil
	}
	if l := b.Status.Location; l == nil || l.S3 == nil && l.Volume == nil {
		return nil, fmt.Sprintf("MyDatabaseBackup %q has no location mydb can read", name), nil
	}
	return b, "", nil
}

// describeTarget says a point-in-time target in words.
func describeTarget(t *examplev1.RecoveryTarget) string {
	switch {
	case t == nil || t.Latest:
		return "the end of its archive"
	case t.Time != nil:
		return t.Time.UTC().Format(time.RFC3339)
	case t.GTID != "":
		return "GTID " + t.GTID
	}
	return "LSN " + t.LSN
}

// restoreSource names what the restore loads, for messages: the backup
// picked or named.
func restoreSource(db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) string {
	if b != nil {
		return fmt.Sprintf("MyDatabaseBackup %q", b.Name)
	}
	if db.Spec.RestoreFrom.BackupName != "" {
		return fmt.Sprintf("MyDatabaseBackup %q", db.Spec.RestoreFrom.BackupName)
	}
	return fmt.Sprintf("a backup of MyDatabase %q", db.Spec.RestoreFrom.DatabaseName)
}

func phaseOf(b *examplev1.MyDatabaseBackup) examplev1.BackupPhase {
	if b.Status.Phase == "" {
		return examplev1.BackupPhasePending
	}
	return b.Status.Phase
}

// withRestore tells the instance managers of a restored database so.
func withRestore(spec *corev1.PodSpec, restore bool) {
	if restore {
		spec.Containers[0].Args = append(spec.Containers[0].Args, restoreFlag)
	}
}

// restoreID names the restore of db from b on the instance manager: a
// manager that answers for it with another ID was asked something else.
func restoreID(db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) string {
	return string(db.UID) + "-" + string(b.UID)
}

// reconcileRestore drives the restore of a database with spec.restoreFrom
// and says how it stands in f.restored: when the primary-to-be awaits its
// data, it is sent the backup's location, credentials, checksum and size
// (again after its manager restarted and forgot it); the condition follows
// what the manager reports. Once Restored is True it stays so.
func (c *Controller) reconcileRestore(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	if db.Spec.RestoreFrom == nil {
		return nil
	}
	if meta.IsStatusConditionTrue(db.Status.Conditions, examplev1.ConditionRestored) {
		return c.removeRestorePod(ctx, db)
	}
	if f.restoreWait != "" {
		f.restored = restoredCondition(metav1.ConditionFalse, ReasonWaitingForBackup, f.restoreWait)
		return nil
	}
	i := slices.IndexFunc(f.instances, func(in examplev1.InstanceStatus) bool { return in.Name == f.primary })
	if i < 0 || f.reports[i] == nil {
		f.restored = restoredCondition(metav1.ConditionFalse, ReasonRestoring, "waiting for the primary's instance manager to answer")
		return nil
	}
	report := f.reports[i]
	b, wait, err := c.restoreBackup(db)
	if err != nil {
		return err
	}
	var id string
	if b != nil {
		id = restoreID(db, b)
	}
	op := report.Restore
	if op != nil && id != "" && op.ID != id {
		op = nil // another restore's: not ours
	}
	switch {
	case op != nil && op.Phase == api.OperationFailed:
		f.restored = restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed,
			fmt.Sprintf("%s failed to load %s: %s", report.Name, restoreSource(db, b), op.Message))
		// It is not retried: nothing reads the claim any more.
		return c.removeRestorePod(ctx, db)
	case !report.AwaitingRestore && (op != nil && op.Phase == api.OperationSucceeded || report.Ready && report.Role == api.RolePrimary):
		f.restored = restoredCondition(metav1.ConditionTrue, ReasonRestored,
			fmt.Sprintf("%s loaded %s", report.Name, restoreSource(db, b)))
	case op != nil && op.Phase == api.OperationRunning:
		f.restored = restoredCondition(metav1.ConditionFalse, ReasonRestoring,
			fmt.Sprintf("%s is loading %s: %d bytes so far", report.Name, restoreSource(db, b), op.Bytes))
	case report.AwaitingRestore && b == nil:
		f.restored = restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed, "the restore cannot start: "+wait)
	case report.AwaitingRestore:
		f.restored = c.startRestore(ctx, db, b, f.instances[i], id)
	default:
		f.restored = restoredCondition(metav1.ConditionFalse, ReasonRestoring, fmt.Sprintf("waiting for %s to await its data", report.Name))
	}
	return nil
}

// startRestore sends the primary-to-be its backup.
func (c *Controller) startRestore(ctx context.Context, db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup, in examplev1.InstanceStatus, id string) *metav1.Condition {
	var source api.Destination
	if b.Status.Location.Volume != nil {
		volume, wait, err := c.restoreDumpServer(ctx, db, b)
		switch {
		case err != nil:
			return restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed, "the restore cannot start: "+err.Error())
		case wait != "":
			return restoredCondition(metav1.ConditionFalse, ReasonRestoring, wait)
		}
		source.Volume = volume
	} else {
		object, err := s3location.Object(ctx, c.kubeClient, b.Namespace, b.Status.Location.S3)
		if err != nil {
			return restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed, "the restore cannot start: "+err.Error())
		}
		source.S3 = object
	}
	req := api.RestoreRequest{ID: id, Source: source, SHA256: b.Status.Checksum, Size: b.Status.SizeBytes, Format: b.Status.Format}
	if pit := db.Spec.RestoreFrom.PointInTime; pit != nil {
		if source.S3 == nil {
			return restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed,
				fmt.Sprintf("MyDatabaseBackup %q is on a volume: a restore to a point replays an archive kept in S3, next to an S3 backup", b.Name))
		}
		if pit.Time != nil && b.Status.CompletionTime != nil && !pit.Time.After(b.Status.CompletionTime.Time) {
			return restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed,
				fmt.Sprintf("the target %s is not after MyDatabaseBackup %q ended (%s): name an older backup",
					pit.Time.UTC().Format(time.RFC3339), b.Name, b.Status.CompletionTime.UTC().Format(time.RFC3339)))
		}
		archive := *source.S3
		archive.Key = archivePrefixOfBackup(b.Status.Location.S3)
		req.Archive = &archive
		req.Target = &api.RecoveryTarget{LSN: pit.LSN, GTID: pit.GTID, Latest: pit.Latest}
		if pit.Time != nil {
			t := pit.Time.UTC()
			req.Target.Time = &t
		}
	}
	creds, err := c.authority.Credentials(db.Namespace, db.Name)
	if err != nil {
		return restoredCondition(metav1.ConditionFalse, ReasonRestoring, "waiting for the database's CA: "+err.Error())
	}
	auth := api.Auth{Credentials: creds, Name: in.Name}
	op, err := c.restores.StartRestore(ctx, in.Address, auth, req)
	switch {
	case errors.Is(err, api.ErrRefused):
		return restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed, fmt.Sprintf("%s refused to load MyDatabaseBackup %q: %v", in.Name, b.Name, err))
	case errors.Is(err, api.ErrBusy):
		return restoredCondition(metav1.ConditionFalse, ReasonRestoring, fmt.Sprintf("%s runs another operation: %v", in.Name, err))
	case err != nil:
		return restoredCondition(metav1.ConditionFalse, ReasonRestoring, fmt.Sprintf("asking %s to load MyDatabaseBackup %q: %v", in.Name, b.Name, err))
	case op.Phase == api.OperationFailed:
		return restoredCondition(metav1.ConditionFalse, ReasonRestoreFailed,
			fmt.Sprintf("%s failed to load MyDatabaseBackup %q: %s", in.Name, b.Name, op.Message))
	}
	return restoredCondition(metav1.ConditionFalse, ReasonRestoring,
		fmt.Sprintf("%s is loading MyDatabaseBackup %q (%d bytes) from %s", in.Name, b.Name, b.Status.SizeBytes, b.Status.Location.URI()))
}

func restoredCondition(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
	if len(message) > 2048 {
		message = message[:2048]
	}
	return &metav1.Condition{Type: examplev1.ConditionRestored, Status: status, Reason: reason, Message: message}
}

// restoreEvent tells, once, that the restore moved to a new state.
func (c *Controller) restoreEvent(db *examplev1.MyDatabase, cond *metav1.Condition) {
	if cond == nil {
		return
	}
	old := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionRestored)
	if old != nil && old.Reason == cond.Reason {
		return
	}
	switch cond.Reason {
	case ReasonRestoring:
		c.recorder.Event(db, corev1.EventTypeNormal, ReasonRestoring, cond.Message)
	case ReasonRestoreFailed:
		c.recorder.Event(db, corev1.EventTypeWarning, ReasonRestoreFailed, cond.Message)
	case ReasonRestored:
		c.recorder.Event(db, corev1.EventTypeNormal, ReasonRestored, cond.Message)
	}
}

// handleBackup enqueues the databases waiting to restore from a backup.
func (c *Controller) handleBackup(obj interface{}) {
	b, ok := obj.(*examplev1.MyDatabaseBackup)
	if !ok {
		return
	}
	dbs, err := c.dbLister.MyDatabases(b.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, db := range dbs {
		if from := db.Spec.RestoreFrom; from != nil && (from.BackupName == b.Name || from.BackupName == "" && from.DatabaseName == b.Spec.DatabaseName) {
			c.enqueue(db)
		}
	}
}
