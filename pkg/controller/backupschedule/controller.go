// Package backupschedule is the controller that takes the backups a
// MyDatabase's policy asks for: on schedule (spec.backup.schedule, pruned
// beyond spec.backup.retention), and a final one before it is deleted
// (spec.backup.finalBackup).
package backupschedule

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/mydb-dev/mydb/pkg/names"

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
	informers    []cache.SharedIndexInformer
	handlers     runner.Handlers

	// queue holds MyDatabases to look at, each re-added for its next due time.
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// clock decides what is due and delays the queue; tests inject a fake one.
	clock clock.WithTicker
}

// NewController returns a controller reading from the informers.
func NewController(mydbClient clientset.Interface, dbs exampleinformers.MyDatabaseInformer, backups exampleinformers.MyDatabaseBackupInformer, clk clock.WithTicker) (*Controller, error) {
	c := &Controller{
		mydbClient:   mydbClient,
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
	// database go.
	if err := c.handlers.Add(backups.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			b := obj.(*examplev1.MyDatabaseBackup)
			for _, label := range []string{names.ScheduleLabel, names.FinalBackupLabel} {
				if db := b.Labels[label]; db != "" {
					c.queue.Add(cache.ObjectName{Namespace: b.Namespace, Name: db})
				}
			}
		},
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

func (c *Controller) enqueue(obj interface{}) {
	if name, err := cache.ObjectToName(obj); err == nil {
		c.queue.Add(name)
	}
}

// sync takes the backup that is due, if one is, prunes scheduled backups
// beyond retention, and returns when the next backup is due (zero: never).
// Backups are named after their due time, so taking one twice, by two
// leaders or after a crash, creates it once.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) (time.Time, error) {
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
	schedule, err := validation.ParseSchedule(db.Spec.Backup.Schedule)
	if err != nil {
		return time.Time{}, nil // validation refuses such a database
	}
	scheduled, err := c.scheduledBackups(db)
	if err != nil {
		return time.Time{}, err
	}

	// The latest due time since the last scheduled backup (or since the
	// database was created); missed ones before it are skipped.
	last := db.CreationTimestamp.Time
	if len(scheduled) > 0 {
		last = scheduledFor(scheduled[len(scheduled)-1])
	}
	now := c.clock.Now()
	var due time.Time
	for t := schedule.Next(last); !t.After(now); t = schedule.Next(t) {
		due = t
	}
	if !due.IsZero() {
		b, err := c.takeBackup(ctx, db, due)
		if err != nil {
			return time.Time{}, err
		}
		scheduled = append(scheduled, b)
	}
	if err := c.prune(ctx, db, scheduled); err != nil {
		return time.Time{}, err
	}
	return schedule.Next(now), nil
}

// scheduledBackups returns the database's scheduled backups, oldest first.
func (c *Controller) scheduledBackups(db *examplev1.MyDatabase) ([]*examplev1.MyDatabaseBackup, error) {
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.SelectorFromSet(labels.Set{names.ScheduleLabel: db.Name}))
	if err != nil {
		return nil, err
	}
	sort.Slice(backups, func(i, j int) bool { return scheduledFor(backups[i]).Before(scheduledFor(backups[j])) })
	return backups, nil
}

func scheduledFor(b *examplev1.MyDatabaseBackup) time.Time {
	t, err := time.Parse(time.RFC3339, b.Annotations[names.ScheduledForAnnotation])
	if err != nil {
		return b.CreationTimestamp.Time
	}
	return t
}

func (c *Controller) takeBackup(ctx context.Context, db *examplev1.MyDatabase, due time.Time) (*examplev1.MyDatabaseBackup, error) {
	b := &examplev1.MyDatabaseBackup{
		ObjectMeta: metav1.ObjectMeta{
			// Unique per due time; base 36 keeps it within the name limit.
			Name:        db.Name + "-" + strconv.FormatInt(due.Unix(), 36),
			Namespace:   db.Namespace,
			Labels:      map[string]string{names.ScheduleLabel: db.Name},
			Annotations: map[string]string{names.ScheduledForAnnotation: due.UTC().Format(time.RFC3339)},
		},
		Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: db.Name},
	}
	created, err := c.mydbClient.ExampleV1().MyDatabaseBackups(db.Namespace).Create(ctx, b, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return b, nil
	}
	return created, err
}

// prune deletes the oldest finished scheduled backups beyond retention;
// running ones are never cut short, and backups taken by hand never count.
func (c *Controller) prune(ctx context.Context, db *examplev1.MyDatabase, scheduled []*examplev1.MyDatabaseBackup) error {
	excess := len(scheduled) - int(ptr.Deref(db.Spec.Backup.Retention, examplev1.DefaultBackupRetention))
	for i := 0; i < excess; i++ {
		b := scheduled[i]
		if b.Status.Phase != examplev1.BackupPhaseSucceeded && b.Status.Phase != examplev1.BackupPhaseFailed {
			continue
		}
		err := c.mydbClient.ExampleV1().MyDatabaseBackups(b.Namespace).Delete(ctx, b.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &b.UID},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// finalBackup lets a deleting database go once its final backup succeeded,
// or at once when the user skips it. A failed final backup keeps the
// database (and its running replicas) until the user decides.
func (c *Controller) finalBackup(ctx context.Context, db *examplev1.MyDatabase) error {
	if !slices.Contains(db.Finalizers, examplev1.FinalBackupFinalizer) {
		return nil
	}
	if db.Annotations[examplev1.SkipFinalBackupAnnotation] == "true" {
		return c.release(ctx, db)
	}
	b, err := c.backupLister.MyDatabaseBackups(db.Namespace).Get(names.FinalBackup(db.Name))
	if apierrors.IsNotFound(err) {
		final := &examplev1.MyDatabaseBackup{
			ObjectMeta: metav1.ObjectMeta{Name: names.FinalBackup(db.Name), Namespace: db.Namespace,
				Labels: map[string]string{names.FinalBackupLabel: db.Name}},
			Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: db.Name},
		}
		_, err := c.mydbClient.ExampleV1().MyDatabaseBackups(db.Namespace).Create(ctx, final, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if b.Status.Phase == examplev1.BackupPhaseSucceeded {
		return c.release(ctx, db)
	}
	return nil // the backup's update requeues the database
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
