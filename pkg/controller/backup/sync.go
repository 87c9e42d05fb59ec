package backup

import (
	"context"
	"fmt"
	"time"

	"github.com/mydb-dev/mydb/pkg/names"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const (
	// backupMountPath is where a backup Job mounts the backups volume.
	backupMountPath = "/backups"
	// cacheGrace is how long a backup waits for its database to appear in
	// the cache before it fails for want of one.
	cacheGrace = 30 * time.Second
)

// dumpFile is the dump's file name on the backups volume.
func dumpFile(b *examplev1.MyDatabaseBackup) string { return b.Name + ".sql" }

// location is where a backup's dump is kept.
func location(db *examplev1.MyDatabase, b *examplev1.MyDatabaseBackup) *examplev1.BackupLocation {
	return &examplev1.BackupLocation{Volume: &examplev1.VolumeLocation{ClaimName: names.BackupVolume(db.Name), Path: dumpFile(b)}}
}

// sync moves one backup along: it makes sure its volume and Job exist and
// copies the Job's outcome into the backup's status. A finished backup is
// never touched again.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	backup, err := c.backupLister.MyDatabaseBackups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil // its Job goes with it (owner reference)
	}
	if err != nil {
		return err
	}
	if backup.DeletionTimestamp != nil || finished(backup) {
		return nil
	}
	db, err := c.dbLister.MyDatabases(backup.Namespace).Get(backup.Spec.DatabaseName)
	if apierrors.IsNotFound(err) {
		// A database created just before its backup may not be cached yet.
		if c.clock.Since(backup.CreationTimestamp.Time) < cacheGrace {
			return fmt.Errorf("MyDatabase %q is not in the cache yet", backup.Spec.DatabaseName)
		}
		return c.setStatus(ctx, backup, failed(backup, c.now(), fmt.Sprintf("MyDatabase %q does not exist", backup.Spec.DatabaseName)))
	}
	if err != nil {
		return err
	}
	if err := c.reconcileOwner(ctx, backup, db); err != nil {
		return err
	}
	eng, ok := engine.Lookup(string(db.Spec.Engine))
	if !ok {
		return nil
	}
	if err := c.ensureVolume(ctx, db); err != nil {
		return err
	}
	job, err := c.jobLister.Jobs(backup.Namespace).Get(names.BackupJob(backup.Name))
	if apierrors.IsNotFound(err) {
		job, err = c.kubeClient.BatchV1().Jobs(backup.Namespace).Create(ctx, newJob(backup, db, eng), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		c.recorder.Eventf(backup, corev1.EventTypeNormal, ReasonJobCreated, "Created Job %q", job.Name)
	} else if err != nil {
		return err
	}
	if !metav1.IsControlledBy(job, backup) {
		msg := fmt.Sprintf("Job %q already exists and is not managed by this backup", job.Name)
		c.recorder.Event(backup, corev1.EventTypeWarning, ReasonResourceConflict, msg)
		return c.setStatus(ctx, backup, failed(backup, c.now(), msg))
	}
	status := statusFromJob(backup, db, job)
	switch status.Phase {
	case examplev1.BackupPhaseSucceeded:
		c.recorder.Eventf(backup, corev1.EventTypeNormal, ReasonBackupSucceeded, "Backup of %q stored at %s", db.Name, status.Location.URI())
	case examplev1.BackupPhaseFailed:
		c.recorder.Eventf(backup, corev1.EventTypeWarning, ReasonBackupFailed, "Backup of %q failed: %s", db.Name, status.Message)
	}
	return c.setStatus(ctx, backup, status)
}

func (c *Controller) now() metav1.Time { return metav1.NewTime(c.clock.Now()) }

func finished(b *examplev1.MyDatabaseBackup) bool {
	return b.Status.Phase == examplev1.BackupPhaseSucceeded || b.Status.Phase == examplev1.BackupPhaseFailed
}

func failed(b *examplev1.MyDatabaseBackup, now metav1.Time, msg string) examplev1.MyDatabaseBackupStatus {
	s := *b.Status.DeepCopy()
	s.Phase, s.Message, s.CompletionTime = examplev1.BackupPhaseFailed, msg, &now
	if s.StartTime == nil || s.StartTime.After(now.Time) {
		s.StartTime = &now
	}
	return s
}

