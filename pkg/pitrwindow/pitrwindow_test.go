package pitrwindow

import (
	"strings"
	"testing"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/binlog"
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
			if cut.Segment != tc.cut || cut.GTID != "" || ok != tc.cutOK {
				t.Errorf("cut %+v %v, want segment %d %v", cut, ok, tc.cut, tc.cutOK)
			}
		})
	}
	if _, ok := ArchiveCut(&examplev1.MyDatabaseBackup{}); ok {
		t.Error("a base without a position allowed a cut")
	}
	began := metav1.NewTime(time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC))
	mariadb := &examplev1.MyDatabaseBackup{Status: examplev1.MyDatabaseBackupStatus{StartTime: &began, Position: &examplev1.InstancePosition{GTID: "0-1-42"}}}
	if cut, ok := ArchiveCut(mariadb); !ok || cut != (Cut{GTID: "0-1-42", Began: began.Time}) {
		t.Errorf("a MariaDB base: %+v %v, want its GTID position and start", cut, ok)
	}
	mariadb.Status.StartTime = nil
	if _, ok := ArchiveCut(mariadb); ok {
		t.Error("a MariaDB base without a start time allowed a cut")
	}
}

func TestPick(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	backup := func(name, db string, endedAgo time.Duration, lsn string, mods ...func(*examplev1.MyDatabaseBackup)) *examplev1.MyDatabaseBackup {
		end := metav1.NewTime(now.Add(-endedAgo))
		b := &examplev1.MyDatabaseBackup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: examplev1.MyDatabaseBackupSpec{DatabaseName: db},
			Status: examplev1.MyDatabaseBackupStatus{Phase: examplev1.BackupPhaseSucceeded, CompletionTime: &end,
				Position: &examplev1.InstancePosition{LSN: lsn}, Location: &examplev1.BackupLocation{S3: &examplev1.S3Location{}}}}
		for _, mod := range mods {
			mod(b)
		}
		return b
	}
	h := time.Hour
	d5, d3, d1 := backup("d5", "shop", 5*h, "0/3000000"), backup("d3", "shop", 3*h, "0/5000000"), backup("d1", "shop", h, "0/9000000")
	onVolume := backup("volume", "shop", 2*h, "0/6000000", func(b *examplev1.MyDatabaseBackup) {
		b.Status.Location = &examplev1.BackupLocation{Volume: &examplev1.VolumeLocation{}}
	})
	failed := backup("failed", "shop", 2*h, "0/6000000", func(b *examplev1.MyDatabaseBackup) { b.Status.Phase = examplev1.BackupPhaseFailed })
	other := backup("other", "orders", 2*h, "0/6000000")
	for b, set := range map[*examplev1.MyDatabaseBackup]string{d5: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-40", d3: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-45", d1: "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-90"} {
		b.Status.Position.GTID = set
	}
	all := []*examplev1.MyDatabaseBackup{d5, d3, d1, onVolume, failed, other}
	at := func(ago time.Duration) *examplev1.RecoveryTarget {
		return &examplev1.RecoveryTarget{Time: &metav1.Time{Time: now.Add(-ago)}}
	}
	for _, tc := range []struct {
		name   string
		target *examplev1.RecoveryTarget
		before time.Time
		want   *examplev1.MyDatabaseBackup
	}{
		{"a time between backups", at(2 * h), now, d3},
		{"a time before every backup", at(6 * h), now, nil},
		{"latest", &examplev1.RecoveryTarget{Latest: true}, now, d1},
		{"latest, for a database created before the newest backup", &examplev1.RecoveryTarget{Latest: true}, now.Add(-2 * h), d3},
		{"an LSN", &examplev1.RecoveryTarget{LSN: "0/5800000"}, now, d3},
		{"an LSN at a backup's end", &examplev1.RecoveryTarget{LSN: "0/5000000"}, now, d5},
		// MySQL backups' positions are GTID sets: the newest backup that
		// does not hold the target.
		{"a GTID", &examplev1.RecoveryTarget{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:50"}, now, d3},
		{"the GTID after a backup's end", &examplev1.RecoveryTarget{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:41"}, now, d5},
		{"the GTID a backup ends with", &examplev1.RecoveryTarget{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:45"}, now, d5},
		{"a GTID every backup holds", &examplev1.RecoveryTarget{GTID: "3e11fa47-71ca-11e1-9e33-c80aa9429562:10"}, now, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Pick(all, "shop", tc.target, tc.before); got != tc.want {
				t.Errorf("picked %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrunableBinlogs(t *testing.T) {
	began := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return began.Add(d) }
	pos := func(s string) binlog.Position {
		p, err := binlog.ParsePosition(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	binlogs := map[string]binlog.Summary{
		"e1/b.1": {End: pos("0-1-10"), LastEvent: at(-time.Hour)},
		"e1/b.2": {End: pos("0-1-42"), LastEvent: at(-time.Second)},
		// Closed after the backup began: it may hold what the backup
		// does not, and shows how far the archive reaches.
		"e1/b.3": {End: pos("0-1-42"), LastEvent: at(0)},
		"e1/b.4": {End: pos("0-1-50"), LastEvent: at(time.Minute)},
		// Another data directory's file, closed before, with a
		// transaction the backup lacks.
		"e2/b.1": {End: pos("0-2-43"), LastEvent: at(-time.Minute)},
	}
	got := PrunableBinlogs(binlogs, Cut{GTID: "0-1-42", Began: began})
	if want := "e1/b.1 e1/b.2"; strings.Join(got, " ") != want {
		t.Errorf("prunable %v, want %s", got, want)
	}
	for _, cut := range []Cut{{Segment: 7}, {GTID: "not a position", Began: began}} {
		if got := PrunableBinlogs(binlogs, cut); len(got) != 0 {
			t.Errorf("%+v pruned %v", cut, got)
		}
	}
}
