package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/internal/s3location"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

const (
	// cacheGrace is how long a backup waits for its database to appear in
	// the cache before it fails for want of one.
	cacheGrace = 30 * time.Second
	// startDeadline is how long a backup waits for an instance to take it
	// (none ready, or the one chosen busy or unreachable) before it fails.
	startDeadline = 10 * time.Minute
	// maxMessageLength bounds what an instance's message puts in the status.
	maxMessageLength = 1024
)

// sync moves one backup along and returns when to look at it again (0:
// when something changes). A pending backup is given an instance; the
// instance is recorded in the status before it is asked, so a backup is
// never asked of two instances. A running one is read from its instance; a
// finished one is never touched again, but for its deletion.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	if !c.namespaces.Serves(key.Namespace) {
		return 0, nil // the MyDatabase controller says why
	}
	backup, err := c.backupLister.MyDatabaseBackups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if backup.DeletionTimestamp != nil {
		return c.deleteDump(ctx, backup)
	}
	if finished(backup) {
		return 0, c.removeDumpPod(ctx, backup)
	}
	db, err := c.dbLister.MyDatabases(backup.Namespace).Get(backup.Spec.DatabaseName)
	if apierrors.IsNotFound(err) {
		// A database created just before its backup may not be cached yet.
		if c.clock.Since(backup.CreationTimestamp.Time) < cacheGrace {
			return 0, fmt.Errorf("MyDatabase %q is not in the cache yet", backup.Spec.DatabaseName)
		}
		return 0, c.fail(ctx, backup, fmt.Sprintf("MyDatabase %q does not exist", backup.Spec.DatabaseName))
	}
	if err != nil {
		return 0, err
	}
	if uid := backup.Status.DatabaseUID; uid != "" && uid != db.UID {
		return 0, c.fail(ctx, backup, fmt.Sprintf("MyDatabase %q was deleted and created again during the backup", db.Name))
	}
	if err := c.reconcileOwner(ctx, backup, db); err != nil {
		return 0, err
	}
	if backup.Status.Phase == examplev1.BackupPhaseRunning {
		return c.follow(ctx, backup, db)
	}
	return c.start(ctx, backup, db)
}

// start chooses the backup's instance, records it, and asks it to back up.
func (c *Controller) start(ctx context.Context, backup *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase) (time.Duration, error) {
	var dest *examplev1.BackupDestination
	if db.Spec.Backup != nil {
		dest = db.Spec.Backup.Destination
	}
	if dest == nil || dest.S3 == nil && dest.Volume == nil {
		return 0, c.fail(ctx, backup, fmt.Sprintf("MyDatabase %q has no backup destination: set spec.backup.destination", db.Name))
	}
	if db.Spec.Hibernate && backup.Status.Instance == "" {
		return 0, c.fail(ctx, backup, fmt.Sprintf("MyDatabase %q hibernates (spec.hibernate): no instance runs to back up; wake it first", db.Name))
	}
	if c.clock.Since(backup.CreationTimestamp.Time) > startDeadline {
		msg := fmt.Sprintf("no instance took the backup within %s", startDeadline)
		if backup.Status.Message != "" {
			msg += ": " + backup.Status.Message
		}
		return 0, c.fail(ctx, backup, msg)
	}
	status := *backup.Status.DeepCopy()
	status.Phase = examplev1.BackupPhasePending
	if status.Instance == "" {
		target := chooseInstance(db, backup.Spec.Target)
		if target == nil {
			status.Message = "waiting for a ready instance to back up"
			return c.pollInterval, c.setStatus(ctx, backup, status)
		}
		status.Instance, status.Role, status.DatabaseUID = target.Name, target.Role, db.UID
		status.Location = locationOf(dest, db, backup)
		status.Message = "asking " + target.Name + " to back up"
		// Recorded before the instance is asked: a retry asks the same one.
		return 0, c.setStatus(ctx, backup, status)
	}
	address, auth, err := c.reach(db, status.Instance)
	if err != nil {
		status.Message = err.Error()
		return c.pollInterval, c.setStatus(ctx, backup, status)
	}
	var destination api.Destination
	switch loc := status.Location; {
	case loc.Volume != nil:
		volume, wait, err := c.dumpServer(ctx, backup, db, dest.Volume)
		var refused refusal
		if errors.As(err, &refused) {
			return 0, c.fail(ctx, backup, refused.Error())
		}
		if err != nil || wait != "" {
			if wait != "" {
				status.Message = wait
				err = c.setStatus(ctx, backup, status)
			}
			// A dump server starts in seconds.
			return min(time.Second, c.pollInterval), err
		}
		destination.Volume = volume
	default:
		object, err := s3location.Object(ctx, c.kubeClient, backup.Namespace, loc.S3)
		if err != nil {
			if apierrors.IsNotFound(err) || !isAPIError(err) {
				return 0, c.fail(ctx, backup, err.Error())
			}
			return 0, err
		}
		destination.S3 = object
	}
	op, err := c.managers.StartBackup(ctx, address, auth, api.BackupRequest{
		ID: string(backup.UID), Destination: destination,
	})
	if errors.Is(err, api.ErrRefused) {
		return 0, c.fail(ctx, backup, fmt.Sprintf("instance %s refused the backup: %v", status.Instance, err))
	}
	if err != nil {
		status.Message = fmt.Sprintf("instance %s did not take the backup: %v", status.Instance, err)
		return c.pollInterval, c.setStatus(ctx, backup, status)
	}
	c.recorder.Eventf(backup, corev1.EventTypeNormal, ReasonBackupStarted, "Backing up %s (%s) to %s", status.Instance, status.Role, status.Location.URI())
	return c.record(ctx, backup, db, status, op)
}

