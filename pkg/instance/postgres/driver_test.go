package postgres

import (
	"testing"

	"github.com/mydb-dev/mydb/pkg/instance"
)

// TestStandbyTimelineOutlivesTheWalreceiver: after the primary's clean
// shutdown ends streaming, the standby still reports the timeline it
// replayed, not its last checkpoint's older one.
func TestStandbyTimelineOutlivesTheWalreceiver(t *testing.T) {
	d := New(instance.DriverConfig{})
	three, one := uint32(3), uint32(1)
	for i, c := range []struct {
		received   *uint32
		checkpoint uint32
		want       uint32
	}{
		{nil, 1, 1},    // nothing streamed yet: the checkpoint's
		{&three, 1, 3}, // streaming on timeline 3
		{nil, 1, 3},    // the walreceiver stopped: still 3
		{nil, 4, 4},    // a restartpoint on a newer timeline
		{&one, 1, 1},   // streaming again (a fresh clone): what it streams
	} {
		if got := d.standbyTimeline(c.received, c.checkpoint); got != c.want {
			t.Errorf("step %d: timeline %d, want %d", i, got, c.want)
		}
	}
}
