package instance

import (
	"net/http"
	"time"
)

// DefaultStreamStall is how long a stream the manager serves (a clone) may
// stand still before the client is dropped.
const DefaultStreamStall = 30 * time.Second

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
	if stall <= 0 {
		stall = DefaultStreamStall
	}
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
