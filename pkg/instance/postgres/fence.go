package postgres

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"

	"github.com/mydb-dev/mydb/pkg/instance/api"
)

// FenceStops implements instance.Driver: a running Postgres primary cannot
// refuse writes for good (default_transaction_read_only is a setting any
// session may change), so it fences by a clean stop. A fast shutdown ends
// the sessions, writes a shutdown checkpoint and waits until the walsenders
// have sent all WAL, the checkpoint included, to the connected standbys.
func (d *Driver) FenceStops() bool { return true }

// Fence implements instance.Driver, with the server stopped: the position
// just past the shutdown checkpoint, which a standby has reached exactly
// when it replayed that checkpoint, and so every transaction before it.
// A server that did not shut down cleanly cannot tell where its WAL ends.
func (d *Driver) Fence(ctx context.Context) (api.Position, error) {
	out, err := exec.CommandContext(ctx, d.cfg.Bin("pg_controldata"), "-D", d.DataDir()).Output()
	if err != nil {
		return api.Position{}, fmt.Errorf("pg_controldata: %w", err)
	}
	return fencedPosition(out)
}

// fencedPosition reads pg_controldata's output of a cleanly stopped primary.
func fencedPosition(out []byte) (api.Position, error) {
	if state := controlDataField(out, "Database cluster state"); state != "shut down" {
		return api.Position{}, fmt.Errorf("the server did not shut down cleanly (state %q): its last write is unknown", state)
	}
	loc, err := api.ParseLSN(controlDataField(out, "Latest checkpoint location"))
	if err != nil {
		return api.Position{}, err
	}
	tli, err := strconv.ParseUint(controlDataField(out, "Latest checkpoint's TimeLineID"), 10, 32)
	if err != nil {
		return api.Position{}, fmt.Errorf("pg_controldata timeline: %w", err)
	}
	// A standby's replay LSN is the end of the last record it replayed: past
	// the checkpoint record's start only once it replayed that record.
	return api.Position{Timeline: uint32(tli), LSN: api.FormatLSN(loc + 1)}, nil
}
