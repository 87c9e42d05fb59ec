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
	applied, _ := binlog.ParsePosition("0-1-42")
	end, _ := binlog.ParsePosition("0-1-50")
	got := strings.Join(replayArgs("/d/0001-mydb-bin.000003", end, applied, api.RecoveryTarget{Time: &at}), " ")
	// The replay stops at the first event of the target's second
	// (10:41:57 UTC): none of it may have committed before the target.
	want := "--no-defaults --start-position=0-1-42 --stop-datetime=2026-12-06 10:41:57 /d/0001-mydb-bin.000003"
	if got != want {
		t.Errorf("replayArgs = %q, want %q", got, want)
	}
	if got := strings.Join(replayArgs("/f", end, nil, api.RecoveryTarget{Latest: true}), " "); got != "--no-defaults /f" {
		t.Errorf("from no position to the latest: %q", got)
	}
	// A GTID target stops the file that holds it, inclusively; a file
	// before it is replayed whole.
	if got := strings.Join(replayArgs("/f", end, applied, api.RecoveryTarget{GTID: "0-1-47"}), " "); got != "--no-defaults --start-position=0-1-42 --stop-position=0-1-47 /f" {
		t.Errorf("to a GTID the file holds: %q", got)
	}
	if got := strings.Join(replayArgs("/f", end, applied, api.RecoveryTarget{GTID: "0-1-51"}), " "); got != "--no-defaults --start-position=0-1-42 /f" {
		t.Errorf("to a GTID after the file: %q", got)
	}
}
