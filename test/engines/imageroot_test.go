//go:build engines

package engines

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// An engine that this machine's Debian does not package (MySQL 9.7 is in
// sid only) runs from the root filesystem of the very image the real node
// runs (hack/images.sh builds it from Debian's packages): mydb-instance and
// its engine are started chrooted into it, with the suite's directory (the
// binary, the secrets, every data and run directory) and /proc mounted at
// the same paths inside (the image carries its own /dev nodes), so that a path means the same to the
// suite and to the instance. The mounts live in the suite's own mount
// namespace (TestMain), so nothing outlives the test process.

// imageRoot is an engine image's root filesystem, unpacked and mounted.
type imageRoot struct {
	dir      string
	uid, gid int
}

var (
	imageRootsMu sync.Mutex
	imageRoots   = map[string]*imageRoot{}
	// mounts are undone, last first, before the suite removes its
	// directories.
	mounts []string
)

// imageArchive is where hack/images.sh leaves image name's docker archive.
func imageArchive(name string) string {
	if dir := os.Getenv("MYDB_IMAGES_DIR"); dir != "" {
		return filepath.Join(dir, name+".tar")
	}
	return filepath.Join("..", "..", "_output", "images", name+".tar")
}

// rootOf unpacks image name (once per suite) and mounts the suite's
// directory and /proc into it; osUser's ids are read from the
// image's own passwd file.
func rootOf(name, osUser string) (*imageRoot, error) {
	imageRootsMu.Lock()
	defer imageRootsMu.Unlock()
	if r, ok := imageRoots[name]; ok {
		return r, nil
	}
	archive, err := filepath.Abs(imageArchive(name))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(archive); err != nil {
		return nil, fmt.Errorf("the %s image: %w (make test-engines builds it with hack/images.sh %s)", name, err, name)
	}
	dir := filepath.Join(imagesRoot, name)
	if err := unpackImage(archive, dir); err != nil {
		return nil, fmt.Errorf("unpacking %s: %w", archive, err)
	}
	// A container runtime gives every container an /etc/hosts that names
	// localhost (mariadb-install-db refuses to run when it cannot look it
	// up); the image has none of its own.
	if err := os.WriteFile(filepath.Join(dir, "etc", "hosts"), []byte("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"), 0o644); err != nil {
		return nil, err
	}
	for _, m := range []struct{ source, target, fstype string }{
		{root, filepath.Join(dir, root), ""},
		{"proc", filepath.Join(dir, "proc"), "proc"},
	} {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return nil, err
		}
		flags := uintptr(syscall.MS_BIND)
		if m.fstype != "" {
			flags = 0
		}
		if err := syscall.Mount(m.source, m.target, m.fstype, flags, ""); err != nil {
			return nil, fmt.Errorf("mount %s on %s: %w", m.source, m.target, err)
		}
		mounts = append(mounts, m.target)
	}
	r := &imageRoot{dir: dir}
	if r.uid, r.gid, err = passwdIDs(filepath.Join(dir, "etc", "passwd"), osUser); err != nil {
		return nil, err
	}
	imageRoots[name] = r
	return r, nil
}

// unpackImage extracts the single layer of a docker archive (what
// hack/images.sh saves) into dir, owners and modes kept.
func unpackImage(archive, dir string) error {
	tmp := dir + ".archive"
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("tar", "-xf", archive, "-C", tmp).CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(tmp, "manifest.json"))
	if err != nil {
		return err
	}
	var manifest []struct{ Layers []string }
	if err := json.Unmarshal(b, &manifest); err != nil {
		return err
	}
	if len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		return fmt.Errorf("want one image of one layer, the manifest says %s", b)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// GNU tar recognises a compressed layer by itself.
	if out, err := exec.Command("tar", "-xpf", filepath.Join(tmp, manifest[0].Layers[0]), "-C", dir, "--numeric-owner").CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	return nil
}

// passwdIDs are user's uid and gid in the passwd file at path.
func passwdIDs(path, user string) (int, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Split(s.Text(), ":")
		if len(fields) >= 4 && fields[0] == user {
			uid, err1 := strconv.Atoi(fields[2])
			gid, err2 := strconv.Atoi(fields[3])
			if err1 != nil || err2 != nil {
				return 0, 0, fmt.Errorf("%s: bad ids for %s: %q", path, user, s.Text())
			}
			return uid, gid, nil
		}
	}
	return 0, 0, fmt.Errorf("%s: no user %s", path, user)
}

// unmountAll undoes the image roots' mounts, last first.
func unmountAll() {
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
	mounts = nil
}

// command makes cmd run chrooted into r, as r's engine user.
func (r *imageRoot) command(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Chroot = r.dir
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid)}
	return cmd
}
