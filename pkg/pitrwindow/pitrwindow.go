// Package pitrwindow decides what a recovery window needs
// (spec.backup.pointInTimeRecovery.retentionWindow): the backups a replay
// to any moment of it may start from, and the archived WAL or binary logs
// they replay.
// Pure functions of the backups, the clock and the window; the
// controllers gather the inputs and delete the rest.
package pitrwindow

import (
	"sort"
	"time"

	examplev1 "github.com/mydb-dev/mydb/pkg/apis/example/v1"
	"github.com/mydb-dev/mydb/pkg/binlog"
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

// Cut is what of an archive a retention window no longer needs, given its
// base backup.
type Cut struct {
	// Segment (PostgreSQL) is the first WAL segment the window needs: the
	// one where the base backup's own WAL ends (pg_basebackup brings what
	// comes before it). Segments below it, on every timeline, serve no
	// restore the window allows. 0: none is below.
	Segment uint64
	// GTID (MariaDB) is the base backup's GTID position and Began when the
	// backup began: a binary log closed before Began whose transactions
	// GTID holds serves no restore the window allows. Later ones stay,
	// even without a transaction: their closing times show how far the
	// archive reaches.
	GTID  string
	Began time.Time
}

// ArchiveCut is the window's Cut. ok is false when there is no base, or
// its position is unknown: then nothing may be deleted.
func ArchiveCut(base *examplev1.MyDatabaseBackup) (cut Cut, ok bool) {
	if base == nil || base.Status.Position == nil {
		return Cut{}, false
	}
	switch p := base.Status.Position; {
	case p.LSN != "":
		seg, err := api.LSNSegment(p.LSN)
		return Cut{Segment: seg}, err == nil
	case p.GTID != "" && base.Status.StartTime != nil:
		return Cut{GTID: p.GTID, Began: base.Status.StartTime.Time}, true
	}
	return Cut{}, false
}

// PrunableBinlogs are the keys, of archived binary logs by key, that cut
// leaves unneeded (Cut.GTID), in order. None without a GTID position.
func PrunableBinlogs(binlogs map[string]binlog.Summary, cut Cut) []string {
	if cut.GTID == "" {
		return nil
	}
	held, err := binlog.ParsePosition(cut.GTID)
	if err != nil || len(held) == 0 {
		return nil
	}
	var keys []string
	for key, s := range binlogs {
		if s.LastEvent.Before(cut.Began) && held.Covers(s.End) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys
}

// Pick is the backup a restore of database to target starts from, among
// backups (a namespace's): the newest succeeded backup in S3 of that
// database that ended by before (the restored database's creation, so a
// later backup never changes the pick) and before the target (for an LSN
// target, whose position is below it; for a GTID, whose position does not
// hold it; for latest, any). nil when there is
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
	case target.GTID != "":
		// A backup that holds the transaction is past it.
		if b.Status.Position == nil {
			return false
		}
		held, err1 := binlog.ParsePosition(b.Status.Position.GTID)
		want, err2 := binlog.ParseGTID(target.GTID)
		return err1 == nil && err2 == nil && !held.Covers(binlog.Position{want})
	}
	return false
}
