package postgres

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// TestStandbyTimelineOutlivesTheWalreceiver: after the primary's clean
// shutdown ends streaming, the standby still reports the timeline it
// replayed, not its last checkpoint's older one.
func TestStandbyTimelineOutlivesTheWalreceiver(t *testing.T) {
	e := New(instance.EngineConfig{})
	three, one := uint32(3), uint32(1)
	for i, c := range []struct {
		received   *uint32
		checkpoint uint32
		want       uint32
	}{
		{nil, 1, 1},    // nothing streamed yet: the checkpoint's
		{&three, 1, 3}, // streaming on timeline 3
		{nil, 1, 3},    // the walreceiver stopped: still 3
		{nil, 4, 4},    // a restartpoint on a newer timeline
		{&one, 1, 1},   // streaming again (a fresh clone): what it streams
	} {
		if got := e.standbyTimeline(c.received, c.checkpoint); got != c.want {
			t.Errorf("step %d: timeline %d, want %d", i, got, c.want)
		}
	}
}

func TestUntarKeepsToTheDataDirectory(t *testing.T) {
	build := func(entries ...tar.Header) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, h := range entries {
			h.Mode = 0o600
			if err := tw.WriteHeader(&h); err != nil {
				t.Fatal(err)
			}
			if h.Size > 0 {
				_, _ = tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			}
		}
		_ = tw.Close()
		return buf.Bytes()
	}
	dir := t.TempDir()
	ok := build(tar.Header{Name: "base/", Typeflag: tar.TypeDir}, tar.Header{Name: "base/1", Typeflag: tar.TypeReg, Size: 3},
		tar.Header{Name: "pg_wal/000000010000000000000002", Typeflag: tar.TypeReg, Size: 5})
	if err := untar(bytes.NewReader(ok), dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "pg_wal", "000000010000000000000002")); err != nil || string(b) != "xxxxx" {
		t.Errorf("unpacked %q, %v", b, err)
	}
	for name, stream := range map[string][]byte{
		"a parent path":    build(tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1}),
		"an absolute path": build(tar.Header{Name: "/etc/escape", Typeflag: tar.TypeReg, Size: 1}),
		"a symlink":        build(tar.Header{Name: "pg_tblspc/16384", Typeflag: tar.TypeSymlink, Linkname: "/elsewhere"}),
		"no file":          build(),
		"not a tar":        []byte("XBSTCK01 this is an mbstream"),
	} {
		if err := untar(bytes.NewReader(stream), t.TempDir()); err == nil {
			t.Errorf("%s unpacked", name)
		}
	}
}
