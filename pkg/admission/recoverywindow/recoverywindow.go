// Package recoverywindow refuses, at admission, a restore to a point its
// source cannot reach: a new MyDatabase whose spec.restoreFrom.pointInTime
// names a time before its backup ended, or at or after the source
// database's lastRecoverableTime, or a backup whose source does not archive
// its WAL. The answer is a 422 naming the field with the window in the
// message, rather than a database that waits and fails. What the caches do
// not show yet (a backup not seen, a source deleted) is left to the
// controller and the engine, which refuse a target the archive does not
// reach all the same.
package recoverywindow

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	exampleinformers "github.com/mydb-dev/mydb/pkg/generated/informers/externalversions"
	listers "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	"github.com/mydb-dev/mydb/pkg/pitrwindow"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/admission"
)

// PluginName is the admission plugin's name.
const PluginName = "MyDatabaseRecoveryWindow"

// Register registers the plugin.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return NewPlugin(), nil })
}

// Plugin checks a restore's target against its source's window.
type Plugin struct {
	*admission.Handler
	databases listers.MyDatabaseLister
	backups   listers.MyDatabaseBackupLister
	// synced tells whether the backups' cache is complete: an absent
	// backup means something only then.
	synced func() bool
	now    func() time.Time
}

var _ admission.ValidationInterface = &Plugin{}

// NewPlugin returns the plugin; the server's initializer gives it the
// informers (SetMyDatabaseInformers).
func NewPlugin() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create), now: time.Now}
}

// SetMyDatabaseInformers gives the informers on mydb's own API.
func (p *Plugin) SetMyDatabaseInformers(f exampleinformers.SharedInformerFactory) {
	p.databases = f.Example().V1().MyDatabases().Lister()
	backups := f.Example().V1().MyDatabaseBackups()
	p.backups = backups.Lister()
	p.synced = backups.Informer().HasSynced
}

// ValidateInitialization implements admission.InitializationValidator.
func (p *Plugin) ValidateInitialization() error {
	if p.databases == nil || p.backups == nil || p.synced == nil {
		return fmt.Errorf("%s: missing the MyDatabase informers", PluginName)
	}
	return nil
}

// Validate implements admission.ValidationInterface.
func (p *Plugin) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != example.Resource("mydatabases") || a.GetSubresource() != "" {
		return nil
	}
	db, ok := a.GetObject().(*example.MyDatabase)
	if !ok || db.Spec.RestoreFrom == nil || db.Spec.RestoreFrom.PointInTime == nil || db.Spec.RestoreFrom.PointInTime.Time == nil {
		return nil
	}
	target := db.Spec.RestoreFrom.PointInTime.Time.Time
	var msg string
	if name := db.Spec.RestoreFrom.BackupName; name != "" {
		msg = p.refusal(a.GetNamespace(), name, target)
	} else {
		msg = p.pickRefusal(a.GetNamespace(), db.Spec.RestoreFrom.DatabaseName, target)
	}
	if msg == "" {
		return nil
	}
	path := field.NewPath("spec", "restoreFrom", "pointInTime", "time")
	return apierrors.NewInvalid(example.Kind("MyDatabase"), db.Name, field.ErrorList{
		field.Invalid(path, target.UTC().Format(time.RFC3339), msg)})
}

// pickRefusal says why target is out of reach of every backup of
// database: none that the controller would pick (the newest that ended
// before the target) exists, and none can come (it would end after now).
func (p *Plugin) pickRefusal(namespace, database string, target time.Time) string {
	if !p.synced() {
		return ""
	}
	backups, err := p.backups.MyDatabaseBackups(namespace).List(labels.Everything())
	if err != nil {
		return ""
	}
	b := pitrwindow.Pick(backups, database, &examplev1.RecoveryTarget{Time: &metav1.Time{Time: target}}, p.now())
	if b == nil {
		return fmt.Sprintf("no succeeded backup in S3 of MyDatabase %q ended before it: a replay starts from one", database)
	}
	return p.backupRefusal(namespace, b, target)
}

// refusal says why target is out of reach from backup name ("" when it
// may be in reach, or the caches cannot tell).
func (p *Plugin) refusal(namespace, name string, target time.Time) string {
	b, err := p.backups.MyDatabaseBackups(namespace).Get(name)
	if err != nil || b.Status.Phase != examplev1.BackupPhaseSucceeded {
		return "" // the database waits for its backup; the controller checks then
	}
	return p.backupRefusal(namespace, b, target)
}

// backupRefusal says why target is out of reach from backup b.
func (p *Plugin) backupRefusal(namespace string, b *examplev1.MyDatabaseBackup, target time.Time) string {
	name := b.Name
	if l := b.Status.Location; l == nil || l.S3 == nil {
		return fmt.Sprintf("MyDatabaseBackup %q is on a volume: a restore to a point replays an archive kept in S3, next to an S3 backup", name)
	}
	if end := b.Status.CompletionTime; end != nil && !target.After(end.Time) {
		return fmt.Sprintf("must be after MyDatabaseBackup %q ended (%s): name an older backup", name, end.UTC().Format(time.RFC3339))
	}
	src, err := p.databases.MyDatabases(namespace).Get(b.Spec.DatabaseName)
	if err != nil || src.UID != b.Status.DatabaseUID {
		return "" // the source is gone: its archive may still cover the target
	}
	r := src.Status.Recoverability
	if r == nil || r.LastRecoverableTime == nil {
		if src.Spec.Backup == nil || src.Spec.Backup.PointInTimeRecovery == nil {
			return fmt.Sprintf("MyDatabase %q, which MyDatabaseBackup %q is of, does not archive its WAL (spec.backup.pointInTimeRecovery)", src.Name, name)
		}
		return fmt.Sprintf("MyDatabase %q has nothing recoverable in its archive yet (status.recoverability)", src.Name)
	}
	if !target.Before(r.LastRecoverableTime.Time) {
		window := "up to " + r.LastRecoverableTime.UTC().Format(time.RFC3339)
		if r.FirstRecoverableTime != nil {
			window = "from " + r.FirstRecoverableTime.UTC().Format(time.RFC3339) + " " + window
		}
		return fmt.Sprintf("must be before MyDatabase %q's lastRecoverableTime: its archive is recoverable %s (exclusive)", src.Name, window)
	}
	return ""
}
