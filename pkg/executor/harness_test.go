package executor

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
)

// startStack starts a dev stack from cfgYAML without its own brain-exec (the executor
// under test serves the Go tools) and returns it with the executor's view of the same
// config and a context that bounds the test.
func startStack(t *testing.T, cfgYAML string) (context.Context, *devserver.Server, *Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := devserver.StartTest(t, devserver.Options{ConfigYAML: []byte(cfgYAML), WithoutBrainExec: true})
	cfg, err := ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	return ctx, srv, cfg
}

// loggedExecutor is an executor whose log the test reads.
type loggedExecutor struct {
	*Executor
	logs *natstest.SyncBuffer
}

// newLoggedExecutor is an executor on srv, logging to a buffer.
func newLoggedExecutor(t *testing.T, srv *devserver.Server, cfg *Config) loggedExecutor {
	t.Helper()
	logs := &natstest.SyncBuffer{}
	x, err := New(cfg, Options{URL: srv.URL, Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	return loggedExecutor{Executor: x, logs: logs}
}

// signalledRun is an executor in Run, fed signals by the test as a terminal would send
// them.
type signalledRun struct {
	sigs chan os.Signal
	done chan error
}

// runUntilSignalled starts x's Run loop and waits until it logs that it is ready.
func runUntilSignalled(t *testing.T, ctx context.Context, x loggedExecutor) *signalledRun {
	t.Helper()
	r := &signalledRun{sigs: make(chan os.Signal, 2), done: make(chan error, 1)}
	go func() { r.done <- x.run(ctx, r.sigs) }()
	natstest.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(x.logs.String(), `"message":"ready"`) }, "the executor to be ready")
	return r
}

// stopAtOnce sends the two signals that cut the drain short, as a crash would leave the
// call it runs: entered and never completed.
func (r *signalledRun) stopAtOnce(t *testing.T) {
	t.Helper()
	r.sigs <- syscall.SIGTERM
	r.sigs <- syscall.SIGINT
	if err := <-r.done; !errors.Is(err, servicerun.ErrStoppedAtOnce) {
		t.Fatalf("executor: %v, want ErrStoppedAtOnce", err)
	}
}

// submitOneCall submits step 1 of runID: one call, c1, of toolID.
func submitOneCall(t *testing.T, ctx context.Context, srv *devserver.Server, runID, toolID string) {
	t.Helper()
	if _, err := srv.Client.Submit(ctx, contracts.BatchSubmission{RunID: runID, ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{toolID}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: toolID}}}); err != nil {
		t.Fatal(err)
	}
}

// receiveFromTool waits for the tool body to send on ch (it runs), or fails the test when
// ctx ends first.
func receiveFromTool[T any](t *testing.T, ctx context.Context, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatal("the tool never ran")
		var zero T
		return zero
	}
}

// awaitAfterRestart starts x with Start (the restarted executor) and returns step 1 of
// runID's results.
func awaitAfterRestart(t *testing.T, ctx context.Context, srv *devserver.Server, x *Executor, runID string) *client.BatchResult {
	t.Helper()
	r, err := x.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	res, err := srv.Client.Await(ctx, runID, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
