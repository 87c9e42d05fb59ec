package mydatabase

import (
	"context"
	"fmt"
	"path"
	"sync"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/controller/internal/s3location"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// ArchiveSetter tells an instance manager where its WAL archive is (PUT
// /v1/archive): *api.Client, or a test's fake.
type ArchiveSetter interface {
	SetArchive(ctx context.Context, host string, auth api.Auth, req api.ArchiveRequest) (*api.ArchiveStatus, error)
}

// Reasons of the ContinuousArchiving condition.
const (
	ReasonArchiving            = "Archiving"
	ReasonArchiveStarting      = "ArchiveStarting"
	ReasonArchiveFailing       = "ArchiveFailing"
	ReasonArchiveLagging       = "ArchiveLagging"
	ReasonArchiveNotConfigured = "ArchiveNotConfigured"
)

// The flags that make an instance archive its WAL.
const (
	walArchiveFlag     = "--wal-archive"
	archiveTimeoutFlag = "--archive-timeout"
)

// ArchivePrefix is where db's WAL archive is kept in its destination,
// next to its backups: <prefix>/<namespace>/<database>/<database UID>; the
// files are below it (instance.WALKey). A restored database has a UID, so
// a prefix, of its own: it never writes into its source's archive.
func ArchivePrefix(d *examplev1.S3Destination, db *examplev1.MyDatabase) string {
	return path.Join(d.Prefix, db.Namespace, db.Name, string(db.UID))
}

// archivePrefixOfBackup is the archive of the database a backup in S3 was
// taken of: the directory its object is in.
func archivePrefixOfBackup(l *examplev1.S3Location) string { return path.Dir(l.Key) }

// withArchive makes the instances of a database with point-in-time
// recovery archive their WAL.
func withArchive(spec *corev1.PodSpec, db *examplev1.MyDatabase) {
	pitr := pointInTimeRecovery(db)
	if pitr == nil {
		return
	}
	timeout := examplev1.DefaultArchiveTimeout
	if pitr.ArchiveTimeout != nil {
		timeout = pitr.ArchiveTimeout.Duration
	}
	spec.Containers[0].Args = append(spec.Containers[0].Args, walArchiveFlag, archiveTimeoutFlag+"="+timeout.String())
}

// archiveLagBound is how long a primary may archive nothing before the
// archive is said to lag: twice its archiveTimeout, and a minute.
func archiveLagBound(db *examplev1.MyDatabase) time.Duration {
	timeout := examplev1.DefaultArchiveTimeout
	if pitr := pointInTimeRecovery(db); pitr != nil && pitr.ArchiveTimeout != nil {
		timeout = pitr.ArchiveTimeout.Duration
	}
	return 2*timeout + time.Minute
}

func pointInTimeRecovery(db *examplev1.MyDatabase) *examplev1.PointInTimeRecovery {
	if b := db.Spec.Backup; b != nil && b.Destination != nil && b.Destination.S3 != nil {
		return b.PointInTimeRecovery
	}
	return nil
}

// archiveCredentialsCheck is how often the controller reads a database's
// archive credentials to find a rotated key: the bound on how long the
// managers upload with the old one (a GET of the user's Secret, which is
// not watched, each time).
const archiveCredentialsCheck = time.Minute

// reconcileArchive tells every instance that archives and does not know
// where (a new or restarted manager), or that uploads with credentials the
// user's Secret no longer holds, the database's archive; and says in f how
// the primary's archiving stands.
func (c *Controller) reconcileArchive(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	if pointInTimeRecovery(db) == nil {
		return nil
	}
	dest := db.Spec.Backup.Destination.S3
	prefix := ArchivePrefix(dest, db)
	want := instance.ArchiveURL(api.S3Object{Endpoint: dest.Endpoint, Bucket: dest.Bucket, Key: prefix})
	unconfigured := false
	for _, report := range f.reports {
		if report != nil && report.Archive != nil && (!report.Archive.Configured || report.Archive.Prefix != want) {
			unconfigured = true
		}
	}
	now := c.clock.Now()
	check := c.archiveCredentialChecks.due(db.UID, now, archiveCredentialsCheck)
	if unconfigured || check {
		object, err := s3location.Object(ctx, c.kubeClient, db.Namespace, &examplev1.S3Location{
			Endpoint: dest.Endpoint, Region: dest.Region, Bucket: dest.Bucket, Key: prefix,
			CredentialsSecret: dest.CredentialsSecret, CABundle: dest.CABundle,
		})
		switch {
		case err != nil && unconfigured:
			f.archiving = archivingCondition(metav1.ConditionFalse, ReasonArchiveNotConfigured, "the archive's credentials: "+err.Error())
			return nil
		case err != nil:
			// The managers keep the credentials they have; the next check
			// reads again.
			klog.FromContext(ctx).Info("reading the archive's credentials", "err", err)
		default:
			c.archiveCredentialChecks.done(db.UID, now)
			c.sendArchive(ctx, db, f, *object)
		}
	}
	f.archiving, f.recoverability = c.archiveState(db, f)
	return c.pruneArchive(ctx, db, prefix)
}

// sendArchive sends object to every archiving instance that archives
// elsewhere or with other credentials.
func (c *Controller) sendArchive(ctx context.Context, db *examplev1.MyDatabase, f *findings, object api.S3Object) {
	want, credentials := instance.ArchiveURL(object), instance.ArchiveCredentials(object)
	for i, report := range f.reports {
		// A manager too old to report its credentials is left as it is
		// (it gets them again when its pod is updated).
		if report == nil || report.Archive == nil || report.Archive.Configured && report.Archive.Prefix == want &&
			(report.Archive.Credentials == "" || report.Archive.Credentials == credentials) {
			continue
		}
		in := f.instances[i]
		creds, err := c.authority.Credentials(db.Namespace, db.Name)
		if err != nil {
			return // the CA comes first; the next sync tries again
		}
		st, err := c.archives.SetArchive(ctx, in.Address, api.Auth{Credentials: creds, Name: in.Name}, api.ArchiveRequest{Destination: object})
		if err != nil {
			klog.FromContext(ctx).Info("telling an instance where its archive is", "instance", in.Name, "err", err)
			continue
		}
		if report.Archive.Configured && report.Archive.Prefix == want {
			c.recorder.Eventf(db, corev1.EventTypeNormal, "ArchiveCredentialsChanged",
				"%s archives with the credentials Secret %q as it is now", in.Name, db.Spec.Backup.Destination.S3.CredentialsSecret.Name)
		}
		report.Archive = st
	}
}

// ArchivePruner deletes what cut leaves unneeded of archive (S3Object.Key
// is its prefix): the WAL files below cut.Segment (history files stay),
// and the binary logs cut.GTID holds that closed before cut.Began.
type ArchivePruner interface {
	PruneArchive(ctx context.Context, archive api.S3Object, cut pitrwindow.Cut) (deleted int, err error)
}

// archivePruneInterval is how often a database's archive is pruned: a
// listing of the bucket each time.
const archivePruneInterval = 10 * time.Minute

// pruneArchive deletes, at most every archivePruneInterval, the archived
// WAL that spec.backup.pointInTimeRecovery.retentionWindow no longer
// needs: the segments below where the window's base backup ends. Without
// a window, or a base with a known position, nothing is deleted.
func (c *Controller) pruneArchive(ctx context.Context, db *examplev1.MyDatabase, prefix string) error {
	pitr := pointInTimeRecovery(db)
	if pitr.RetentionWindow == nil {
		return nil
	}
	now := c.clock.Now()
	if !c.archivePrunes.due(db.UID, now, archivePruneInterval) {
		return nil
	}
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.Everything())
	if err != nil {
		return err
	}
	var succeeded []*examplev1.MyDatabaseBackup
	for _, b := range backups {
		if b.Spec.DatabaseName == db.Name && b.Status.DatabaseUID == db.UID && b.Status.Phase == examplev1.BackupPhaseSucceeded &&
			b.Status.Location != nil && b.Status.Location.S3 != nil {
			succeeded = append(succeeded, b)
		}
	}
	window := pitr.RetentionWindow.Duration
	base := pitrwindow.Base(succeeded, now, window)
	cut, ok := pitrwindow.ArchiveCut(base)
	if !ok {
		return nil
	}
	dest := db.Spec.Backup.Destination.S3
	object, err := s3location.Object(ctx, c.kubeClient, db.Namespace, &examplev1.S3Location{
		Endpoint: dest.Endpoint, Region: dest.Region, Bucket: dest.Bucket, Key: prefix,
		CredentialsSecret: dest.CredentialsSecret, CABundle: dest.CABundle,
	})
	if err != nil {
		return nil // the condition says it; the next prune tries again
	}
	deleted, err := c.pruner.PruneArchive(ctx, *object, cut)
	if err != nil {
		klog.FromContext(ctx).Info("pruning the archive", "err", err)
		return nil
	}
	c.archivePrunes.done(db.UID, now)
	if deleted > 0 {
		c.recorder.Eventf(db, corev1.EventTypeNormal, "ArchivePruned",
			"deleted %d archived log files older than MyDatabaseBackup %q, the base of the %s recovery window", deleted, base.Name, window)
	}
	return nil
}

