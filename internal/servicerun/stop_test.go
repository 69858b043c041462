package servicerun

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

// waitClosed fails the test unless ch closes within a few seconds.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestWatchStopSignalsFirstDrainsSecondStopsAtOnce(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	drain, now, release := WatchStopSignals(context.Background(), sigs)
	defer release()
	sigs <- syscall.SIGTERM
	waitClosed(t, drain.Done(), "the drain at the first signal")
	if isClosed(now) {
		t.Fatal("the first signal stopped at once")
	}
	sigs <- syscall.SIGINT
	waitClosed(t, now, "the stop at once at the second signal")
}

// TestWatchStopSignalsParentEndCountsAsTheFirst: a drain that began because the parent
// ended (pkg/executor's Run when its context ends) is cut short by one signal.
func TestWatchStopSignalsParentEndCountsAsTheFirst(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	drain, now, release := WatchStopSignals(parent, sigs)
	defer release()
	cancel()
	waitClosed(t, drain.Done(), "the drain when the parent ended")
	sigs <- syscall.SIGTERM
	waitClosed(t, now, "the stop at once at the first signal after the parent ended")
}

func TestWatchStopSignalsReleaseEndsTheDrainOnly(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	drain, now, release := WatchStopSignals(context.Background(), sigs)
	release()
	waitClosed(t, drain.Done(), "the end of the drain context at release")
	if isClosed(now) {
		t.Fatal("release stopped at once")
	}
}