// follow reads a running backup from its instance.
func (c *Controller) follow(ctx context.Context, backup *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase) (time.Duration, error) {
	status := *backup.Status.DeepCopy()
	address, auth, err := c.reach(db, status.Instance)
	if err != nil {
		status.Message = err.Error()
		return c.pollInterval, c.setStatus(ctx, backup, status)
	}
	op, err := c.managers.Backup(ctx, address, auth, string(backup.UID))
	switch {
	case errors.Is(err, api.ErrUnknownOperation):
		return 0, c.fail(ctx, backup, fmt.Sprintf("the instance %s restarted during the backup", status.Instance))
	case err != nil:
		status.Message = fmt.Sprintf("reading the backup from %s: %v", status.Instance, err)
		return c.pollInterval, c.setStatus(ctx, backup, status)
	}
	return c.record(ctx, backup, db, status, op)
}

// record writes what the instance reported of the backup.
func (c *Controller) record(ctx context.Context, backup *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, status examplev1.MyDatabaseBackupStatus, op *api.Operation) (time.Duration, error) {
	status.Phase, status.Message = examplev1.BackupPhaseRunning, ""
	if !op.StartTime.IsZero() {
		status.StartTime = &metav1.Time{Time: op.StartTime}
	} else if status.StartTime == nil {
		status.StartTime = ptrTime(c.now())
	}
	status.Bytes = op.Bytes
	switch op.Phase {
	case api.OperationRunning:
		return c.pollInterval, c.setStatus(ctx, backup, status)
	case api.OperationSucceeded:
		status.Phase = examplev1.BackupPhaseSucceeded
		status.SizeBytes, status.Checksum, status.Format = op.Size, op.SHA256, op.Format
		status.Position = api.PositionToV1(op.Position)
		status.CompletionTime = completion(op, c.now(), status.StartTime)
		if err := c.setStatus(ctx, backup, status); err != nil {
			return 0, err
		}
		c.recorder.Eventf(backup, corev1.EventTypeNormal, ReasonBackupSucceeded, "Backup of %s (%s, %d bytes, sha256 %s) stored at %s",
			status.Instance, db.Name, status.SizeBytes, status.Checksum, status.Location.URI())
		return 0, nil
	default:
		status.Phase = examplev1.BackupPhaseFailed
		status.Message = truncate("the instance manager reported: " + op.Message)
		status.CompletionTime = completion(op, c.now(), status.StartTime)
		if err := c.setStatus(ctx, backup, status); err != nil {
			return 0, err
		}
		c.recorder.Eventf(backup, corev1.EventTypeWarning, ReasonBackupFailed, "Backup of %s failed: %s", db.Name, status.Message)
		return 0, nil
	}
}

