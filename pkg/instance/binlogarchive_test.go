package instance

import (
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance/api"
)

func TestBinlogChain(t *testing.T) {
	pos := func(s string) binlog.Position {
		p, err := binlog.ParsePosition(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	at := func(sec int) time.Time { return time.Unix(int64(1_800_000_000+sec), 0).UTC() }
	file := func(start, end string, last int) binlogManifest {
		return binlogManifest{Summary: binlog.Summary{Start: pos(start), End: pos(end), LastEvent: at(last), Rotated: true}}
	}
	timeAt := func(sec int, ms int) api.RecoveryTarget {
		x := at(sec).Add(time.Duration(ms) * time.Millisecond)
		return api.RecoveryTarget{Time: &x}
	}
	// One primary's files: 5-12 closed at 100, 12-20 at 110, 20-20 (idle)
	// at 120.
	one := map[string]binlogManifest{
		"e1/mydb-bin.000001": file("0-1-5", "0-1-12", 100),
		"e1/mydb-bin.000002": file("0-1-12", "0-1-20", 110),
		"e1/mydb-bin.000003": file("0-1-20", "0-1-20", 120),
	}
	// A failover: the old primary archived 1-9 and died with 10-12 in a
	// file it had not closed; the new primary (server 2, epoch e2), cloned
	// at 0-1-6, wrote what it replicated (7-12) in its first file, whose
	// Gtid_list is empty, then its own (13-15).
	cloneFile := file("", "0-1-12", 101)
	cloneFile.Summary.First = pos("0-1-7")
	failover := map[string]binlogManifest{
		"e1/mydb-bin.000001": file("", "0-1-9", 100),
		"e2/mydb-bin.000001": cloneFile,
		"e2/mydb-bin.000002": file("0-1-12", "0-2-15", 130),
	}
	for _, c := range []struct {
		name      string
		manifests map[string]binlogManifest
		base      string
		target    api.RecoveryTarget
		want      []string
		err       string
	}{
		{name: "to a time inside the second file", manifests: one, base: "0-1-10", target: timeAt(105, 500),
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		{name: "to a time inside the first file stops there", manifests: one, base: "0-1-10", target: timeAt(99, 0),
			want: []string{"e1/mydb-bin.000001"}},
		{name: "a base past the first file skips it", manifests: one, base: "0-1-12", target: timeAt(105, 0),
			want: []string{"e1/mydb-bin.000002"}},
		{name: "after the last transaction, an idle file closed later reaches it", manifests: one, base: "0-1-10", target: timeAt(115, 0),
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		{name: "the second of the last close is reached", manifests: one, base: "0-1-10", target: timeAt(120, 200),
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		{name: "a second after the last close is not reached", manifests: one, base: "0-1-10", target: timeAt(121, 0),
			err: "its files reach"},
		{name: "latest replays all", manifests: one, base: "0-1-10", target: api.RecoveryTarget{Latest: true},
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		{name: "a gap after the base", manifests: map[string]binlogManifest{"e1/b.2": file("0-1-14", "0-1-20", 110)}, base: "0-1-10", target: timeAt(105, 0),
			err: "the archive has a gap"},
		{name: "across a failover, each transaction from one file", manifests: failover, base: "0-1-4", target: timeAt(125, 0),
			want: []string{"e1/mydb-bin.000001", "e2/mydb-bin.000001", "e2/mydb-bin.000002"}},
		{name: "across a failover from a base the clone's file holds", manifests: failover, base: "0-1-8", target: timeAt(125, 0),
			want: []string{"e1/mydb-bin.000001", "e2/mydb-bin.000001", "e2/mydb-bin.000002"}},
		{name: "a clone's first file does not reach back to the base", manifests: map[string]binlogManifest{"e2/mydb-bin.000001": cloneFile},
			base: "0-1-4", target: timeAt(100, 0), err: "begins after 0-1-6"},
		{name: "an empty archive reaches nothing", manifests: map[string]binlogManifest{}, base: "0-1-8", target: timeAt(125, 0),
			err: "its files reach"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := binlogChain(c.manifests, pos(c.base), c.target)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want one saying %q (chain %v)", err, c.err, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("chain = %v, want %v", got, c.want)
			}
		})
	}
}
