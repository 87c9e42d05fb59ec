package instance

import (
	"context"
	"fmt"
	"time"
)

// PollUntil calls f every interval until it succeeds or ctx ends, and then
// says what the last failure was.
func PollUntil(ctx context.Context, interval time.Duration, f func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}
