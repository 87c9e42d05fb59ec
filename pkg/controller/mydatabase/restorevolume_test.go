package mydatabase

import (
	"slices"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// volumeRestoringState is restoringState with nightly on its own claim,
// labelled with the UID uid.
func volumeRestoringState(t *testing.T, primary api.Status, cond *metav1.Condition, uid k8stypes.UID) (*fixture, *fakeRestores) {
	t.Helper()
	f, ops := restoringState(t, primary, cond)
	for _, obj := range f.kubeObjects {
		if b, ok := obj.(*examplev1.MyDatabaseBackup); ok {
			b.Status.Location = &examplev1.BackupLocation{Volume: &examplev1.VolumeLocation{ClaimName: "nightly-dump"}}
			owner := b.DeepCopy()
			owner.UID = uid
			f.kubeObjects = append(f.kubeObjects, dump.NewClaim(owner, f.dbs[0], &examplev1.VolumeDestination{}))
			break
		}
	}
	return f, ops
}

func restoredCond(t *testing.T, f *fixture) *metav1.Condition {
	t.Helper()
	status := updated[*examplev1.MyDatabase](t, f.mydbClient.Actions(), "mydatabases", "status").Status
	return meta.FindStatusCondition(status.Conditions, examplev1.ConditionRestored)
}

func TestAVolumeRestoreServesTheClaimReadOnly(t *testing.T) {
	f, ops := volumeRestoringState(t, api.Status{AwaitingRestore: true}, nil, "uid-nightly")
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	pod := created[*corev1.Pod](t, f.kubeClient.Actions(), "pods")
	ref := metav1.GetControllerOf(pod)
	if pod.Name != "prod-mysql-restore" || ref == nil || ref.UID != f.dbs[0].UID || pod.Labels[dump.LabelClaim] != "nightly-dump" ||
		pod.Labels[dump.LabelOf] != "prod-mysql" || ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		t.Errorf("pod %+v: want prod-mysql-restore, owned by the database, labelled, without a token", pod.ObjectMeta)
	}
	var claim *corev1.PersistentVolumeClaimVolumeSource
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim
		}
		if v.Secret != nil && v.Secret.SecretName != "prod-mysql-certificates" {
			t.Errorf("the restore's pod mounts the Secret %s, want the restoring database's", v.Secret.SecretName)
		}
	}
	if claim == nil || claim.ClaimName != "nightly-dump" || !claim.ReadOnly || !slices.Contains(pod.Spec.Containers[0].Args, "--read-only") ||
		!pod.Spec.Containers[0].VolumeMounts[0].ReadOnly {
		t.Errorf("the restore's pod mounts %+v with %v, want nightly-dump read-only", claim, pod.Spec.Containers[0].Args)
	}
	if len(ops.restores) != 0 {
		t.Errorf("asked %+v before the dump server ran", ops.restores)
	}
	if c := restoredCond(t, f); c == nil || c.Reason != ReasonRestoring || !strings.Contains(c.Message, "waiting for the pod prod-mysql-restore") {
		t.Errorf("Restored = %+v", c)
	}
}

func TestAVolumeRestoreWaitsForTheClaimToBeFree(t *testing.T) {
	f, ops := volumeRestoringState(t, api.Status{AwaitingRestore: true}, nil, "uid-nightly")
	owner := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "MyDatabase", Name: "other", UID: "uid-other", Controller: ptr.To(true)}
	f.kubeObjects = append(f.kubeObjects, dump.NewServerPod("other-restore", "default", "other", "nightly-dump", "img", true, owner))
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	for _, a := range f.kubeClient.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			t.Errorf("created a pod while other-restore mounts the claim")
		}
	}
	if c := restoredCond(t, f); c == nil || c.Reason != ReasonRestoring || !strings.Contains(c.Message, "other-restore to release the claim nightly-dump") {
		t.Errorf("Restored = %+v", c)
	}
	if len(ops.restores) != 0 {
		t.Errorf("asked %+v", ops.restores)
	}
}

func TestAVolumeRestoreNeverReadsAnothersClaim(t *testing.T) {
	f, _ := volumeRestoringState(t, api.Status{AwaitingRestore: true}, nil, "uid-someone-else")
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	if c := restoredCond(t, f); c == nil || c.Reason != ReasonRestoreFailed || !strings.Contains(c.Message, `is not MyDatabaseBackup "nightly"'s`) {
		t.Errorf("Restored = %+v, want RestoreFailed", c)
	}
}

func TestARestoredDatabaseReleasesTheClaim(t *testing.T) {
	done := &metav1.Condition{Type: examplev1.ConditionRestored, Status: metav1.ConditionTrue, Reason: ReasonRestored, Message: "loaded"}
	f, _ := volumeRestoringState(t, api.Status{Ready: true}, done, "uid-nightly")
	db := f.dbs[0]
	owner := *metav1.NewControllerRef(db, examplev1.SchemeGroupVersion.WithKind("MyDatabase"))
	f.kubeObjects = append(f.kubeObjects, dump.NewServerPod("prod-mysql-restore", "default", "prod-mysql", "nightly-dump", "img", true, owner))
	if err := f.sync(); err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range f.kubeClient.Actions() {
		if d, ok := a.(core.DeleteAction); ok {
			deleted = append(deleted, a.GetResource().Resource+"/"+d.GetName())
		}
	}
	if !slices.Equal(deleted, []string{"pods/prod-mysql-restore"}) {
		t.Errorf("deleted %v, want the restore's dump server", deleted)
	}
}
