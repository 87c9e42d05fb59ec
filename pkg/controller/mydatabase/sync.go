package mydatabase

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/mydb-dev/mydb/pkg/databaseca"
	"github.com/mydb-dev/mydb/pkg/names"
	"github.com/mydb-dev/mydb/pkg/scope"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/engine"
	"github.com/mydb-dev/mydb/pkg/failover"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/rollout"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// findings are what a reconcile saw that the status must report.
type findings struct {
	// conflicts name children that exist but belong to someone else.
	conflicts []string
	// storageProblems say why volumes cannot grow to spec.storageSize.
	storageProblems []string
	// restoreWait says why the database waits for its restore source.
	restoreWait string
	// credentialsMissing says the Secret is gone while the data is not.
	credentialsMissing string
	// blockages keep the database's pods from running.
	blockages []blockage
	// primary is the instance chosen to serve writes, and instances what
	// each instance manager reported.
	primary   string
	instances []examplev1.InstanceStatus
	// reports are what each instance manager answered (nil: nothing).
	reports []*api.Status
	// primaryChange is the PrimaryChange condition of a switchover under way.
	primaryChange *metav1.Condition
	// restored is the Restored condition of a database with spec.restoreFrom.
	restored *metav1.Condition
	// archiving is the ContinuousArchiving condition and recoverability the
	// window, of a database with point-in-time recovery.
	archiving      *metav1.Condition
	recoverability *examplev1.Recoverability
	// hibernated is the Hibernated condition (nil: none); podsLeft counts
	// the database's pods, whatever their state.
	hibernated *metav1.Condition
	podsLeft   int
	// pods are the database's instance pods in ordinal order, which
	// instances and reports follow.
	pods []*corev1.Pod
	// rollout is the step of a rolling update taken or waited for (nil:
	// none was considered).
	rollout *rollout.Step
	// certificateAuthority is the database's root and its rotation (nil:
	// not read); caRotating tells that a rotation is under way.
	certificateAuthority *examplev1.CertificateAuthorityStatus
	caRotating           bool
	// serverCertificateProblem says why spec.tls.serverCertificateSecret
	// is not served.
	serverCertificateProblem string
	// caSecret is the database's CA Secret, as reconcileSecret found or
	// made it (nil: none); caState is what it says and issuer the
	// fingerprint of the issuer the certificates Secret holds, as
	// reconcileCertificates wrote them (nil, "": not written this sync).
	caSecret *corev1.Secret
	caState  *databaseca.State
	issuer   string
	// objects are spec.databases and spec.roles as the primary is to have
	// them (nil: the spec has none), and objectsReport the primary's
	// report of them (nil: none).
	objects       *desiredObjects
	objectsReport *api.ObjectsReport
}