// reach is the address of one of db's instances and the credentials of its
// manager's endpoints.
func (c *Controller) reach(db *examplev1.MyDatabase, name string) (string, api.Auth, error) {
	i := slices.IndexFunc(db.Status.Instances, func(in examplev1.InstanceStatus) bool { return in.Name == name })
	if i < 0 || db.Status.Instances[i].Address == "" {
		return "", api.Auth{}, fmt.Errorf("waiting for the instance %s to have an address", name)
	}
	creds, err := c.authority.Credentials(db.Namespace, db.Name)
	if err != nil {
		return "", api.Auth{}, err
	}
	return db.Status.Instances[i].Address, api.Auth{Credentials: creds, Name: name}, nil
}

// chooseInstance picks the instance a backup reads. PreferReplica takes the
// ready replica whose position is furthest along (a ready replica streams
// from the primary within the lag bound), and the ready primary when no
// replica is ready; Primary takes the ready primary. A fenced primary
// takes no backup: a switchover or failover is under way.
func chooseInstance(db *examplev1.MyDatabase, target examplev1.BackupTarget) *examplev1.InstanceStatus {
	var primary, replica *examplev1.InstanceStatus
	for i := range db.Status.Instances {
		in := &db.Status.Instances[i]
		if !in.Ready || in.Address == "" {
			continue
		}
		switch {
		case in.Role == examplev1.InstanceRolePrimary && in.Name == db.Status.CurrentPrimary && !in.Fenced:
			primary = in
		case in.Role == examplev1.InstanceRoleReplica:
			if replica == nil || ahead(in.Position, replica.Position) {
				replica = in
			}
		}
	}
	if target != examplev1.BackupTargetPrimary && replica != nil {
		return replica
	}
	return primary
}

// ahead tells whether position p is past q.
func ahead(p, q *examplev1.InstancePosition) bool {
	if p == nil || q == nil {
		return p != nil
	}
	return api.PositionFromV1(*p).Compare(api.PositionFromV1(*q)) > 0
}

// deleteDump deletes a deleted backup's object from its bucket, then lets
// the backup go. A running backup is first left to end, so its upload
// cannot land after the delete. When the Secret that reads the bucket is
// gone, the dump cannot be deleted: a Warning says it stays.
func (c *Controller) deleteDump(ctx context.Context, backup *examplev1.MyDatabaseBackup) (time.Duration, error) {
	if !slices.Contains(backup.Finalizers, examplev1.BackupFinalizer) {
		return 0, nil
	}
	if backup.Status.Phase == examplev1.BackupPhaseRunning {
		if running, err := c.stillRunning(ctx, backup); running {
			return c.pollInterval, err
		}
	}
	if loc := backup.Status.Location; loc != nil && loc.Volume != nil {
		if err := c.deleteDumpClaim(ctx, backup); err != nil {
			c.recorder.Eventf(backup, corev1.EventTypeWarning, ReasonDumpKept, "Deleting the dump at %s: %v", loc.URI(), err)
			return 0, err
		}
		c.recorder.Eventf(backup, corev1.EventTypeNormal, ReasonDumpDeleted, "Deleted the dump at %s", loc.URI())
	}
	if loc := backup.Status.Location; loc != nil && loc.S3 != nil {
		object, err := s3location.Object(ctx, c.kubeClient, backup.Namespace, loc.S3)
		switch {
		case apierrors.IsNotFound(err):
			c.recorder.Eventf(backup, corev1.EventTypeWarning, ReasonDumpKept, "The dump at %s stays in its bucket: %v", loc.URI(), err)
		case err != nil:
			return 0, err
		default:
			if err := c.stores.Delete(ctx, s3location.StoreConfig(object), loc.S3.Key); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
				c.recorder.Eventf(backup, corev1.EventTypeWarning, ReasonDumpKept, "Deleting the dump at %s: %v", loc.URI(), err)
				return 0, err
			}
			c.recorder.Eventf(backup, corev1.EventTypeNormal, ReasonDumpDeleted, "Deleted the dump at %s", loc.URI())
		}
	}
	updated := backup.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == examplev1.BackupFinalizer })
	_, err := c.mydbClient.ExampleV1().MyDatabaseBackups(backup.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	return 0, err
}

