package backup

import (
	"slices"
	"strings"
	"testing"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/controller/dump"
	"github.com/mydb-dev/mydb/pkg/names"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	core "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// onVolume backs the fixture's database up to volumes of class "fast".
func onVolume(d *examplev1.MyDatabase) {
	d.Spec.Backup.Destination = &examplev1.BackupDestination{Volume: &examplev1.VolumeDestination{StorageClassName: ptr.To("fast")}}
}

// assignedToVolume is a backup given to prod-mysql-2, to its own claim.
func assignedToVolume(b *examplev1.MyDatabaseBackup) {
	assigned(b)
	b.Status.Location = &examplev1.BackupLocation{Volume: &examplev1.VolumeLocation{ClaimName: "prod-mysql-x7k2p-dump"}}
}

func created[T runtime.Object](f *fixture, resource string) []T {
	var out []T
	for _, a := range f.kubeClient.Actions() {
		if c, ok := a.(core.CreateAction); ok && a.GetVerb() == "create" && a.GetResource().Resource == resource {
			out = append(out, c.GetObject().(T))
		}
	}
	return out
}

func TestAVolumeBackupRecordsItsOwnClaim(t *testing.T) {
	f, err := sync(t, nil, backup(), myDatabase(onVolume), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	s := writtenStatus(t, f)
	if s.Location == nil || s.Location.Volume == nil || s.Location.Volume.ClaimName != "prod-mysql-x7k2p-dump" || s.Location.S3 != nil {
		t.Errorf("location %+v, want the backup's own claim", s.Location)
	}
	if got := s.Location.URI(); got != "pvc://prod-mysql-x7k2p-dump" {
		t.Errorf("URI %q", got)
	}
}

func TestAVolumeBackupMakesItsClaimAndADumpServer(t *testing.T) {
	f, err := sync(t, nil, backup(assignedToVolume), myDatabase(onVolume), credentials()...)
	if err != nil {
		t.Fatal(err)
	}
	claims := created[*corev1.PersistentVolumeClaim](f, "persistentvolumeclaims")
	if len(claims) != 1 {
		t.Fatalf("created claims %v, want one", claims)
	}
	claim := claims[0]
	if claim.Name != "prod-mysql-x7k2p-dump" || len(claim.OwnerReferences) != 0 ||
		claim.Labels[names.LabelManagedBy] != names.ManagedBy || claim.Labels[dump.LabelBackupUID] != "uid-prod-mysql-x7k2p" ||
		ptr.Deref(claim.Spec.StorageClassName, "") != "fast" || !claim.Spec.Resources.Requests.Storage().Equal(resource.MustParse("50Gi")) {
		t.Errorf("claim %+v: want <backup>-dump, labelled, unowned, class fast, the database's 50Gi", claim)
	}
	pods := created[*corev1.Pod](f, "pods")
	if len(pods) != 1 {
		t.Fatalf("created pods %v, want one", pods)
	}
	pod := pods[0]
	spec := pod.Spec
	if pod.Name != "prod-mysql-x7k2p-dump" || pod.Labels[names.LabelManagedBy] != names.ManagedBy ||
		pod.Labels[dump.LabelClaim] != claim.Name || pod.Labels[dump.LabelOf] != "prod-mysql" ||
		spec.ServiceAccountName != "prod-mysql-instance" || ptr.Deref(spec.AutomountServiceAccountToken, true) ||
		metav1.GetControllerOf(pod) == nil || metav1.GetControllerOf(pod).UID != "uid-prod-mysql-x7k2p" {
		t.Errorf("pod %+v: want the backup's dump server, labelled, owned by the backup, as the instance ServiceAccount without a token", pod.ObjectMeta)
	}
	var mounted []string
	for _, v := range spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			mounted = append(mounted, "claim "+v.PersistentVolumeClaim.ClaimName)
			if v.PersistentVolumeClaim.ReadOnly {
				t.Error("the backup's pod mounts its claim read-only")
			}
		case v.Secret != nil:
			mounted = append(mounted, "secret "+v.Secret.SecretName)
		default:
			mounted = append(mounted, "other "+v.Name)
		}
	}
	if !slices.Equal(mounted, []string{"claim prod-mysql-x7k2p-dump", "secret prod-mysql-certificates"}) {
		t.Errorf("the pod mounts %v, want only its claim and the database's certificates Secret (no password)", mounted)
	}
	if args := strings.Join(spec.Containers[0].Args, " "); !strings.HasPrefix(args, "dump-server ") || strings.Contains(args, "--read-only") {
		t.Errorf("the pod runs %q", args)
	}
	// The instance is asked only once the dump server answers.
	if len(f.managers.started) != 0 {
		t.Errorf("asked %v before the dump server ran", f.managers.started)
	}
	if s := writtenStatus(t, f); !strings.Contains(s.Message, "waiting for the pod prod-mysql-x7k2p-dump to run") {
		t.Errorf("message %q", s.Message)
	}
}

