package recoverywindow

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/apis/example"
	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	listers "github.com/mydb-dev/mydb/pkg/generated/listers/example/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/tools/cache"
)

func TestTargetsOutsideTheWindowAreRefused(t *testing.T) {
	at := func(minutes int) metav1.Time {
		return metav1.NewTime(time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute))
	}
	first, last := at(10), at(60)
	archiving := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns", UID: "shop-uid"},
		Spec:   examplev1.MyDatabaseSpec{Backup: &examplev1.BackupPolicy{PointInTimeRecovery: &examplev1.PointInTimeRecovery{}}},
		Status: examplev1.MyDatabaseStatus{Recoverability: &examplev1.Recoverability{FirstRecoverableTime: &first, LastRecoverableTime: &last}}}
	plain := &examplev1.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns", UID: "plain-uid"}}
	backup := func(name, db, uid string, end metav1.Time, s3 bool) *examplev1.MyDatabaseBackup {
		b := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: db},
			Status: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded, CompletionTime: &end, DatabaseUID: k8stypes.UID(uid),
				Location: &examplev1.BackupLocation{Volume: &examplev1.VolumeLocation{}}}}
		if s3 {
			b.Status.Location = &examplev1.BackupLocation{S3: &examplev1.S3Location{Key: "ns/" + db + "/" + uid + "/" + name}}
		}
		return b
	}
	dbs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	bks := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range []*examplev1.MyDatabase{archiving, plain} {
		_ = dbs.Add(o)
	}
	for _, o := range []*examplev1.MyDatabaseBackup{
		backup("nightly", "shop", "shop-uid", at(10), true),
		backup("on-a-volume", "shop", "shop-uid", at(10), false),
		backup("of-plain", "plain", "plain-uid", at(10), true),
		backup("of-a-gone-shop", "shop", "old-shop-uid", at(5), true),
	} {
		_ = bks.Add(o)
	}
	p := NewPlugin()
	p.databases, p.backups = listers.NewMyDatabaseLister(dbs), listers.NewMyDatabaseBackupLister(bks)
	p.synced = func() bool { return true }
	p.now = func() time.Time { return at(120).Time }
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, backup string
		target       metav1.Time
		want         string
	}{
		{"inside the window", "nightly", at(30), ""},
		{"at the window's end", "nightly", at(60), "must be before MyDatabase \"shop\"'s lastRecoverableTime: its archive is recoverable from 2026-12-05T14:10:00Z up to 2026-12-05T15:00:00Z"},
		{"before the backup ended", "nightly", at(5), "must be after MyDatabaseBackup \"nightly\" ended (2026-12-05T14:10:00Z)"},
		{"a backup on a volume", "on-a-volume", at(30), "is on a volume"},
		{"a source that does not archive", "of-plain", at(30), "does not archive its WAL"},
		{"a source that is gone", "of-a-gone-shop", at(90), ""},
		{"a backup the cache does not show", "unknown", at(90), ""},
		{"the backup picked for a time inside the window", "pick:shop", at(30), ""},
		{"the backup picked for a time past the window", "pick:shop", at(70), "must be before MyDatabase \"shop\"'s lastRecoverableTime"},
		{"no backup ended before the time", "pick:shop", at(5), "no succeeded backup in S3 of MyDatabase \"shop\" ended before it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			db := &example.MyDatabase{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: "ns"}, Spec: example.MyDatabaseSpec{
				RestoreFrom: &example.RestoreSource{BackupName: tc.backup, PointInTime: &example.RecoveryTarget{Time: &target}}}}
			if source, ok := strings.CutPrefix(tc.backup, "pick:"); ok {
				db.Spec.RestoreFrom.BackupName, db.Spec.RestoreFrom.DatabaseName = "", source
			}
			attrs := admission.NewAttributesRecord(db, nil, example.Kind("MyDatabase").WithVersion("v1"), "ns", "copy",
				example.Resource("mydatabases").WithVersion("v1"), "", admission.Create, nil, false, nil)
			err := p.Validate(context.Background(), attrs, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.restoreFrom.pointInTime.time") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want 422 on spec.restoreFrom.pointInTime.time saying %q", err, tc.want)
			}
		})
	}
}