// statusFromJob reads a backup's state off its Job.
func statusFromJob(b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, job *batchv1.Job) examplev1.MyDatabaseBackupStatus {
	s := *b.Status.DeepCopy()
	s.StartTime = job.Status.StartTime
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			s.Phase, s.Message = examplev1.BackupPhaseSucceeded, ""
			s.CompletionTime = job.Status.CompletionTime
			if s.CompletionTime == nil {
				s.CompletionTime = &cond.LastTransitionTime
			}
			s.Location = location(db, b)
			return s
		case batchv1.JobFailed:
			s.Phase, s.Message = examplev1.BackupPhaseFailed, fmt.Sprintf("Job %s failed: %s: %s", job.Name, cond.Reason, cond.Message)
			s.CompletionTime = &cond.LastTransitionTime
			return s
		}
	}
	s.Phase, s.Message = examplev1.BackupPhasePending, "waiting for Job "+job.Name+" to start"
	if job.Status.StartTime != nil {
		s.Phase, s.Message = examplev1.BackupPhaseRunning, ""
	}
	return s
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
// deletionPolicy is Delete, so the garbage collector removes backups with
// it; with Retain, backups outlive the database.
func (c *Controller) reconcileOwner(ctx context.Context, b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase) error {
	// A final backup exists to outlive its database.
	want := db.Spec.DeletionPolicy == examplev1.DeletionPolicyDelete && b.Labels[names.FinalBackupLabel] == ""
	var refs []metav1.OwnerReference
	has := false
	for _, ref := range b.OwnerReferences {
		if ref.UID == db.UID {
			has = true
			continue
		}
		refs = append(refs, ref)
	}
	if has == want {
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

// ensureVolume creates the claim that keeps a database's backups, as large
// as one replica's volume. Like the backups, it outlives the database unless
// its deletionPolicy is Delete.
func (c *Controller) ensureVolume(ctx context.Context, db *examplev1.MyDatabase) error {
	if _, err := c.pvcLister.PersistentVolumeClaims(db.Namespace).Get(names.BackupVolume(db.Name)); !apierrors.IsNotFound(err) {
		return err
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: names.BackupVolume(db.Name), Namespace: db.Namespace, Labels: backupLabels(db)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: db.Spec.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: db.Spec.StorageSize.DeepCopy()},
			},
		},
	}
	if db.Spec.DeletionPolicy == examplev1.DeletionPolicyDelete {
		pvc.OwnerReferences = []metav1.OwnerReference{ownerRef(db)}
	}
	_, err := c.kubeClient.CoreV1().PersistentVolumeClaims(db.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonVolumeCreated, "Created PersistentVolumeClaim %q for backups", pvc.Name)
	}
	return err
}

func backupLabels(db *examplev1.MyDatabase) map[string]string {
	return map[string]string{
		names.LabelManagedBy: names.ManagedBy,
		names.LabelInstance:  db.Name,
		names.LabelComponent: names.ComponentBackup,
	}
}

// newJob runs the engine's dump tool against the database's client Service.
func newJob(b *examplev1.MyDatabaseBackup, db *examplev1.MyDatabase, eng engine.Engine) *batchv1.Job {
	host := fmt.Sprintf("%s.%s.svc", names.ClientService(db.Name), db.Namespace)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.BackupJob(b.Name), Namespace: b.Namespace, Labels: backupLabels(db),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(b, examplev1.SchemeGroupVersion.WithKind("MyDatabaseBackup"))},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](2),
			ActiveDeadlineSeconds: ptr.To[int64](3600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: backupLabels(db)},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext:              eng.PodSecurityContext(),
					Containers: []corev1.Container{{
						Name:      "dump",
						Image:     eng.Images[db.Spec.Version],
						Command:   eng.DumpCommand(host, backupMountPath+"/"+dumpFile(b)),
						Env:       eng.DumpEnv(names.Secret(db.Name)),
						Resources: engine.BackupJobResources(),
						VolumeMounts: []corev1.VolumeMount{
							{Name: "backups", MountPath: backupMountPath},
							{Name: "tmp", MountPath: "/tmp"},
						},
						SecurityContext: engine.ContainerSecurityContext(),
					}},
					Volumes: []corev1.Volume{
						{Name: "backups", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: names.BackupVolume(db.Name)}}},
						{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
				},
			},
		},
	}
}
