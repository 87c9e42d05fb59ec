package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// stateFile remembers, on the data volume, what the data last served as.
// It lets a former primary that is told to be a replica know that its data
// may have diverged (it took writes the new primary never saw).
type stateFile struct {
	Role    Role   `json:"role"`
	Primary string `json:"primary"`
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
