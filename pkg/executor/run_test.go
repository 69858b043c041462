package executor

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestRunStopsOnSignals: the first signal drains and logs the call it waits for; a second
// one stops at once, saying what happens to that call.
func TestRunStopsOnSignals(t *testing.T) {
	const cfgYAML = "policy: {default_behavior: allow}\ntools:\n  - id: hang\n    capability: non_recoverable\n"
	ctx, srv, cfg := startStack(t, cfgYAML)
	x := newLoggedExecutor(t, srv, cfg)
	entered := make(chan struct{}, 1)
	if err := Register(x.Executor, ToolFunc("hang", "Runs until cancelled.", contracts.CapabilityNonRecoverable,
		func(ctx context.Context, _ struct{}) (string, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})); err != nil {
		t.Fatal(err)
	}
	run := runUntilSignalled(t, ctx, x)
	submitOneCall(t, ctx, srv, "run-sig", "hang")
	receiveFromTool(t, ctx, entered)
	run.sigs <- syscall.SIGTERM
	natstest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(x.logs.String(), "stopping: waiting until ") && strings.Contains(x.logs.String(), "brain-exec c1 of tool-batch:run-sig:1")
	}, "the drain to say what it waits for")
	run.sigs <- syscall.SIGINT
	select {
	case err := <-run.done:
		if !errors.Is(err, servicerun.ErrStoppedAtOnce) {
			t.Errorf("run: %v, want ErrStoppedAtOnce", err)
		}
	case <-time.After(20 * time.Second): // below the 30 s drain
		t.Fatal("the second signal did not stop the executor at once")
	}
	if !strings.Contains(x.logs.String(), "second signal: stopping at once") {
		t.Errorf("the log does not say the stop was cut short:\n%s", x.logs.String())
	}
}
