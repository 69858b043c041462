package natstest

import (
	"context"
	"testing"
	"time"
)

// StopAtCleanup stops what the test started (a service, an executor, a stack) when the
// test ends, giving stop at most timeout to drain, and reports a failed stop as a test
// error. Cleanups run last-registered first, so register it after the server the thing
// talks to: it is stopped before the server goes away.
func StopAtCleanup(tb testing.TB, name string, timeout time.Duration, stop func(context.Context) error) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := stop(ctx); err != nil {
			tb.Errorf("stop %s: %v", name, err)
		}
	})
}
