package instance

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mydb-dev/mydb/pkg/binlog"
	"github.com/mydb-dev/mydb/pkg/instance/api"
	"github.com/mydb-dev/mydb/pkg/objectstore"
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
	file := func(start, end string, last int) BinlogManifest {
		return BinlogManifest{Summary: binlog.Summary{Start: pos(start), End: pos(end), LastEvent: at(last), Rotated: true}}
	}
	timeAt := func(sec int, ms int) api.RecoveryTarget {
		x := at(sec).Add(time.Duration(ms) * time.Millisecond)
		return api.RecoveryTarget{Time: &x}
	}
	// One primary's files: 5-12 closed at 100, 12-20 at 110, 20-20 (idle)
	// at 120.
	one := map[string]BinlogManifest{
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
	failover := map[string]BinlogManifest{
		"e1/mydb-bin.000001": file("", "0-1-9", 100),
		"e2/mydb-bin.000001": cloneFile,
		"e2/mydb-bin.000002": file("0-1-12", "0-2-15", 130),
	}
	for _, c := range []struct {
		name      string
		manifests map[string]BinlogManifest
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
		{name: "the second of the last close is reached", manifests: one, base: "0-1-10", target: timeAt(120, 0),
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		// The close happened somewhere in second 120: a MySQL commit
		// after it and before the target would be in a later file.
		{name: "a moment after the second of the last close is not reached", manifests: one, base: "0-1-10", target: timeAt(120, 200),
			err: "its files reach"},
		{name: "a second after the last close is not reached", manifests: one, base: "0-1-10", target: timeAt(121, 0),
			err: "its files reach"},
		{name: "a GTID target stops with the file holding it", manifests: one, base: "0-1-10", target: api.RecoveryTarget{GTID: "0-1-12"},
			want: []string{"e1/mydb-bin.000001"}},
		{name: "a GTID target in a later file", manifests: one, base: "0-1-10", target: api.RecoveryTarget{GTID: "0-1-13"},
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		{name: "a GTID target the backup holds", manifests: one, base: "0-1-10", target: api.RecoveryTarget{GTID: "0-1-9"},
			err: "already holds the target 0-1-9"},
		{name: "a GTID target past the archive", manifests: one, base: "0-1-10", target: api.RecoveryTarget{GTID: "0-1-21"},
			err: "its files reach 0-1-20 from the backup's position 0-1-10, not the target 0-1-21"},
		{name: "a GTID target across a failover, of the new primary", manifests: failover, base: "0-1-4", target: api.RecoveryTarget{GTID: "0-2-14"},
			want: []string{"e1/mydb-bin.000001", "e2/mydb-bin.000001", "e2/mydb-bin.000002"}},
		{name: "latest replays all", manifests: one, base: "0-1-10", target: api.RecoveryTarget{Latest: true},
			want: []string{"e1/mydb-bin.000001", "e1/mydb-bin.000002"}},
		{name: "a gap after the base", manifests: map[string]BinlogManifest{"e1/b.2": file("0-1-14", "0-1-20", 110)}, base: "0-1-10", target: timeAt(105, 0),
			err: "the archive has a gap"},
		{name: "across a failover, each transaction from one file", manifests: failover, base: "0-1-4", target: timeAt(125, 0),
			want: []string{"e1/mydb-bin.000001", "e2/mydb-bin.000001", "e2/mydb-bin.000002"}},
		{name: "across a failover from a base the clone's file holds", manifests: failover, base: "0-1-8", target: timeAt(125, 0),
			want: []string{"e1/mydb-bin.000001", "e2/mydb-bin.000001", "e2/mydb-bin.000002"}},
		{name: "a clone's first file does not reach back to the base", manifests: map[string]BinlogManifest{"e2/mydb-bin.000001": cloneFile},
			base: "0-1-4", target: timeAt(100, 0), err: "begins after 0-1-6"},
		{name: "an empty archive reaches nothing", manifests: map[string]BinlogManifest{}, base: "0-1-8", target: timeAt(125, 0),
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

// memBinlogStore is memWALStore with Put and List, counting manifests.
type memBinlogStore struct {
	memWALStore
	manifestPuts int
}

func (s *memBinlogStore) Put(_ context.Context, key string, r io.Reader) (objectstore.Object, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return objectstore.Object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = b
	s.manifestPuts++
	return objectstore.Object{Key: key, Size: int64(len(b))}, nil
}

func (s *memBinlogStore) List(_ context.Context, prefix string) ([]objectstore.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []objectstore.Object
	for k, b := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, objectstore.Object{Key: k, Size: int64(len(b))})
		}
	}
	return out, nil
}

// dirBinlogs is a BinlogArchiver over the files of a directory, the last
// one being written.
type dirBinlogs struct {
	dir   string
	names []string
}

func (d *dirBinlogs) BinaryLogs(context.Context) ([]string, error) { return d.names, nil }
func (d *dirBinlogs) BinaryLogDir() string                         { return d.dir }
func (d *dirBinlogs) RotateBinaryLog(context.Context) error        { return nil }
func (d *dirBinlogs) RestoreToBinlogs(context.Context, io.Reader, func() error, api.RecoveryTarget, FetchBinlogs) error {
	return nil
}

func TestClosedBinlogsAreArchivedOnceWithTheirManifests(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sample, err := os.ReadFile("../binlog/testdata/mariadb-10.11.binlog")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"mydb-bin.000001", "mydb-bin.000002"} {
		if err := os.WriteFile(filepath.Join(dir, name), sample, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logs := &dirBinlogs{dir: dir, names: []string{"mydb-bin.000001", "mydb-bin.000002"}}
	store := &memBinlogStore{memWALStore: memWALStore{objects: map[string][]byte{}}}
	m := NewManager(Options{Name: "db-0", ArchiveWAL: true, DataRoot: dir}, nil, nil)
	dest := &api.S3Object{Bucket: "b", Key: "shop/uid"}
	archived := map[string]bool{}
	if err := m.archiveClosedBinlogs(ctx, logs, dest, store, archived); err != nil {
		t.Fatal(err)
	}
	epoch, err := os.ReadFile(filepath.Join(dir, binlogEpochFile))
	if err != nil {
		t.Fatal(err)
	}
	key := BinlogKey("shop/uid", strings.TrimSpace(string(epoch)), "mydb-bin.000001")
	if store.puts != 1 || store.manifestPuts != 1 || store.objects[key] == nil || store.objects[key+".json"] == nil {
		t.Fatalf("%d files and %d manifests put, want the closed one only at %s: %v", store.puts, store.manifestPuts, key, slices.Collect(maps.Keys(store.objects)))
	}
	manifests, err := ListBinlogManifests(ctx, store, "shop/uid")
	if err != nil {
		t.Fatal(err)
	}
	if mf := manifests[key]; mf.Size != int64(len(sample)) || mf.Summary.End.String() != "0-7-5" || !mf.Summary.Rotated {
		t.Errorf("manifest %+v", mf)
	}
	s := m.archive.snapshot()
	if s.Archived != 1 || s.Pending != 0 || s.LastRecoverableTime == nil || !s.LastRecoverableTime.Equal(manifests[key].Summary.LastEvent) {
		t.Errorf("status %+v", s)
	}

	// Again, and again after a restart of the manager (nothing
	// remembered): nothing is put twice.
	for _, remembered := range []map[string]bool{archived, {}} {
		if err := m.archiveClosedBinlogs(ctx, logs, dest, store, remembered); err != nil {
			t.Fatal(err)
		}
	}
	if store.puts != 1 || store.manifestPuts != 1 {
		t.Errorf("%d files and %d manifests put after two more looks, want 1 and 1", store.puts, store.manifestPuts)
	}

	// A closed file that is not a binary log fails, and says which.
	if err := os.WriteFile(filepath.Join(dir, "mydb-bin.000003"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs.names = []string{"mydb-bin.000001", "mydb-bin.000002", "mydb-bin.000003", "mydb-bin.000004"}
	if err := m.archiveClosedBinlogs(ctx, logs, dest, store, archived); err == nil {
		t.Fatal("a file that is no binary log was archived")
	}
	if s := m.archive.snapshot(); s.Failed != 1 || !strings.Contains(s.LastFailure, "mydb-bin.000003") || s.Pending != 1 {
		t.Errorf("status after a failure %+v", s)
	}
}

// ReplayEach skips what is applied, hands each other file over with the
// position before it, removes it after, and ends with the file that
// holds the target.
func TestReplayEach(t *testing.T) {
	dir := t.TempDir()
	pos := func(s string) binlog.Position {
		p, err := binlog.ParsePosition(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	var fetched []string
	file := func(name, end string) ReplayFile {
		return ReplayFile{Key: name, Summary: binlog.Summary{End: pos(end)}, Fetch: func(context.Context) (string, error) {
			fetched = append(fetched, name)
			p := filepath.Join(dir, name)
			return p, os.WriteFile(p, []byte(name), 0o600)
		}}
	}
	files := []ReplayFile{file("a", "0-1-5"), file("b", "0-1-9"), file("c", "0-1-12"), file("d", "0-1-15")}
	var handed []string
	err := ReplayEach(context.Background(), slog.New(slog.DiscardHandler), files, pos("0-1-5"), func(local string, f ReplayFile, applied binlog.Position) (bool, error) {
		handed = append(handed, f.Key+"@"+applied.String())
		return f.Key == "c", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(handed, " "); got != "b@0-1-5 c@0-1-9" {
		t.Errorf("handed over %s, want b after 0-1-5 and c after 0-1-9, then the end", got)
	}
	if got := strings.Join(fetched, " "); got != "b c" {
		t.Errorf("downloaded %s", got)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("%d files left beside the data", len(left))
	}
}
