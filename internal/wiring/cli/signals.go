package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/awaken-dev/awaken/internal/servicerun"
)

// Command runs the awaken process: [Main] under SIGINT and SIGTERM. The first signal
// cancels the context Main runs with — a graceful stop: the services finish what they
// are handling, bounded — and a second signal stops at once (see [stopNow]); a third is
// left to the runtime's default, which kills the process ([servicerun.WatchStopSignals]).
func Command(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, now, release := servicerun.WatchStopSignals(context.Background(), sigs)
	defer release()
	return Main(withStopNow(ctx, now), args, stdout, stderr)
}

type stopNowKey struct{}

// withStopNow attaches now, closed on the second signal, to ctx. A context value, not a
// parameter: the graceful stop starts when ctx is cancelled, and only the commands that
// run services ask for the hard stop.
func withStopNow(ctx context.Context, now <-chan struct{}) context.Context {
	return context.WithValue(ctx, stopNowKey{}, now)
}

// stopNow returns the channel closed on a second signal (nil — never — without one).
func stopNow(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(stopNowKey{}).(<-chan struct{})
	return ch
}
