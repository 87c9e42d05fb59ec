// Package backupschedule is the controller that takes the backups a
// MyDatabase's policy asks for: on schedule (spec.backup.schedule, pruned
// beyond spec.backup.retention), and a final one before it is deleted
// (spec.backup.finalBackup).
package backupschedule

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	"github.com/mydb-dev/mydb/pkg/scope"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/apis/example/validation"
	"github.com/mydb-dev/mydb/pkg/controller/runner"
	clientset "github.com/mydb-dev/mydb/pkg/generated/clientset/versioned"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions/example/v1"
	examplelisters "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Controller takes scheduled backups.
type Controller struct {
	// mydbClient creates and deletes backups through mydb's own API.
	mydbClient   clientset.Interface
	dbLister     examplelisters.MyDatabaseLister
	backupLister examplelisters.MyDatabaseBackupLister
	// namespaces are where databases are served; empty is everywhere.
	namespaces scope.Namespaces
	informers  []cache.SharedIndexInformer
	handlers   runner.Handlers

	// queue holds MyDatabases to look at, each re-added for its next due time.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// clock decides what is due and delays the queue; tests inject a fake one.
	clock clock.WithTicker
}

// NewController returns a controller reading from the informers.
func NewController(mydbClient clientset.Interface, dbs exampleinformers.MyDatabaseInformer, backups exampleinformers.MyDatabaseBackupInformer,
	namespaces scope.Namespaces, clk clock.WithTicker) (*Controller, error) {
	c := &Controller{
		mydbClient:   mydbClient,
		namespaces:   namespaces,
		dbLister:     dbs.Lister(),
		backupLister: backups.Lister(),
		informers:    []cache.SharedIndexInformer{dbs.Informer(), backups.Informer()},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "mydatabase-backup-schedule", Clock: clk}),
		clock: clk,
	}
	if err := c.handlers.Add(dbs.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj interface{}) { c.enqueue(obj) },
	}); err != nil {
		return nil, err
	}
	// A backup that finishes may let an older one be pruned, or a deleting
	// database go; one deleted may have to be taken again.
	if err := c.handlers.Add(backups.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { c.enqueueDatabaseOf(obj) },
		DeleteFunc: c.enqueueDatabaseOf,
	}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close removes the controller's handlers from the shared informers.
func (c *Controller) Close() { c.handlers.RemoveAll() }

// Run takes scheduled backups with workers goroutines until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) error {
	return runner.Run(ctx, c.queue, workers, c.syncAndSchedule, nil, c.informers...)
}

// syncAndSchedule syncs a database and comes back to it when its next
// backup is due.
func (c *Controller) syncAndSchedule(ctx context.Context, key cache.ObjectName) error {
	next, err := c.sync(ctx, key)
	if err == nil && !next.IsZero() {
		c.queue.AddAfter(key, next.Sub(c.clock.Now()))
	}
	return err
}

// enqueueDatabaseOf enqueues the database a backup was scheduled or taken
// last for.
func (c *Controller) enqueueDatabaseOf(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	b, ok := obj.(*examplev1.MyDatabaseBackup)
	if !ok {
		return
	}
	for _, label := range []string{names.ScheduleLabel, names.FinalBackupLabel} {
		if db := b.Labels[label]; db != "" {
			c.queue.Add(cache.ObjectName{Namespace: b.Namespace, Name: db})
		}
	}
}

