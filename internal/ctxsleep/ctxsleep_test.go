package ctxsleep_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/ctxsleep"
)

func TestSleepElapses(t *testing.T) {
	if err := ctxsleep.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil once the duration has passed", err)
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An hour: the call only returns because the context has ended.
	if err := ctxsleep.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
}
