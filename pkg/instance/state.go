package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// stateFile remembers, on the data volume, what the data last served as.
// It lets a former primary that is told to be a replica know that its data
// may have diverged (it took writes the new primary never saw).
type stateFile struct {
	Role    api.Role `json:"role"`
	Primary string   `json:"primary"`
}

const stateFileName = "mydb-instance.json"

func readState(dataRoot string) (stateFile, error) {
	var s stateFile
	b, err := os.ReadFile(filepath.Join(dataRoot, stateFileName))
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", stateFileName, err)
	}
	return s, nil
}

func writeState(dataRoot string, s stateFile) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(dataRoot, stateFileName), b, 0o600)
}

// WriteFileAtomic writes a file so that readers (and a crash) see either
// the old or the new content, never a part.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes a rename in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// ReplaceDir moves the complete directory src to dst, replacing what dst
// held, so dst is always either the old or the new complete data.
func ReplaceDir(src, dst string) error {
	old := dst + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if _, err := os.Stat(dst); err == nil {
		if err := os.Rename(dst, old); err != nil {
			return err
		}
	}
	if err := os.Rename(src, dst); err != nil {
		return err
	}
	if err := SyncDir(filepath.Dir(dst)); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// UnpackVerified is the first half of every driver's Restore: scratch made
// anew with mode, unpack filling it from r, r read to its end (what follows
// an archive's end, its padding, is part of the stream the checksum
// covers), then verify. On error scratch is gone; on success the caller
// finishes the data in scratch and removes it if that fails.
func UnpackVerified(scratch string, mode os.FileMode, r io.Reader, unpack func(r io.Reader, dir string) error, verify func() error) (err error) {
	if err := os.RemoveAll(scratch); err != nil {
		return err
	}
	if err := os.Mkdir(scratch, mode); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(scratch)
		}
	}()
	if err := unpack(r, scratch); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	return verify()
}
