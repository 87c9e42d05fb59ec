package mydatabase

import (
	"fmt"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// restoreVolume mounts a backup's dump into the engine's init directory.
const restoreVolume = "restore"

// restoreSource is the dump a database starts from: a file on a claim.
type restoreSource struct {
	claim, file string
}

// restoreSourceOf returns the dump spec.restoreFrom names, or why the
// database must wait for it. A StatefulSet that already has its restore
// volume keeps it, even once the backup is gone: its pods loaded the dump.
func (c *Controller) restoreSourceOf(db *examplev1.MyDatabase, existing *appsv1.StatefulSet) (*restoreSource, string, error) {
	if db.Spec.RestoreFrom == nil {
		return nil, "", nil
	}
	if existing != nil {
		for _, v := range existing.Spec.Template.Spec.Volumes {
			if v.Name == restoreVolume && v.PersistentVolumeClaim != nil {
				for _, m := range existing.Spec.Template.Spec.Containers[0].VolumeMounts {
					if m.Name == restoreVolume {
						return &restoreSource{claim: v.PersistentVolumeClaim.ClaimName, file: m.SubPath}, "", nil
					}
				}
			}
		}
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
	if b.Status.Location == nil || b.Status.Location.Volume == nil {
		return nil, fmt.Sprintf("MyDatabaseBackup %q has no location mydb can read", name), nil
	}
	v := b.Status.Location.Volume
	return &restoreSource{claim: v.ClaimName, file: v.Path}, "", nil
}

func phaseOf(b *examplev1.MyDatabaseBackup) examplev1.BackupPhase {
	if b.Status.Phase == "" {
		return examplev1.BackupPhasePending
	}
	return b.Status.Phase
}

// withRestore adds the dump to a pod spec, read-only.
func withRestore(spec *corev1.PodSpec, src *restoreSource) {
	if src == nil {
		return
	}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: restoreVolume, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: src.claim, ReadOnly: true},
	}})
	c := &spec.Containers[0]
	dump := engine.InitDirectory + "/restore.sql"
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: restoreVolume, MountPath: dump, SubPath: src.file, ReadOnly: true})
	// The instance manager does not load dumps yet; told of one, it keeps
	// the new database unready instead of serving it empty.
	c.Args = append(c.Args, "--restore-from="+dump)
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
		if db.Spec.RestoreFrom != nil && db.Spec.RestoreFrom.BackupName == b.Name {
			c.enqueue(db)
		}
	}
}
