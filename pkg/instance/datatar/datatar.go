// Package datatar writes a data directory as one tar stream and unpacks
// one: directories and regular files only, every name inside the
// directory, which is all an engine's data directory holds here (no
// tablespaces or WAL directories elsewhere, no links).
package datatar

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write streams dir's tree to w as one tar, names relative to dir; it
// fails on anything but directories and regular files.
func Write(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.IsDir() && !info.Mode().IsRegular() {
			return fmt.Errorf("%s: only directories and regular files are copied, this is %s", rel, info.Mode().Type())
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		// Owners are the instance's own wherever it is unpacked.
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		// The size is the header's: a file that changed since would
		// make the stream wrong, and CopyN says so.
		_, err = io.CopyN(tw, f, info.Size())
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// Extract unpacks a tar from r into dir (which exists): directories and
// regular files only, every name inside dir, files 0600 and directories
// 0700. It stops at the tar's end; what follows in r is not read.
func Extract(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	seen := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if !seen {
				return errors.New("the stream holds no file")
			}
			return nil
		}
		if err != nil {
			return err
		}
		seen = true
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("%q lies outside the data directory", h.Name)
		}
		path := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%q: tar entry type %q is not supported", h.Name, h.Typeflag)
		}
	}
}
