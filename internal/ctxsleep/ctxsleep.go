// Package ctxsleep waits for a duration unless a context ends first: the one way the
// services, the executors and the record store pause between attempts.
package ctxsleep

import (
	"context"
	"time"
)

// Sleep waits d, returning nil, or returns ctx.Err() as soon as ctx ends. The timer is
// stopped either way, so an abandoned wait holds nothing.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