// sync makes the children of one MyDatabase match its spec and reports what
// it sees. It is level-driven: it reads the current state from the caches
// every time, writes only differences, and never changes cached objects.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "mydatabase", key.String())
	ctx = klog.NewContext(ctx, logger)

	db, err := c.dbLister.MyDatabases(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// Deleted: the garbage collector removes the children it owned.
		series.observeInstances(key, nil, nil)
		c.positions.forget(key)
		c.health.polled(key, nil, nil)
		c.rolloutSlots.Release(key.String())
		c.replaced.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if !c.config.Namespaces.Serves(db.Namespace) {
		// mydb may not read the Secrets there: acting would mean new
		// credentials for a database that has some.
		c.recorder.Event(db, corev1.EventTypeWarning, ReasonNamespaceNotServed, scope.NotServed(db.Namespace).Error()+": mydb leaves this database as it is")
		return nil
	}
	if db.DeletionTimestamp != nil {
		if err := c.cover(ctx, db); err != nil {
			return err
		}
		return c.finalize(ctx, db)
	}
	eng, ok := engine.Lookup(string(db.Spec.Engine))
	if !ok {
		// Validation admits no such object; nothing can be built for it.
		return nil
	}
	if db.Annotations[names.PausedAnnotation] == "true" {
		return c.updateStatus(ctx, db, eng, nil, findings{}, true)
	}

	if db.Spec.DeletionPolicy == examplev1.DeletionPolicyDelete && !slices.Contains(db.Finalizers, examplev1.DeleteDataFinalizer) {
		// Made before the server set the finalizer: without it, deleting
		// the database would leave its data behind.
		return c.setFinalizers(ctx, db, append(slices.Clone(db.Finalizers), examplev1.DeleteDataFinalizer))
	}

	if db.Status.ObservedGeneration != db.Generation {
		if err := c.cover(ctx, db); err != nil {
			return err
		}
	}
	var f findings
	if err := c.reconcileSecret(ctx, db, &f); err != nil && !errors.Is(err, errSecretConflict) {
		return err
	}
	if err := c.reconcileCertificates(ctx, db, &f); err != nil {
		return err
	}
	if err := c.reconcileInstanceIdentity(ctx, db, &f); err != nil {
		return err
	}
	for _, svc := range newServices(db, eng) {
		cached, err := c.svcLister.Services(db.Namespace).Get(svc.Name)
		if _, err := apply(ctx, c, db, svc, cached, err, c.kubeClient.CoreV1().Services(db.Namespace), &f); err != nil {
			return err
		}
	}
	sts, err := c.reconcileStatefulSet(ctx, db, eng, &f)
	if err != nil {
		return err
	}
	if err := c.reconcilePodDisruptionBudget(ctx, db, &f); err != nil {
		return err
	}
	for _, policy := range newNetworkPolicies(db, eng, c.config.ServerNamespace) {
		cached, err := c.netpolLister.NetworkPolicies(db.Namespace).Get(policy.Name)
		if _, err := apply(ctx, c, db, policy, cached, err, c.kubeClient.NetworkingV1().NetworkPolicies(db.Namespace), &f); err != nil {
			return err
		}
	}
	if err := c.reconcileVolumes(ctx, db, sts, &f); err != nil {
		return err
	}
	if err := c.reconcileInstances(ctx, db, sts, &f); err != nil {
		return err
	}
	if err := c.rotateCertificateAuthority(ctx, db, &f); err != nil {
		return err
	}
	if err := c.reconcileRestore(ctx, db, &f); err != nil {
		return err
	}
	c.restoreEvent(db, f.restored)
	if err := c.reconcileArchive(ctx, db, &f); err != nil {
		return err
	}
	c.archiveEvent(db, f.archiving)
	c.reconcileObjects(ctx, db, &f)
	c.objectsEvent(db, f)
	if f.blockages, err = c.blockages(ctx, db, sts); err != nil {
		return err
	}
	if b, ok := c.primaryBlockage(db, f); ok {
		f.blockages = append(f.blockages, b)
	}
	// Read the instance managers again: soon, unless each streams its
	// health (which says any change as it happens, and puts the database
	// on the queue), then only to resync.
	again := c.config.PollInterval
	if c.health.settled(key, f.pods) {
		again = max(again, c.config.ResyncInterval)
	}
	primary := instanceNamed(f.instances, f.primary)
	hold := false
	f.hibernated, hold = hibernation(db, f.podsLeft, primary != nil && primary.Ready)
	c.hibernationEvent(db, f.hibernated)
	var decision failover.Decision
	// An explicit switchover goes on (an operator may move the role off a
	// primary that does not come back); only automatic failover waits.
	switchover := db.Status.TargetPrimary != "" && db.Status.TargetPrimary != db.Status.CurrentPrimary
	if !hold || switchover {
		decision = c.decidePrimary(db, f.instances, f.reports)
	}
	if soon := decision.Requeue; soon > 0 && soon < again {
		again = soon
	}
	broken := nothingServes(db, &f, decision, c.clock.Now())
	busy := rolloutBusy(db, hold, broken, decision, c.clock.Now())
	backupFirst := false
	if busy == "" && lineChange(db, f.pods) {
		var err error
		if busy, err = c.backupBeforeUpgrade(ctx, db, &f); err != nil {
			return err
		}
		// No event of the backup's puts the database on the queue.
		backupFirst = busy != ""
	}
	step := c.boundRollouts(db, rollout.Next(c.rolloutInput(db, sts, &f, busy, broken)))
	f.rollout = &step
	if f.caRotating {
		again = min(again, caRotationPoll)
	}
	if step.Delete != "" || (step.Waiting != "" && busy == "") || backupFirst {
		// A replaced pod is back, or a replica streams again, well before
		// the next poll.
		again = min(again, rolloutPoll)
	}
	c.queue.AddAfter(key, again)
	change := decision.Change
	if change == nil && step.SwitchoverTo != "" {
		change = rolloutSwitchover(db, step.SwitchoverTo, step, metav1.NewTime(c.clock.Now()))
	}
	switch {
	case change != nil && change.Event != nil:
		// A move is written first, on its own, and acted on from the next
		// sync, which sees it in the cache.
		status := computeStatus(db, eng, sts, f, false, metav1.NewTime(c.clock.Now()))
		return c.writePrimaryChange(ctx, db, status, change)
	case change != nil:
		f.primaryChange = &change.Condition
	}
	if step.Delete != "" {
		if err := c.replacePod(ctx, db, &f, step.Delete, step); err != nil {
			return err
		}
	}
	return c.updateStatus(ctx, db, eng, sts, f, false)
}

