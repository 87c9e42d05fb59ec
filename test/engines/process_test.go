//go:build engines

package engines

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// processes returns the pid -> command line of every process on the machine.
func processes() map[int]string {
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		out[pid] = string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
	}
	return out
}

// environ is a process's environment (empty if it is gone).
func environ(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{'\n'}))
}

// killUnder kills, by pid, every process whose command line names a path
// under dir: only what this suite started matches its temp directory.
func killUnder(dir string) {
	// With the separator: the processes of a cluster whose directory's name
	// begins with this one's ("pitr-mariadb-failover" beside
	// "pitr-mariadb") are another test's.
	under := strings.TrimSuffix(dir, "/") + "/"
	for pid, cmdline := range processes() {
		if pid != os.Getpid() && strings.Contains(cmdline, under) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
