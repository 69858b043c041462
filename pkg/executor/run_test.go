package executor

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
)

// TestRunStopsOnSignals: the first signal drains and logs the call it waits for; a second
// one stops at once, saying what happens to that call.
func TestRunStopsOnSignals(t *testing.T) {
	const cfgYAML = "policy: {default_behavior: allow}\ntools:\n  - id: hang\n    capability: non_recoverable\n"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{ConfigYAML: []byte(cfgYAML), WithoutBrainExec: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	cfg, err := ParseConfig([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	logs := &natstest.SyncBuffer{}
	x, err := New(cfg, Options{URL: srv.URL, Log: logs})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	if err := Register(x, ToolFunc("hang", "Runs until cancelled.", contracts.CapabilityNonRecoverable,
		func(ctx context.Context, _ struct{}) (string, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return "", ctx.Err()
		})); err != nil {
		t.Fatal(err)
	}
	sigs := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() { done <- x.run(ctx, sigs) }()
	natstest.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), `"message":"ready"`) }, "the executor to be ready")
	if _, err := srv.Client.Submit(ctx, contracts.BatchSubmission{RunID: "run-sig", ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"hang"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "hang"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the tool never ran")
	}
	sigs <- syscall.SIGTERM
	natstest.WaitFor(t, 30*time.Second, func() bool {
		return strings.Contains(logs.String(), "stopping: waiting until ") && strings.Contains(logs.String(), "brain-exec c1 of tool-batch:run-sig:1")
	}, "the drain to say what it waits for")
	sigs <- syscall.SIGINT
	select {
	case err := <-done:
		if !errors.Is(err, app.ErrStoppedAtOnce) {
			t.Errorf("run: %v, want ErrStoppedAtOnce", err)
		}
	case <-time.After(20 * time.Second): // below the 30 s drain
		t.Fatal("the second signal did not stop the executor at once")
	}
	if !strings.Contains(logs.String(), "second signal: stopping at once") {
		t.Errorf("the log does not say the stop was cut short:\n%s", logs.String())
	}
}
