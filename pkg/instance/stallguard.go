package instance

import (
	"net/http"
	"time"
)

// DefaultStreamStall is how long a write of a clone stream the manager
// serves may block before its client is dropped.
const DefaultStreamStall = 30 * time.Second

// DefaultBackupStall is how long a write of a backup into its upload may
// block before the backup is given up. An upload reads nothing while it
// sends a part (objectstore's 16 MiB), so this is longer: a destination
// slower than 16 MiB in 2 minutes (0.14 MB/s) is taken for a stalled one.
const DefaultBackupStall = 2 * time.Minute

func (m *Manager) streamStall() time.Duration {
	if m.opts.StreamStall > 0 {
		return m.opts.StreamStall
	}
	return DefaultStreamStall
}

func (m *Manager) backupStall() time.Duration {
	if m.opts.StreamStall > 0 {
		return m.opts.StreamStall
	}
	return DefaultBackupStall
}

// stallGuard is a ResponseWriter whose every write must complete within
// stall: a client that stops reading is dropped after that long, and the
// write fails, which ends the engine tool feeding the stream. Without it a
// stalled reader of a clone would hold the tool, and the engine's backup
// lock (MariaDB's BACKUP STAGE BLOCK_COMMIT stops every commit on the
// primary), for as long as it liked.
type stallGuard struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func guardStalls(w http.ResponseWriter, stall time.Duration) *stallGuard {
	return &stallGuard{ResponseWriter: w, rc: http.NewResponseController(w), stall: stall}
}

func (g *stallGuard) Write(p []byte) (int, error) {
	if err := g.rc.SetWriteDeadline(time.Now().Add(g.stall)); err != nil {
		return 0, err
	}
	return g.ResponseWriter.Write(p)
}

// Flush lets a streaming handler push what it wrote.
func (g *stallGuard) Flush() { _ = g.rc.Flush() }

// Unwrap lets http.ResponseController reach the connection.
func (g *stallGuard) Unwrap() http.ResponseWriter { return g.ResponseWriter }
