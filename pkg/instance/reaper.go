package instance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reapOrphans waits for exited processes that the kernel re-parented to the
// manager: as a container's PID 1 it inherits the engine's children when
// the engine dies (kill -9 of the postmaster leaves its backends), and
// nobody else would collect them. The manager's own children are left to
// their exec.Cmd: the tools run in the manager's process group and the
// engine is the leader of its own (so its orphans carry its pid as their
// group), which tells the two apart without racing cmd.Wait.
func reapOrphans(engine int) (reaped int) {
	self, group := os.Getpid(), syscall.Getpgrp()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		pid, state, ppid, pgid, ok := parseStat(string(b))
		if !ok || state != "Z" || ppid != self || pgid == group || pid == engine {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); err == nil && got == pid {
			reaped++
		}
	}
	return reaped
}

// parseStat reads pid, state, ppid and process group from /proc/PID/stat;
// the command name in parentheses may hold spaces, so fields are counted
// from its closing parenthesis.
func parseStat(s string) (pid int, state string, ppid, pgid int, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return 0, "", 0, 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 {
		return 0, "", 0, 0, false
	}
	var err1, err2, err3 error
	pid, err1 = strconv.Atoi(strings.TrimSpace(s[:open]))
	ppid, err2 = strconv.Atoi(f[1])
	pgid, err3 = strconv.Atoi(f[2])
	return pid, f[0], ppid, pgid, err1 == nil && err2 == nil && err3 == nil
}
