package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// PathHealth streams an instance's health to the controller: one Health
// per line, every HealthInterval, for as long as the connection lasts. The
// controller learns that an instance was lost (the stream breaks, or a
// line is late) when it happens rather than at its next poll, so
// failoverDelay counts from then.
const PathHealth = "/v1/health"

// HealthInterval is how often a manager sends a line of its health stream;
// a stream that sends none for HealthDeadline is taken as lost.
const (
	HealthInterval = 500 * time.Millisecond
	HealthDeadline = 3 * HealthInterval
)

// Health is one line of the health stream: what of an instance's status
// the controller acts on at once, how far its data goes, and a digest of
// the rest, so the controller need poll an instance only when something
// changed (or to resync, rarely).
type Health struct {
	Ready         bool   `json:"ready"`
	Reason        string `json:"reason,omitempty"`
	Role          Role   `json:"role,omitempty"`
	Primary       string `json:"primary,omitempty"`
	Fenced        bool   `json:"fenced,omitempty"`
	EngineRunning bool   `json:"engineRunning"`
	// Position, LagBytes and LagSeconds are the status's, as of the line:
	// they move with every write, so they are carried, not compared.
	Position   *Position `json:"position,omitempty"`
	LagBytes   *int64    `json:"lagBytes,omitempty"`
	LagSeconds *float64  `json:"lagSeconds,omitempty"`
	// Digest is StatusDigest of the status the line is of ("" from a
	// manager that predates it).
	Digest string `json:"digest,omitempty"`
}

// HealthOf is the health s says.
func HealthOf(s Status) Health {
	return Health{Ready: s.Ready, Reason: s.Reason, Role: s.Role, Primary: s.Primary, Fenced: s.Fenced, EngineRunning: s.EngineRunning,
		Position: s.Position, LagBytes: s.LagBytes, LagSeconds: s.LagSeconds, Digest: StatusDigest(s)}
}

// Changed tells whether the controller should look again at once: a
// change of what decides roles and failovers (readiness, role, primary,
// fencing, the engine's process), not of the reason's words.
func (h Health) Changed(than Health) bool {
	return h.Ready != than.Ready || h.Role != than.Role || h.Primary != than.Primary ||
		h.Fenced != than.Fenced || h.EngineRunning != than.EngineRunning
}

// StatusDigest identifies what s says apart from what moves by itself
// (positions, lag, the reason's words, an operation's or the archive's
// byte and file counts in flight): two statuses of one instance with the
// same digest would make the controller do and write the same. An
// archived file, a finished backup, new parameters, a certificate, a
// restart or a replica that stops streaming all change it.
func StatusDigest(s Status) string {
	s.Reason, s.Position, s.LagBytes, s.LagSeconds = "", nil, nil, nil
	if s.Backup != nil {
		b := *s.Backup
		b.Bytes = 0
		s.Backup = &b
	}
	if s.Restore != nil {
		r := *s.Restore
		r.Bytes = 0
		s.Restore = &r
	}
	if s.Archive != nil {
		a := *s.Archive
		a.Pending = 0
		s.Archive = &a
	}
	b, err := json.Marshal(s)
	if err != nil { // a Status always encodes
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// WatchHealth reads the health stream of the manager at host, calling
// seen with each line, until ctx ends, the stream breaks, or no line
// comes for HealthDeadline; it always returns an error saying which.
func (c *Client) WatchHealth(ctx context.Context, host string, auth Auth, seen func(Health)) error {
	h, err := c.httpClient(auth)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The shared client's timeout bounds whole requests; a stream is
	// bounded by its deadline per line instead.
	stream := &http.Client{Transport: h.Transport}
	req, err := c.request(ctx, http.MethodGet, host, PathHealth, nil)
	if err != nil {
		return err
	}
	late := time.AfterFunc(HealthDeadline, cancel)
	defer late.Stop()
	resp, err := stream.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s: %s", PathHealth, resp.Status, readMessage(resp.Body))
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 4096), 64<<10)
	for lines.Scan() {
		if !late.Stop() {
			return fmt.Errorf("no health line for %s", HealthDeadline)
		}
		late.Reset(HealthDeadline)
		var health Health
		if err := json.Unmarshal(lines.Bytes(), &health); err != nil {
			return fmt.Errorf("reading %s: %w", PathHealth, err)
		}
		seen(health)
	}
	if ctx.Err() != nil && !late.Stop() {
		return fmt.Errorf("no health line for %s", HealthDeadline)
	}
	if err := lines.Err(); err != nil {
		return err
	}
	return fmt.Errorf("the health stream of %s ended", auth.Name)
}
