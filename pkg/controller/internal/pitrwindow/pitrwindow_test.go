package pitrwindow

import (
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWindow(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	backup := func(name string, endedAgo time.Duration, lsn string) *examplev1.MyDatabaseBackup {
		end := metav1.NewTime(now.Add(-endedAgo))
		return &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: examplev1.MyDatabaseBackupStatus{CompletionTime: &end, Position: &examplev1.InstancePosition{LSN: lsn}}}
	}
	day := 24 * time.Hour
	d1, d3, d8, d9 := backup("d1", day, "0/9000028"), backup("d3", 3*day, "0/7000028"), backup("d8", 8*day, "0/5000100"), backup("d9", 9*day, "0/3000028")
	all := []*examplev1.MyDatabaseBackup{d1, d3, d8, d9}
	for _, tc := range []struct {
		name    string
		backups []*examplev1.MyDatabaseBackup
		window  time.Duration
		base    *examplev1.MyDatabaseBackup
		needed  []*examplev1.MyDatabaseBackup
		cut     uint64
		cutOK   bool
	}{
		{"a week: the newest older than a week is the base", all, 7 * day, d8, []*examplev1.MyDatabaseBackup{d1, d3, d8}, 5, true},
		{"two days", all, 2 * day, d3, []*examplev1.MyDatabaseBackup{d1, d3}, 7, true},
		{"a window older than every backup", all, 30 * day, nil, all, 0, false},
		{"an hour: the newest backup is the base", all, time.Hour, d1, []*examplev1.MyDatabaseBackup{d1}, 9, true},
		{"no backups", nil, day, nil, nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := Base(tc.backups, now, tc.window)
			if base != tc.base {
				t.Fatalf("base %v, want %v", base, tc.base)
			}
			var needed []*examplev1.MyDatabaseBackup
			for _, b := range tc.backups {
				if Needed(b, base, now, tc.window) {
					needed = append(needed, b)
				}
			}
			if len(needed) != len(tc.needed) {
				t.Fatalf("needed %d backups, want %d", len(needed), len(tc.needed))
			}
			for i := range needed {
				if needed[i] != tc.needed[i] {
					t.Errorf("needed[%d] = %s, want %s", i, needed[i].Name, tc.needed[i].Name)
				}
			}
			cut, ok := ArchiveCut(base)
			if cut != tc.cut || ok != tc.cutOK {
				t.Errorf("cut %d %v, want %d %v", cut, ok, tc.cut, tc.cutOK)
			}
		})
	}
	if _, ok := ArchiveCut(&examplev1.MyDatabaseBackup{}); ok {
		t.Error("a base without a position allowed a cut")
	}
}