// paceTimes remembers when something was last done for each database, to
// do it at most once an interval.
type paceTimes struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
}

func (p *paceTimes) due(uid types.UID, now time.Time, every time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[uid]
	return !ok || now.Sub(last) >= every
}

func (p *paceTimes) done(uid types.UID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[types.UID]time.Time{}
	}
	p.last[uid] = now
}

// S3ArchivePruner prunes archives in their S3 buckets.
type S3ArchivePruner struct{}

// PruneArchive implements ArchivePruner.
func (S3ArchivePruner) PruneArchive(ctx context.Context, archive api.S3Object, cut pitrwindow.Cut) (int, error) {
	store, err := objectstore.New(s3location.StoreConfig(&archive))
	if err != nil {
		return 0, err
	}
	deleted := 0
	if cut.Segment > 0 {
		objects, err := store.List(ctx, archive.Key+"/wal/")
		if err != nil {
			return 0, err
		}
		for _, o := range objects {
			name := path.Base(o.Key)
			// Segments, and the .partial and .backup files named after one.
			_, seg, ok := api.WALSegment(name[:min(len(name), 24)])
			if !ok || seg >= cut.Segment {
				continue
			}
			if err := store.Delete(ctx, o.Key); err != nil {
				return deleted, err
			}
			deleted++
		}
	}
	if cut.GTID == "" {
		return deleted, nil
	}
	manifests, err := instance.ListBinlogManifests(ctx, store, archive.Key)
	if err != nil {
		return deleted, err
	}
	summaries := make(map[string]binlog.Summary, len(manifests))
	for key, m := range manifests {
		summaries[key] = m.Summary
	}
	for _, key := range pitrwindow.PrunableBinlogs(summaries, cut) {
		// The manifest first: a restore never chooses a file it lacks.
		if err := store.Delete(ctx, key+".json"); err != nil {
			return deleted, err
		}
		if err := store.Delete(ctx, key); err != nil {
			return deleted, err
		}
		deleted++
	}
	return deleted, nil
}