func (c *Controller) enqueue(obj interface{}) {
	if name, err := cache.ObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

// sync takes the backup that is due, if one is, prunes scheduled backups
// beyond retention, and returns when the next backup is due (zero: never).
// Backups are named after their due time, so taking one twice, by two
// leaders or after a crash, creates it once. The last due time taken is
// kept in the database's status, which only mydb writes: no backup a user
// creates or labels can move the schedule.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Time, error) {
	if !c.namespaces.Serves(key.Namespace) {
		return time.Time{}, nil // the MyDatabase controller says why
	}
	db, err := c.dbLister.MyDatabases(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	if db.DeletionTimestamp != nil {
		return time.Time{}, c.finalBackup(ctx, db)
	}
	if db.Spec.Backup == nil || db.Spec.Backup.Schedule == "" {
		return time.Time{}, nil
	}
	if db.Spec.Hibernate {
		// No instance runs to back up. On waking, the latest time missed
		// is taken, as after any downtime.
		return time.Time{}, nil
	}
	schedule, err := validation.ParseSchedule(db.Spec.Backup.Schedule)
	if err != nil {
		return time.Time{}, nil // validation refuses such a database
	}

	// The latest due time since the last scheduled backup (or since the
	// database was created); missed ones before it are skipped. A last
	// time before the creation (a zero time, or one written by hand) counts
	// from the creation: walking a schedule of every minute from year 1
	// would hold this worker for hours. One further ahead than any clock
	// skew counts from the creation too: a leader whose clock had jumped
	// years ahead wrote it, and kept, it would stop the schedule until then.
	now := c.clock.Now()
	last := db.CreationTimestamp.Time
	if lst := db.Status.LastScheduleTime; lst != nil && lst.After(last) && !lst.After(now.Add(maxClockSkew)) {
		last = lst.Time
	}
	var due time.Time
	for t := schedule.Next(last); !t.After(now); t = schedule.Next(t) {
		due = t
	}
	if !due.IsZero() {
		if err := c.takeBackup(ctx, db, due); err != nil {
			return time.Time{}, err
		}
		if err := c.recordSchedule(ctx, db, due); err != nil {
			return time.Time{}, err
		}
	}
	if err := c.prune(ctx, db); err != nil {
		return time.Time{}, err
	}
	return schedule.Next(now), nil
}

// maxClockSkew is the furthest ahead of this replica's clock another
// replica's may be.
const maxClockSkew = 5 * time.Minute

// recordSchedule writes the due time just taken into the database's status.
func (c *Controller) recordSchedule(ctx context.Context, db *examplev1.MyDatabase, due time.Time) error {
	updated := db.DeepCopy()
	updated.Status.LastScheduleTime = &metav1.Time{Time: due}
	_, err := c.mydbClient.ExampleV1().MyDatabases(db.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	return err
}

func (c *Controller) takeBackup(ctx context.Context, db *examplev1.MyDatabase, due time.Time) error {
	b := &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{
			// Unique per due time; base 36 keeps it within the name limit.
			Name:        db.Name + "-" + strconv.FormatInt(due.Unix(), 36),
			Namespace:   db.Namespace,
			Labels:      map[string]string{names.ScheduleLabel: db.Name},
			Annotations: map[string]string{names.ScheduledForAnnotation: due.UTC().Format(time.RFC3339)},
		},
		Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: db.Name, Target: examplev1.BackupTargetPreferReplica},
	}
	_, err := c.mydbClient.ExampleV1().MyDatabaseBackups(db.Namespace).Create(ctx, b, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// prune keeps the newest spec.backup.retention succeeded scheduled backups
// of this database and deletes the older succeeded ones (their finalizer
// deletes their dumps), and the failed ones older than the oldest kept or
// beyond the newest spec.backup.retention failures: failures never push a
// good backup out, nor pile up. Running backups, backups taken by
// hand and those of an earlier database of the same name are never
// deleted.
func (c *Controller) prune(ctx context.Context, db *examplev1.MyDatabase) error {
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.SelectorFromSet(labels.Set{names.ScheduleLabel: db.Name}))
	if err != nil {
		return err
	}
	var succeeded, failed []*examplev1.MyDatabaseBackup
	for _, b := range backups {
		if b.Spec.DatabaseName != db.Name || b.Status.DatabaseUID != db.UID || b.DeletionTimestamp != nil || b.Status.StartTime == nil {
			continue
		}
		switch b.Status.Phase {
		case examplev1.BackupPhaseSucceeded:
			succeeded = append(succeeded, b)
		case examplev1.BackupPhaseFailed:
			failed = append(failed, b)
		}
	}
	newestFirst := func(a, b *examplev1.MyDatabaseBackup) int { return b.Status.StartTime.Compare(a.Status.StartTime.Time) }
	slices.SortFunc(succeeded, newestFirst)
	slices.SortFunc(failed, newestFirst)
	keep := int(ptr.Deref(db.Spec.Backup.Retention, examplev1.DefaultBackupRetention))
	// A recovery window keeps, besides, every backup a replay to a moment
	// of it may start from.
	var window time.Duration
	if pitr := db.Spec.Backup.PointInTimeRecovery; pitr != nil && pitr.RetentionWindow != nil {
		window = pitr.RetentionWindow.Duration
	}
	now := c.clock.Now()
	base := pitrwindow.Base(succeeded, now, window)
	var prune []*examplev1.MyDatabaseBackup
	var oldestKept time.Time
	for i, b := range succeeded {
		if i < keep || window > 0 && pitrwindow.Needed(b, base, now, window) {
			oldestKept = b.Status.StartTime.Time
			continue
		}
		prune = append(prune, b)
	}
	if len(prune) == 0 {
		oldestKept = time.Time{}
	}
	for i, b := range failed {
		// As many failures as successes are kept, the newest, so that a
		// schedule that keeps failing does not pile them up.
		if i >= keep || b.Status.StartTime.Time.Before(oldestKept) {
			prune = append(prune, b)
		}
	}
	for _, b := range prune {
		err := c.mydbClient.ExampleV1().MyDatabaseBackups(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &b.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// finalBackupName is the final backup of a deletion: a database deleted
// again under the same name (a new one) gets another.
func finalBackupName(db *examplev1.MyDatabase) string {
	return names.FinalBackup(db.Name, db.DeletionTimestamp.Unix())
}

// finalBackup lets a deleting database go once a final backup of it
// succeeded, or at once when the user skips it. A failed final backup
// keeps the database (and its running replicas) until the user decides:
// skip it, or delete the failed backup to have another taken.
func (c *Controller) finalBackup(ctx context.Context, db *examplev1.MyDatabase) error {
	if !slices.Contains(db.Finalizers, examplev1.FinalBackupFinalizer) {
		return nil
	}
	if db.Annotations[examplev1.SkipFinalBackupAnnotation] == "true" {
		return c.release(ctx, db)
	}
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.SelectorFromSet(labels.Set{names.FinalBackupLabel: db.Name}))
	if err != nil {
		return err
	}
	if slices.ContainsFunc(backups, func(b *examplev1.MyDatabaseBackup) bool { return isFinalBackupOf(b, db) }) {
		return c.release(ctx, db)
	}
	if _, err := c.backupLister.MyDatabaseBackups(db.Namespace).Get(finalBackupName(db)); !apierrors.IsNotFound(err) {
		return err // it runs, or failed (the backup's update requeues the database)
	}
	final := &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{Name: finalBackupName(db), Namespace: db.Namespace,
			Labels: map[string]string{names.FinalBackupLabel: db.Name}},
		// The primary: the final backup holds every acknowledged commit.
		Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: db.Name, Target: examplev1.BackupTargetPrimary},
	}
	_, err = c.mydbClient.ExampleV1().MyDatabaseBackups(db.Namespace).Create(ctx, final, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// isFinalBackupOf tells whether b is a backup that lets db go: a
// succeeded backup of this database (its UID, which the backup controller
// records; not an earlier database's of the same name), begun after the
// deletion began (so it holds the data as it ends, not an older copy), and
// not owned by the database (so it outlives it). Every fact but the name
// and label is in the status, which only mydb's controllers write: neither
// a leftover <database>-final nor a lookalike a user creates passes.
func isFinalBackupOf(b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase) bool {
	s := b.Status
	return b.Spec.DatabaseName == db.Name && b.DeletionTimestamp == nil &&
		s.Phase == examplev1.BackupPhaseSucceeded && s.DatabaseUID == db.UID &&
		s.StartTime != nil && !s.StartTime.Before(db.DeletionTimestamp) &&
		!slices.ContainsFunc(b.OwnerReferences, func(ref metav1.OwnerReference) bool { return ref.UID == db.UID })
}

// release removes the final-backup finalizer: a merge patch of the
// finalizers, with the resourceVersion they were read at, since the cached
// database lacks the labels and annotations no controller reads
// (manager.TrimForCache) and an update would remove them.
func (c *Controller) release(ctx context.Context, db *examplev1.MyDatabase) error {
	finalizers := slices.DeleteFunc(slices.Clone(db.Finalizers), func(f string) bool { return f == examplev1.FinalBackupFinalizer })
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": db.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.mydbClient.ExampleV1().MyDatabases(db.Namespace).Patch(ctx, db.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
