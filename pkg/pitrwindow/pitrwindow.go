// Package pitrwindow decides what a recovery window needs
// (spec.backup.pointInTimeRecovery.retentionWindow): the backups a replay
// to any moment of it may start from, and the archived WAL they replay.
// Pure functions of the backups, the clock and the window; the
// controllers gather the inputs and delete the rest.
package pitrwindow

import (
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// Base is the backup a replay to the window's oldest moment (now - window)
// starts from: the newest of backups that ended by then. nil when none
// did: the window reaches back past every backup, and all are needed.
// backups are the succeeded backups of one database.
func Base(backups []*examplev1.MyDatabaseBackup, now time.Time, window time.Duration) *examplev1.MyDatabaseBackup {
	start := now.Add(-window)
	var base *examplev1.MyDatabaseBackup
	for _, b := range backups {
		end := b.Status.CompletionTime
		if end == nil || end.After(start) {
			continue
		}
		if base == nil || end.After(base.Status.CompletionTime.Time) {
			base = b
		}
	}
	return base
}

// Needed tells whether the window needs backup b: it ended within the
// window, or it is the window's base.
func Needed(b, base *examplev1.MyDatabaseBackup, now time.Time, window time.Duration) bool {
	if base == nil || b == base {
		return true
	}
	end := b.Status.CompletionTime
	return end == nil || end.After(now.Add(-window))
}

// ArchiveCut is the first WAL segment the window needs: the one where the
// base backup's own WAL ends (pg_basebackup brings what comes before it).
// Segments below it, on every timeline, serve no restore the window
// allows. ok is false when there is no base, or its position is unknown:
// then nothing may be deleted.
func ArchiveCut(base *examplev1.MyDatabaseBackup) (segment uint64, ok bool) {
	if base == nil || base.Status.Position == nil || base.Status.Position.LSN == "" {
		return 0, false
	}
	seg, err := api.LSNSegment(base.Status.Position.LSN)
	return seg, err == nil
}

// Pick is the backup a restore of database to target starts from, among
// backups (a namespace's): the newest succeeded backup in S3 of that
// database that ended by before (the restored database's creation, so a
// later backup never changes the pick) and before the target (for an LSN
// target, whose position is below it; for latest, any). nil when there is
// none.
func Pick(backups []*examplev1.MyDatabaseBackup, database string, target *examplev1.RecoveryTarget, before time.Time) *examplev1.MyDatabaseBackup {
	var picked *examplev1.MyDatabaseBackup
	for _, b := range backups {
		s := b.Status
		if b.Spec.DatabaseName != database || s.Phase != examplev1.BackupPhaseSucceeded || s.Location == nil || s.Location.S3 == nil ||
			s.CompletionTime == nil || s.CompletionTime.After(before) || !reaches(b, target) {
			continue
		}
		if picked == nil || s.CompletionTime.After(picked.Status.CompletionTime.Time) {
			picked = b
		}
	}
	return picked
}

// reaches tells whether a replay from b can reach target.
func reaches(b *examplev1.MyDatabaseBackup, target *examplev1.RecoveryTarget) bool {
	switch {
	case target == nil || target.Latest:
		return true
	case target.Time != nil:
		return b.Status.CompletionTime.Before(target.Time)
	case target.LSN != "":
		if b.Status.Position == nil {
			return false
		}
		end, err1 := api.ParseLSN(b.Status.Position.LSN)
		want, err2 := api.ParseLSN(target.LSN)
		return err1 == nil && err2 == nil && end < want
	}
	return false
}