func TestAVolumeBackupNeverTakesAnothersClaim(t *testing.T) {
	theirs := dump.NewClaim(backup(func(b *examplev1.MyDatabaseBackup) { b.UID = "uid-other" }), myDatabase(), &examplev1.VolumeDestination{})
	f, err := sync(t, nil, backup(assignedToVolume), myDatabase(onVolume), append(credentials(), theirs)...)
	if err != nil {
		t.Fatal(err)
	}
	if s := writtenStatus(t, f); s.Phase != examplev1.BackupPhaseFailed || !strings.Contains(s.Message, "is not this backup's") {
		t.Errorf("status %+v, want Failed: the claim is another's", s)
	}
	if pods := created[*corev1.Pod](f, "pods"); len(pods) != 0 {
		t.Errorf("created %v", pods)
	}
}

func TestAFinishedVolumeBackupReleasesItsClaim(t *testing.T) {
	b := backup(assignedToVolume, func(b *examplev1.MyDatabaseBackup) { b.Status.Phase = examplev1.BackupPhaseSucceeded })
	owner := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "MyDatabaseBackup", Name: b.Name, UID: b.UID, Controller: ptr.To(true)}
	pod := dump.NewServerPod("prod-mysql-x7k2p-dump", "default", "prod-mysql", "prod-mysql-x7k2p-dump", "img", false, owner)
	f, err := sync(t, nil, b, myDatabase(onVolume), append(credentials(), pod)...)
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range f.kubeClient.Actions() {
		if d, ok := a.(core.DeleteAction); ok {
			deleted = append(deleted, a.GetResource().Resource+"/"+d.GetName())
		}
	}
	if !slices.Equal(deleted, []string{"pods/prod-mysql-x7k2p-dump"}) {
		t.Errorf("deleted %v, want the dump server only (the claim stays with its backup)", deleted)
	}
}

func TestDeletingAVolumeBackupDeletesItsClaim(t *testing.T) {
	for _, tc := range []struct {
		name  string
		uid   string
		wants []string
	}{
		{name: "its own claim", uid: "uid-prod-mysql-x7k2p", wants: []string{"persistentvolumeclaims/prod-mysql-x7k2p-dump"}},
		{name: "a claim of the name that is another backup's", uid: "uid-other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backup(assignedToVolume, func(b *examplev1.MyDatabaseBackup) {
				b.Status.Phase = examplev1.BackupPhaseSucceeded
				b.DeletionTimestamp = &metav1.Time{Time: now}
			})
			claim := dump.NewClaim(backup(func(b *examplev1.MyDatabaseBackup) { b.UID = k8stypes.UID(tc.uid) }), myDatabase(), &examplev1.VolumeDestination{})
			f, err := sync(t, nil, b, myDatabase(onVolume), append(credentials(), claim)...)
			if err != nil {
				t.Fatal(err)
			}
			var deleted []string
			for _, a := range f.kubeClient.Actions() {
				if d, ok := a.(core.DeleteAction); ok {
					deleted = append(deleted, a.GetResource().Resource+"/"+d.GetName())
				}
			}
			if !slices.Equal(deleted, tc.wants) {
				t.Errorf("deleted %v, want %v", deleted, tc.wants)
			}
			var finalizerGone bool
			for _, a := range f.mydbClient.Actions() {
				if u, ok := a.(core.UpdateAction); ok && a.GetSubresource() == "" {
					finalizerGone = !slices.Contains(u.GetObject().(*examplev1.MyDatabaseBackup).Finalizers, examplev1.BackupFinalizer)
				}
			}
			if !finalizerGone {
				t.Error("the backup's finalizer stays")
			}
		})
	}
}