// stillRunning tells whether a deleted backup's instance still runs it.
func (c *Controller) stillRunning(ctx context.Context, backup *examplev1.MyDatabaseBackup) (bool, error) {
	db, err := c.dbLister.MyDatabases(backup.Namespace).Get(backup.Spec.DatabaseName)
	if err != nil || db.UID != backup.Status.DatabaseUID {
		return false, nil // no database, no instance to run it
	}
	address, auth, err := c.reach(db, backup.Status.Instance)
	if err != nil {
		return false, nil
	}
	op, err := c.managers.Backup(ctx, address, auth, string(backup.UID))
	if errors.Is(err, api.ErrUnknownOperation) {
		return false, nil
	}
	if err != nil {
		return true, err // try again: an upload may still be on its way
	}
	return op.Phase == api.OperationRunning, nil
}

func (c *Controller) now() metav1.Time { return metav1.NewTime(c.clock.Now()) }

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func finished(b *examplev1.MyDatabaseBackup) bool {
	return b.Status.Phase == examplev1.BackupPhaseSucceeded || b.Status.Phase == examplev1.BackupPhaseFailed
}

// completion is when an operation finished, never before it started.
func completion(op *api.Operation, now metav1.Time, start *metav1.Time) *metav1.Time {
	t := now
	if op.FinishTime != nil {
		t = metav1.NewTime(*op.FinishTime)
	}
	if start != nil && t.Before(start) {
		t = *start
	}
	return &t
}

// fail ends a backup as Failed with msg.
func (c *Controller) fail(ctx context.Context, b *examplev1.MyDatabaseBackup, msg string) error {
	now := c.now()
	s := *b.Status.DeepCopy()
	s.Phase, s.Message, s.CompletionTime = examplev1.BackupPhaseFailed, truncate(msg), &now
	if s.StartTime == nil || s.StartTime.After(now.Time) {
		s.StartTime = &now
	}
	if err := c.setStatus(ctx, b, s); err != nil {
		return err
	}
	c.recorder.Eventf(b, corev1.EventTypeWarning, ReasonBackupFailed, "Backup of %s failed: %s", b.Spec.DatabaseName, s.Message)
	return nil
}

func truncate(s string) string {
	if len(s) > maxMessageLength {
		return s[:maxMessageLength]
	}
	return s
}

// isAPIError tells an error of the API server (which may pass) from one of
// the Secret's content (which will not).
func isAPIError(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// setStatus writes status through /status when it changed.
func (c *Controller) setStatus(ctx context.Context, b *examplev1.MyDatabaseBackup, status examplev1.MyDatabaseBackupStatus) error {
	if apiequality.Semantic.DeepEqual(b.Status, status) {
		return nil
	}
	updated := b.DeepCopy()
	updated.Status = status
	_, err := c.mydbClient.ExampleV1().MyDatabaseBackups(b.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return err
}

// reconcileOwner ties the backup to its database when the database's
// deletionPolicy is Delete, so the garbage collector removes backups (and,
// through their finalizer, their dumps) with it; with Retain, backups
// outlive the database. A final backup is never owned: it exists to
// outlive its database.
func (c *Controller) reconcileOwner(ctx context.Context, b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase) error {
	want := db.Spec.DeletionPolicy == examplev1.DeletionPolicyDelete && b.Labels[names.FinalBackupLabel] == "" && db.DeletionTimestamp == nil
	var refs []metav1.OwnerReference
	has := false
	for _, ref := range b.OwnerReferences {
		if ref.UID == db.UID {
			has = true
			continue
		}
		refs = append(refs, ref)
	}
	if has == want || (has && db.DeletionTimestamp != nil) {
		return nil
	}
	if want {
		refs = append(refs, ownerRef(db))
	}
	updated := b.DeepCopy()
	updated.OwnerReferences = refs
	_, err := c.mydbClient.ExampleV1().MyDatabaseBackups(b.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// ownerRef is a non-controlling owner reference: the database owns its
// backups' lifetime, not their reconciling.
func ownerRef(db *examplev1.MyDatabase) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: examplev1.SchemeGroupVersion.String(), Kind: "MyDatabase", Name: db.Name, UID: db.UID}
}
