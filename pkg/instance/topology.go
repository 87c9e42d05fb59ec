package instance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// Topology is the desired shape of the database as the controller decided
// it: which instance is the primary and where to reach it.
type Topology struct {
	// Primary is the instance name of the primary.
	Primary string `json:"primary"`
	// PrimaryHost and PrimaryPort are the primary engine's address.
	PrimaryHost string `json:"primaryHost"`
	PrimaryPort int    `json:"primaryPort"`
	// PrimaryAdminPort, when set, is where replicas and clones connect
	// instead of PrimaryPort: MySQL's admin interface, which serves the
	// instance's own certificate while the engine's port serves one of
	// the user's own (spec.tls.serverCertificateSecret).
	PrimaryAdminPort int `json:"primaryAdminPort,omitempty"`
	// PrimaryStatusURL is the base URL of the primary's manager HTTP server
	// (for example https://db-0.db:8000): replicas read its /v1/status to
	// check they hold a clone of it, and MariaDB replicas clone from its
	// /v1/clone.
	PrimaryStatusURL string `json:"primaryStatusURL"`
	// TargetPrimary is the instance chosen to become the primary, when a
	// switchover is under way (it differs from Primary then). The primary,
	// seeing a target other than itself, fences: it stops taking writes and
	// reports the position of its last one (Status.FencedPosition).
	TargetPrimary string `json:"targetPrimary,omitempty"`
	// Fence, when set, makes a primary fence itself whatever the rest says:
	// the source could not confirm the topology for too long (a
	// partitioned instance must not keep taking writes another primary may
	// already take). It says why.
	Fence string `json:"fence,omitempty"`
	// Synchronous makes the primary acknowledge a commit only once at least
	// one replica has it (spec.replication.mode Sync): with no replica
	// connected, commits wait.
	Synchronous bool `json:"synchronous,omitempty"`
	// Parameters are the engine parameters of spec.parameters that the
	// engine takes while it runs (parameters.Encode: sorted name=value
	// lines, so that a Topology stays comparable); those it reads only at
	// start come as flags (--engine-parameter), through the pod template.
	Parameters string `json:"parameters,omitempty"`
}

// fenceReason says why the primary t names must refuse writes, or "" when
// it may take them.
func (t Topology) fenceReason(self string) string {
	switch {
	case t.Primary != self:
		return ""
	case t.Fence != "":
		return t.Fence
	case t.TargetPrimary != "" && t.TargetPrimary != self:
		return "switching over to " + t.TargetPrimary
	}
	return ""
}

// ReplicationPort is the primary's port replicas and clones connect to.
func (t Topology) ReplicationPort() int {
	if t.PrimaryAdminPort > 0 {
		return t.PrimaryAdminPort
	}
	return t.PrimaryPort
}

// Validate tells whether t names a primary that can be reached.
func (t Topology) Validate() error {
	if t.Primary == "" {
		return fmt.Errorf("topology: primary is empty")
	}
	if t.PrimaryHost == "" || t.PrimaryPort <= 0 || t.PrimaryPort > 65535 {
		return fmt.Errorf("topology: primary %q needs primaryHost and a primaryPort in 1-65535", t.Primary)
	}
	if t.PrimaryAdminPort < 0 || t.PrimaryAdminPort > 65535 {
		return fmt.Errorf("topology: primaryAdminPort %d is not in 1-65535", t.PrimaryAdminPort)
	}
	return nil
}

// TopologySource delivers the desired topology. Watch sends the current
// topology as soon as it is known and again whenever it changes, and closes
// the channel when ctx is done. Only the latest value matters: a slow reader
// may miss intermediate ones.
type TopologySource interface {
	Watch(ctx context.Context) <-chan Topology
}

// FileSource reads the topology from a JSON file, polling it for changes;
// polling is simple and works on every volume type, including the
// symlink-swapped files of a mounted ConfigMap.
type FileSource struct {
	Path     string
	Interval time.Duration
	Log      *slog.Logger
}

// Watch implements TopologySource.
func (f FileSource) Watch(ctx context.Context) <-chan Topology {
	ch := make(chan Topology, 1)
	interval := f.Interval
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	log := f.Log
	if log == nil {
		log = slog.Default()
	}
	go func() {
		defer close(ch)
		var last []byte
		var lastErr string
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			data, err := os.ReadFile(f.Path)
			if err == nil && !bytes.Equal(data, last) {
				var t Topology
				if err = json.Unmarshal(data, &t); err == nil {
					err = t.Validate()
				}
				if err == nil {
					last = data
					SendLatest(ch, t)
				}
			}
			if err != nil && err.Error() != lastErr && !os.IsNotExist(err) {
				log.Warn("topology file unusable", "path", f.Path, "err", err)
			}
			lastErr = ""
			if err != nil {
				lastErr = err.Error()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return ch
}

// SendLatest replaces whatever value ch holds with t (ch has capacity 1 and
// one sender), so a reader always gets the newest topology.
func SendLatest(ch chan Topology, t Topology) {
	select {
	case <-ch:
	default:
	}
	ch <- t
}
