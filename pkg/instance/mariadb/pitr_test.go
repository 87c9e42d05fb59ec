package mariadb

import (
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestReplayArgs(t *testing.T) {
	at := time.Date(2026, 12, 6, 11, 41, 57, 600_000_000, time.FixedZone("CET", 3600))
	pos := func(s string) binlog.Position {
		p, err := binlog.ParsePosition(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	applied := pos("0-1-42")
	// The backup's position is inside this file.
	holdingBackup := binlog.Summary{Start: pos("0-1-30"), End: pos("0-1-50")}
	got := strings.Join(replayArgs("/d/0001-mydb-bin.000003", holdingBackup, applied, api.RecoveryTarget{Time: &at}), " ")
	// The replay stops at the first event of the target's second
	// (10:41:57 UTC): none of it may have committed before the target.
	want := "--no-defaults --start-position=0-1-42 --stop-datetime=2026-12-06 10:41:57 /d/0001-mydb-bin.000003"
	if got != want {
		t.Errorf("replayArgs = %q, want %q", got, want)
	}
	// A file that begins where the replay is needs no start: with one,
	// mariadb-binlog fails on a file opened in the target's second.
	next := binlog.Summary{Start: pos("0-1-50"), End: pos("0-1-60")}
	if got := strings.Join(replayArgs("/f", next, pos("0-1-50"), api.RecoveryTarget{Time: &at}), " "); got != "--no-defaults --stop-datetime=2026-12-06 10:41:57 /f" {
		t.Errorf("a file that begins at what is applied: %q", got)
	}
	if got := strings.Join(replayArgs("/f", holdingBackup, nil, api.RecoveryTarget{Latest: true}), " "); got != "--no-defaults /f" {
		t.Errorf("from no position to the latest: %q", got)
	}
	// A GTID target stops the file that holds it, inclusively; a file
	// before it is replayed whole.
	if got := strings.Join(replayArgs("/f", holdingBackup, applied, api.RecoveryTarget{GTID: "0-1-47"}), " "); got != "--no-defaults --start-position=0-1-42 --stop-position=0-1-47 /f" {
		t.Errorf("to a GTID the file holds: %q", got)
	}
	if got := strings.Join(replayArgs("/f", holdingBackup, applied, api.RecoveryTarget{GTID: "0-1-51"}), " "); got != "--no-defaults --start-position=0-1-42 /f" {
		t.Errorf("to a GTID after the file: %q", got)
	}
	if got := strings.Join(replayArgs("/f", next, pos("0-1-50"), api.RecoveryTarget{GTID: "0-1-55"}), " "); got != "--no-defaults --stop-position=0-1-55 /f" {
		t.Errorf("to a GTID in a file that begins at what is applied: %q", got)
	}
}
