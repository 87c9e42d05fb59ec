package datatar

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExtractKeepsToTheDirectory(t *testing.T) {
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
	if err := Extract(bytes.NewReader(ok), dir); err != nil {
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
		if err := Extract(bytes.NewReader(stream), t.TempDir()); err == nil {
			t.Errorf("%s unpacked", name)
		}
	}
}

// What Write streams, Extract unpacks the same: names, contents, empty
// directories; a link is refused rather than copied.
func TestWriteThenExtract(t *testing.T) {
	src := t.TempDir()
	for path, content := range map[string]string{"ibdata1": "data", "mysql/user.ibd": strings.Repeat("u", 70000), "#innodb_redo/#ib_redo9": ""} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(path)), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, path), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(src, "empty"), 0o750); err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	if err := Write(&stream, src); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := Extract(bytes.NewReader(stream.Bytes()), dst); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{"ibdata1": "data", "mysql/user.ibd": strings.Repeat("u", 70000), "#innodb_redo/#ib_redo9": ""} {
		if b, err := os.ReadFile(filepath.Join(dst, path)); err != nil || string(b) != content {
			t.Errorf("%s: %d bytes, %v", path, len(b), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dst, "empty")); err != nil || !fi.IsDir() {
		t.Errorf("the empty directory: %v", err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := Write(&bytes.Buffer{}, src); err == nil || !strings.Contains(err.Error(), "link") {
		t.Errorf("a symlink was written: %v", err)
	}
}
