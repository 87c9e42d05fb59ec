package mysql

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestReplayArgs(t *testing.T) {
	applied, err := binlog.ParsePosition("27f38a7f-f187-11f1-b797-02fc00000001:1-42,\n11111111-2222-3333-4444-555555555555:1-3")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(replayArgs("/d/0001-mydb-bin.000003", applied, 485), " ")
	want := "--no-defaults --exclude-gtids=11111111-2222-3333-4444-555555555555:1-3,27f38a7f-f187-11f1-b797-02fc00000001:1-42 --stop-position=485 /d/0001-mydb-bin.000003"
	if got != want {
		t.Errorf("replayArgs = %q, want %q", got, want)
	}
	if got := strings.Join(replayArgs("/f", nil, -1), " "); got != "--no-defaults /f" {
		t.Errorf("from no position, the whole file: %q", got)
	}
}

// The replay stops at the GTID event of the first transaction committed
// after the target (testdata: see pkg/binlog's TestSummarizeAFileMySQLWrote),
// and replays whole files to the latest.
func TestStopOffset(t *testing.T) {
	file := filepath.Join(t.TempDir(), "mydb-bin.000002")
	b, err := os.ReadFile("../../binlog/testdata/mysql-9.7.binlog")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	first := time.Date(2026, 12, 6, 15, 10, 31, 922575000, time.UTC)
	end, err := binlog.ParsePosition("11111111-2222-3333-4444-555555555555:1,27f38a7f-f187-11f1-b797-02fc00000001:1-6")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		target api.RecoveryTarget
		want   int64
	}{
		{api.RecoveryTarget{Time: &first}, 485},
		{api.RecoveryTarget{Latest: true}, -1},
		// After the GTID's transaction, inclusive; a GTID after the
		// file replays it whole.
		{api.RecoveryTarget{GTID: "11111111-2222-3333-4444-555555555555:1"}, 1059},
		{api.RecoveryTarget{GTID: "27f38a7f-f187-11f1-b797-02fc00000001:6"}, -1},
		{api.RecoveryTarget{GTID: "27f38a7f-f187-11f1-b797-02fc00000001:7"}, -1},
	} {
		if got, err := stopOffset(file, end, c.target); err != nil || got != c.want {
			t.Errorf("stopOffset(%+v) = %d, %v; want %d", c.target, got, err, c.want)
		}
	}
}

// The server a restore replays into runs with GTIDs on (mysqlbinlog's
// SQL sets GTID_NEXT), on the socket only, without its own binary log.
func TestReplayServerArgs(t *testing.T) {
	args := replayServerArgs(tempArgs(instance.DriverConfig{RunDir: "/run/mydb"}, "/d/mysql.restore"))
	for _, want := range []string{"--gtid-mode=ON", "--enforce-gtid-consistency=ON", "--skip-networking", "--skip-log-bin", "--datadir=/d/mysql.restore"} {
		if !slices.Contains(args, want) {
			t.Errorf("%s missing from %q", want, args)
		}
	}
}