// owned tells whether db controls child; when something else does, it
// records the conflict and warns, and the child is left alone.
func (c *Controller) owned(db *examplev1.MyDatabase, child metav1.Object, kind string, f *findings) bool {
	if metav1.IsControlledBy(child, db) {
		return true
	}
	msg := fmt.Sprintf("%s %q already exists and is not managed by MyDatabase %q", kind, child.GetName(), db.Name)
	f.conflicts = append(f.conflicts, msg)
	c.recorder.Event(db, corev1.EventTypeWarning, ReasonResourceExists, msg)
	return false
}

// reconcileSecret makes the database's Secrets of credentials, each once:
// the CA (controller only; a rotation of the CA writes it), the instance
// Secret (every password, mounted by the database's pods alone) and the
// credentials Secret applications mount (the application user and the CA
// bundle). The two with passwords are immutable, so a password never
// changes under a running database, and none is made anew for a database
// that has data: its passwords are the ones the data accepts, its
// instances' issuer is of its CA. reconcileCertificates keeps the rest.
func (c *Controller) reconcileSecret(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	caSecret, err := c.existingSecret(ctx, db, names.CASecret(db.Name), f)
	if err != nil {
		return err
	}
	instance, err := c.existingSecret(ctx, db, names.InstanceSecret(db.Name), f)
	if err != nil {
		return err
	}
	app, err := c.existingSecret(ctx, db, names.Secret(db.Name), f)
	if err != nil {
		return err
	}
	// Made before the two were split, the credentials Secret held every
	// password: the data accepts those.
	legacy := app != nil && len(app.Data[engine.SecretKeySuperuserPassword]) > 0 && len(app.Data[engine.SecretKeyReplicationPassword]) > 0
	if instance == nil && !legacy {
		claims, err := c.pvcLister.PersistentVolumeClaims(db.Namespace).List(labels.SelectorFromSet(SelectorLabels(db)))
		if err != nil {
			return err
		}
		if len(claims) > 0 {
			// The data on the claims accepts only the passwords it was made
			// with: new random ones would lock everyone out for good.
			msg := fmt.Sprintf("Secret %q with the database's credentials is gone while %d of its volumes hold data; "+
				"mydb will not make new passwords the data does not accept: restore the Secret (docs/operations.md)", names.InstanceSecret(db.Name), len(claims))
			f.credentialsMissing = msg
			c.recorder.Event(db, corev1.EventTypeWarning, ReasonCredentialsMissing, msg)
			return nil
		}
	}
	if caSecret == nil {
		// An immutable CA Secret being made again, mutable
		// (migrateCASecret), is its copy's.
		if copied, err := c.existingSecret(ctx, db, names.CASecretCopy(db.Name), f); err != nil {
			return err
		} else if copied != nil {
			if caSecret, err = c.createSecret(ctx, db, names.CASecret(db.Name), copied.Data, false, f); err != nil {
				return err
			}
		}
	}
	if caSecret != nil && (caSecret.Immutable == nil || !*caSecret.Immutable) {
		if copied, err := c.secretLister.Secrets(db.Namespace).Get(names.CASecretCopy(db.Name)); err == nil && ownsData(db, copied) {
			err := c.kubeClient.CoreV1().Secrets(db.Namespace).Delete(ctx, copied.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &copied.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	if caSecret == nil {
		if instance != nil {
			// A new CA would not verify the instances, whose issuer is of
			// the lost one.
			msg := fmt.Sprintf("Secret %q with the database's CA is gone while its instances hold an issuer of it (Secret %q); "+
				"mydb cannot authenticate them with a new one: restore the Secret (docs/security.md)", names.CASecret(db.Name), instance.Name)
			f.credentialsMissing = msg
			c.recorder.Event(db, corev1.EventTypeWarning, ReasonCredentialsMissing, msg)
			return nil
		}
		data, err := databaseca.NewCAData(db.Namespace, db.Name, c.clock.Now())
		if err != nil {
			return err
		}
		// Mutable: a rotation writes it.
		if caSecret, err = c.createSecret(ctx, db, names.CASecret(db.Name), data, false, f); err != nil {
			return err
		}
	}
	state, err := databaseca.ParseState(caSecret)
	if err != nil {
		return err
	}
	// The caches may not hold a CA Secret just made: the rest of the sync
	// reads it from here.
	f.caSecret = caSecret
	if instance == nil {
		// The issuer is the certificates Secret's (reconcileCertificates).
		data := map[string][]byte{}
		passwords := []string{engine.SecretKeyPassword, engine.SecretKeySuperuserPassword, engine.SecretKeyReplicationPassword}
		if legacy {
			for _, key := range append(passwords, engine.SecretKeyUsername, engine.SecretKeyDatabase) {
				data[key] = app.Data[key]
			}
		} else {
			data[engine.SecretKeyUsername], data[engine.SecretKeyDatabase] = []byte(engine.ApplicationUser), []byte(engine.ApplicationDatabase)
			for _, key := range passwords {
				if data[key], err = randomPassword(); err != nil {
					return err
				}
			}
		}
		if instance, err = c.createSecret(ctx, db, names.InstanceSecret(db.Name), data, true, f); err != nil {
			return err
		}
	}
	if app != nil {
		return nil
	}
	data := map[string][]byte{engine.SecretKeyCA: state.Bundle()}
	for _, key := range []string{engine.SecretKeyUsername, engine.SecretKeyPassword, engine.SecretKeyDatabase} {
		data[key] = instance.Data[key]
	}
	_, err = c.createSecret(ctx, db, names.Secret(db.Name), data, true, f)
	return err
}

// existingSecret is db's Secret name, from the cache or, when the cache
// has not seen it, the API; nil when there is none, or when it is not db's
// (a conflict, reported).
func (c *Controller) existingSecret(ctx context.Context, db *examplev1.MyDatabase, name string, f *findings) (*corev1.Secret, error) {
	existing, err := c.secretLister.Secrets(db.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !c.adoptSecret(db, existing, f) {
		return nil, errSecretConflict
	}
	return existing, nil
}

// errSecretConflict stops the reconciliation of the Secrets at one that
// is someone else's (recorded as a conflict).
var errSecretConflict = errors.New("a Secret of the database's is someone else's")

// createSecret creates db's Secret name with data, immutable or not; one that
// exists already (not in the cache, which holds only Secrets labelled as
// mydb's) is read and adopted instead.
func (c *Controller) createSecret(ctx context.Context, db *examplev1.MyDatabase, name string, data map[string][]byte, immutable bool, f *findings) (*corev1.Secret, error) {
	secret := &corev1.Secret{
		ObjectMeta: dataChildMeta(db, name),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(immutable),
		Data:       data,
	}
	created, err := c.kubeClient.CoreV1().Secrets(db.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: FieldManager})
	if apierrors.IsAlreadyExists(err) {
		existing, err := c.kubeClient.CoreV1().Secrets(db.Namespace).Get(ctx, secret.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if !c.adoptSecret(db, existing, f) {
			return nil, errSecretConflict
		}
		return existing, nil
	}
	if err != nil {
		return nil, err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonCreated, "Created Secret %q", secret.Name)
	return created, nil
}

// ownsData tells whether a child that carries no owner reference (the
// credentials, a claim) is db's: labelled as mydb's for a database of that
// name, and controlled by nothing but a MyDatabase of that name. The UID
// is not compared: a database recreated after its etcd was lost finds its
// data again.
func ownsData(db *examplev1.MyDatabase, child metav1.Object) bool {
	l := child.GetLabels()
	if l[names.LabelManagedBy] != names.ManagedBy || l[names.LabelInstance] != db.Name {
		return false
	}
	ref := metav1.GetControllerOf(child)
	return ref == nil || isMyDatabaseRef(*ref, db.Name)
}

func isMyDatabaseRef(ref metav1.OwnerReference, name string) bool {
	return ref.Kind == "MyDatabase" && ref.APIVersion == examplev1.SchemeGroupVersion.String() && ref.Name == name
}

// adoptSecret keeps db's credentials. An owner reference to a MyDatabase,
// which older versions of mydb set, is reported, not removed (mydb may not
// update Secrets): the garbage collector would delete the Secret whenever
// the database reads as absent, or when it is made again with a new UID.
// Someone else's Secret is a conflict.
func (c *Controller) adoptSecret(db *examplev1.MyDatabase, secret *corev1.Secret, f *findings) bool {
	if !ownsData(db, secret) {
		c.owned(db, secret, "Secret", f)
		return false
	}
	refs := slices.DeleteFunc(slices.Clone(secret.OwnerReferences), func(ref metav1.OwnerReference) bool { return isMyDatabaseRef(ref, db.Name) })
	if len(refs) == len(secret.OwnerReferences) {
		return true
	}
	fix := fmt.Sprintf("kubectl patch secret %s -n %s --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/ownerReferences\"}]'", secret.Name, secret.Namespace)
	if len(refs) > 0 {
		fix = fmt.Sprintf("kubectl edit secret %s -n %s, and remove the reference to MyDatabase %q", secret.Name, secret.Namespace, db.Name)
	}
	c.recorder.Eventf(db, corev1.EventTypeWarning, ReasonCredentialsOwned,
		"Secret %q names the MyDatabase as its owner (an older mydb set it): garbage collection would delete the credentials with a lost or remade database; remove the reference: %s",
		secret.Name, fix)
	return true
}

// finalize deletes, for a database deleted under deletionPolicy Delete,
// what the garbage collector does not: its claims and its credentials.
// The StatefulSet goes first, so the claims are not held by running pods;
// a final backup, which reads the data, must have finished before.
func (c *Controller) finalize(ctx context.Context, db *examplev1.MyDatabase) error {
	if !slices.Contains(db.Finalizers, examplev1.DeleteDataFinalizer) ||
		slices.Contains(db.Finalizers, examplev1.FinalBackupFinalizer) {
		// Nothing to delete, or not yet: the final backup's finalizer
		// going is an update that requeues the database.
		return nil
	}
	logger := klog.FromContext(ctx)
	preconditions := func(uid types.UID) metav1.DeleteOptions {
		return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
	}
	sts, err := c.stsLister.StatefulSets(db.Namespace).Get(names.StatefulSet(db.Name))
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if sts != nil && metav1.IsControlledBy(sts, db) {
		err := c.kubeClient.AppsV1().StatefulSets(db.Namespace).Delete(ctx, sts.Name, preconditions(sts.UID))
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	claims, err := c.pvcLister.PersistentVolumeClaims(db.Namespace).List(labels.SelectorFromSet(SelectorLabels(db)))
	if err != nil {
		return err
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	deleted := 0
	for _, claim := range claims {
		if !ownsData(db, claim) {
			continue
		}
		err := c.kubeClient.CoreV1().PersistentVolumeClaims(db.Namespace).Delete(ctx, claim.Name, preconditions(claim.UID))
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		deleted++
	}
	for _, name := range []string{names.Secret(db.Name), names.InstanceSecret(db.Name), names.CertificatesSecret(db.Name),
		names.CABundleSecret(db.Name), names.CASecret(db.Name), names.CASecretCopy(db.Name)} {
		secret, err := c.secretLister.Secrets(db.Namespace).Get(name)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if secret != nil && ownsData(db, secret) {
			err := c.kubeClient.CoreV1().Secrets(db.Namespace).Delete(ctx, secret.Name, preconditions(secret.UID))
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	c.authority.Forget(db.Namespace, db.Name)
	logger.V(2).Info("Deleted the database's data (deletionPolicy Delete)", "claims", deleted)
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonDeleted,
		"Deleted %d PersistentVolumeClaims and the credentials (deletionPolicy Delete)", deleted)
	return c.setFinalizers(ctx, db, slices.DeleteFunc(slices.Clone(db.Finalizers), func(f string) bool { return f == examplev1.DeleteDataFinalizer }))
}

// setFinalizers writes db's finalizers through the main resource, as a
// patch of them alone conditioned on db's resourceVersion: the cached db
// is trimmed (manager.TrimForCache), and an update from it would drop the
// labels and annotations that are not mydb's.
func (c *Controller) setFinalizers(ctx context.Context, db *examplev1.MyDatabase, finalizers []string) error {
	if finalizers == nil {
		finalizers = []string{}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": finalizers, "resourceVersion": db.ResourceVersion}})
	if err != nil {
		return err
	}
	_, err = c.mydbClient.ExampleV1().MyDatabases(db.Namespace).Patch(ctx, db.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (c *Controller) reconcileStatefulSet(ctx context.Context, db *examplev1.MyDatabase, eng engine.Spec, f *findings) (*appsv1.StatefulSet, error) {
	existing, cacheErr := c.stsLister.StatefulSets(db.Namespace).Get(names.StatefulSet(db.Name))
	if cacheErr != nil && !apierrors.IsNotFound(cacheErr) {
		return nil, cacheErr
	}
	if existing != nil && !c.owned(db, existing, "StatefulSet", f) {
		return nil, nil
	}
	wait, err := c.restoreWaitOf(db, existing)
	if err != nil {
		return nil, err
	}
	if wait != "" {
		// Without its backup the database would start empty: it waits.
		f.restoreWait = wait
		return existing, nil
	}
	desired := NewStatefulSet(db, eng, c.config.EngineImages, c.config.InstanceImage, db.Spec.RestoreFrom != nil)
	if existing != nil {
		// The claim templates of a StatefulSet are immutable: volumes grow
		// through their claims (reconcileVolumes) instead. The pod
		// management policy is immutable too.
		desired.Spec.VolumeClaimTemplates = existing.Spec.VolumeClaimTemplates
		desired.Spec.PodManagementPolicy = existing.Spec.PodManagementPolicy
		if existing.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType && metav1.IsControlledBy(existing, db) {
			// Made by an earlier mydb with the StatefulSet's own rolling
			// update: changed to OnDelete on its own, before any new
			// template, which would otherwise restart the primary in
			// ordinal order.
			// (Apply cannot unset the rollingUpdate the API defaulted.)
			patch := []byte(`{"spec":{"updateStrategy":{"type":"OnDelete","rollingUpdate":null}}}`)
			if existing, err = c.kubeClient.AppsV1().StatefulSets(db.Namespace).Patch(ctx, existing.Name, types.MergePatchType, patch,
				metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
				return nil, err
			}
		}
	}
	return apply(ctx, c, db, desired, existing, cacheErr, c.kubeClient.AppsV1().StatefulSets(db.Namespace), f)
}

// reconcileInstanceIdentity makes the ServiceAccount the instance managers
// run as, and lets it read its database.
func (c *Controller) reconcileInstanceIdentity(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	sa, role, binding := newInstanceIdentity(db)
	cachedSA, err := c.saLister.ServiceAccounts(db.Namespace).Get(sa.Name)
	if _, err := apply(ctx, c, db, sa, cachedSA, err, c.kubeClient.CoreV1().ServiceAccounts(db.Namespace), f); err != nil {
		return err
	}
	cachedRole, err := c.roleLister.Roles(db.Namespace).Get(role.Name)
	if _, err := apply(ctx, c, db, role, cachedRole, err, c.kubeClient.RbacV1().Roles(db.Namespace), f); err != nil {
		return err
	}
	cachedBinding, err := c.bindLister.RoleBindings(db.Namespace).Get(binding.Name)
	_, err = apply(ctx, c, db, binding, cachedBinding, err, c.kubeClient.RbacV1().RoleBindings(db.Namespace), f)
	return err
}

// reconcilePodDisruptionBudget keeps a budget of one unavailable replica
// while there is more than one; a single replica gets none, since a budget
// would block every node drain.
func (c *Controller) reconcilePodDisruptionBudget(ctx context.Context, db *examplev1.MyDatabase, f *findings) error {
	desired := newPodDisruptionBudget(db)
	existing, err := c.pdbLister.PodDisruptionBudgets(db.Namespace).Get(desired.Name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if desiredReplicas(db) > 1 {
		_, err := apply(ctx, c, db, desired, existing, err, c.kubeClient.PolicyV1().PodDisruptionBudgets(db.Namespace), f)
		return err
	}
	if existing == nil || !c.owned(db, existing, "PodDisruptionBudget", f) {
		return nil
	}
	err = c.kubeClient.PolicyV1().PodDisruptionBudgets(db.Namespace).Delete(ctx, existing.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &existing.UID},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonDeleted, "Deleted PodDisruptionBudget %q: one replica needs none", existing.Name)
	return nil
}

// reconcileVolumes grows every replica's claim to spec.storageSize, when the
// claim's StorageClass allows expansion.
func (c *Controller) reconcileVolumes(ctx context.Context, db *examplev1.MyDatabase, sts *appsv1.StatefulSet, f *findings) error {
	if sts == nil {
		return nil
	}
	claims, err := c.pvcLister.PersistentVolumeClaims(db.Namespace).List(labels.SelectorFromSet(SelectorLabels(db)))
	if err != nil {
		return err
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].Name < claims[j].Name })
	for _, claim := range claims {
		current := claim.Spec.Resources.Requests[corev1.ResourceStorage]
		if current.Cmp(db.Spec.StorageSize) >= 0 {
			continue
		}
		if problem := c.expansionProblem(claim); problem != "" {
			f.storageProblems = append(f.storageProblems, problem)
			continue
		}
		// The claim is the StatefulSet's: mydb owns only its size.
		grow := corev1ac.PersistentVolumeClaim(claim.Name, claim.Namespace).WithSpec(corev1ac.PersistentVolumeClaimSpec().
			WithResources(corev1ac.VolumeResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceStorage: db.Spec.StorageSize})))
		if _, err := c.kubeClient.CoreV1().PersistentVolumeClaims(db.Namespace).Apply(ctx, grow,
			metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return err
		}
		c.recorder.Eventf(db, corev1.EventTypeNormal, ReasonResizingVolume, "Resizing PersistentVolumeClaim %q from %s to %s",
			claim.Name, current.String(), db.Spec.StorageSize.String())
	}
	if len(f.storageProblems) > 0 {
		c.recorder.Event(db, corev1.EventTypeWarning, ReasonExpansionUnsupported, f.storageProblems[0])
	}
	return nil
}

// expansionProblem says why claim cannot grow, or "" when it can.
func (c *Controller) expansionProblem(claim *corev1.PersistentVolumeClaim) string {
	if claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName == "" {
		return fmt.Sprintf("PersistentVolumeClaim %q has no StorageClass, so it cannot be expanded", claim.Name)
	}
	sc, err := c.scLister.Get(*claim.Spec.StorageClassName)
	if err != nil {
		return fmt.Sprintf("StorageClass %q of PersistentVolumeClaim %q: %v", *claim.Spec.StorageClassName, claim.Name, err)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		return fmt.Sprintf("StorageClass %q does not allow volume expansion, so PersistentVolumeClaim %q stays at its size", sc.Name, claim.Name)
	}
	return ""
}

// coverTimeout bounds the wait for the store guard to cover a write.
const coverTimeout = 30 * time.Second

// cover waits until mydb's store guard has recorded a marker written after
// db's last write: a snapshot of mydb's etcd without that write is then
// refused as a rollback, so a restore never silently loses a spec or a
// deletion the cluster was changed to follow (children whose owner is gone,
// a StatefulSet scaled to a spec the store no longer holds, data deleted
// for a database the store still has). sync covers a spec the status does
// not yet say was acted on, and a deletion; the guard otherwise lags by one
// interval, and a burst of writes shares one extra check.
func (c *Controller) cover(ctx context.Context, db *examplev1.MyDatabase) error {
	if c.config.Store == nil {
		return nil
	}
	revision, err := strconv.ParseInt(db.ResourceVersion, 10, 64)
	if err != nil {
		return fmt.Errorf("resourceVersion %q of %s is not a store revision: %w", db.ResourceVersion, db.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, coverTimeout)
	defer cancel()
	if err := c.config.Store.Cover(ctx, revision); err != nil {
		return fmt.Errorf("waiting for the store guard to record the last write of %s: %w", db.Name, err)
	}
	return nil
}