// archiveState is the ContinuousArchiving condition and the
// recoverability window, from the primary's report and what the status
// said before (a new primary's manager knows only what it archived
// itself).
func (c *Controller) archiveState(db *examplev1.MyDatabase, f *findings) (*metav1.Condition, *examplev1.Recoverability) {
	r := &examplev1.Recoverability{}
	if old := db.Status.Recoverability; old != nil {
		r = old.DeepCopy()
	}
	var report *api.Status
	for i, in := range f.instances {
		if in.Name == f.primary {
			report = f.reports[i]
		}
	}
	var cond *metav1.Condition
	switch {
	case report == nil:
		cond = archivingCondition(metav1.ConditionUnknown, ReasonArchiveStarting, "the primary's instance manager does not answer")
	case report.Archive == nil:
		cond = archivingCondition(metav1.ConditionFalse, ReasonArchiveNotConfigured, fmt.Sprintf("the primary %s runs without %s: its pod is not updated yet", report.Name, walArchiveFlag))
	case !report.Archive.Configured:
		cond = archivingCondition(metav1.ConditionFalse, ReasonArchiveNotConfigured, fmt.Sprintf("the primary %s does not know where its archive is yet", report.Name))
	default:
		a := report.Archive
		if a.LastArchivedTime != nil && a.Archived > 0 {
			r.LastArchivedWAL, r.LastArchivedTime = a.LastArchived, timeOf(a.LastArchivedTime)
			if r.ArchivingSince == nil {
				now := metav1.NewTime(c.clock.Now())
				r.ArchivingSince = &now
			}
		}
		if t := a.LastRecoverableTime; t != nil && (r.LastRecoverableTime == nil || t.After(r.LastRecoverableTime.Time)) {
			r.LastRecoverableTime = timeOf(t)
		}
		r.PendingWALFiles = int32(min(a.Pending, 1<<30))
		failing := a.LastFailureTime != nil && (a.LastArchivedTime == nil || a.LastFailureTime.After(*a.LastArchivedTime))
		bound := archiveLagBound(db)
		switch {
		case failing:
			cond = archivingCondition(metav1.ConditionFalse, ReasonArchiveFailing,
				fmt.Sprintf("%s cannot archive its log (%d files wait): %s", report.Name, a.Pending, a.LastFailure))
		case a.Archived == 0:
			cond = archivingCondition(metav1.ConditionFalse, ReasonArchiveStarting, fmt.Sprintf("%s has archived no file yet", report.Name))
		case a.LastArchivedTime != nil && c.clock.Since(*a.LastArchivedTime) > bound:
			// A heartbeat closes a file every archiveTimeout: none
			// archived for twice that, and a minute, means the archiver is
			// stuck (an upload that hangs) or far behind.
			cond = archivingCondition(metav1.ConditionFalse, ReasonArchiveLagging,
				fmt.Sprintf("%s archived nothing for %s (bound %s; %d files wait); its last file %s", report.Name,
					c.clock.Since(*a.LastArchivedTime).Round(time.Second), bound, a.Pending, a.LastArchived))
		default:
			msg := fmt.Sprintf("%s archived %s at %s", report.Name, a.LastArchived, a.LastArchivedTime.UTC().Format(time.RFC3339))
			if a.Pending > 0 {
				msg += fmt.Sprintf("; %d files wait", a.Pending)
			}
			cond = archivingCondition(metav1.ConditionTrue, ReasonArchiving, msg)
		}
	}
	r.FirstRecoverableTime = c.firstRecoverableTime(db, r.ArchivingSince)
	if *r == (examplev1.Recoverability{}) {
		r = nil
	}
	return cond, r
}

