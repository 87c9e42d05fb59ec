//go:build engines

package engines

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// leakWatch scans every process's command line (and our processes'
// environments) for the cluster's passwords while the test runs, so
// short-lived tools (initdb, pg_basebackup, mariadb-backup) are seen too.
type leakWatch struct {
	mu     sync.Mutex
	leaks  []string
	seen   map[int]bool // pids of our processes the scan saw
	leaked map[int]bool
	quit   chan struct{}
	done   chan struct{}
}

func watchLeaks(c *cluster) *leakWatch {
	w := &leakWatch{seen: map[int]bool{}, leaked: map[int]bool{}, quit: make(chan struct{}), done: make(chan struct{})}
	var secrets []string
	for _, k := range []string{instance.SecretPassword, instance.SecretSuperuserPassword, instance.SecretReplicationPassword} {
		secrets = append(secrets, c.secrets[k])
	}
	go func() {
		defer close(w.done)
		for {
			for pid, cmdline := range processes() {
				ours := strings.Contains(cmdline, c.dir)
				env := ""
				if ours {
					env = environ(pid)
				}
				for _, s := range secrets {
					if strings.Contains(cmdline, s) || strings.Contains(env, s) {
						w.mu.Lock()
						if !w.leaked[pid] {
							w.leaked[pid] = true
							w.leaks = append(w.leaks, fmt.Sprintf("pid %d: %.200s", pid, cmdline))
						}
						w.mu.Unlock()
					}
				}
				if ours {
					w.mu.Lock()
					w.seen[pid] = true
					w.mu.Unlock()
				}
			}
			select {
			case <-w.quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *leakWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.done
}

func (w *leakWatch) report() (leaks []string, seen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.leaks...), len(w.seen)
}