// firstRecoverableTime is when the oldest succeeded backup of db that
// started once archiving ran ended: the earliest point a replay from a
// base backup reaches.
func (c *Controller) firstRecoverableTime(db *examplev1.MyDatabase, since *metav1.Time) *metav1.Time {
	if since == nil {
		return nil
	}
	backups, err := c.backupLister.MyDatabaseBackups(db.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var first *metav1.Time
	for _, b := range backups {
		s := b.Status
		if b.Spec.DatabaseName != db.Name || s.DatabaseUID != db.UID || s.Phase != examplev1.BackupPhaseSucceeded ||
			s.StartTime == nil || s.CompletionTime == nil || s.StartTime.Before(since) || s.Location == nil || s.Location.S3 == nil {
			continue
		}
		if first == nil || s.CompletionTime.Before(first) {
			first = s.CompletionTime.DeepCopy()
		}
	}
	return first
}

func timeOf(t *time.Time) *metav1.Time {
	m := metav1.NewTime(t.UTC())
	return &m
}

func archivingCondition(status metav1.ConditionStatus, reason, message string) *metav1.Condition {
	return &metav1.Condition{Type: examplev1.ConditionContinuousArchiving, Status: status, Reason: reason, Message: message}
}

// archiveEvent warns, once per failure, that the archive stopped.
func (c *Controller) archiveEvent(db *examplev1.MyDatabase, cond *metav1.Condition) {
	if cond == nil || cond.Reason != ReasonArchiveFailing && cond.Reason != ReasonArchiveLagging {
		return
	}
	if old := meta.FindStatusCondition(db.Status.Conditions, examplev1.ConditionContinuousArchiving); old != nil && old.Reason == cond.Reason {
		return
	}
	c.recorder.Event(db, corev1.EventTypeWarning, cond.Reason, cond.Message)
}
