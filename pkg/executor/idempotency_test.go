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

// TestIdempotencyKeyIsStableAcrossARestart: a Go tool reads its key with IdempotencyKey.
// The first executor is stopped at once while the body runs (as a crash would leave it),
// a second one gets the redelivered request and runs the replay-safe tool again: both
// runs see the same key, the one derived from the call's operation id.
func TestIdempotencyKeyIsStableAcrossARestart(t *testing.T) {
	const cfgYAML = "policy: {default_behavior: allow}\nconsumers: {ack_wait: 1s}\ntools:\n" +
		"  - id: charge\n    capability: idempotent\n    recovery_policy: {mode: idempotent, max_attempts: 3}\n"
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
	keys := make(chan string, 4)
	executor := func(hang bool) (*Executor, *natstest.SyncBuffer) {
		logs := &natstest.SyncBuffer{}
		x, err := New(cfg, Options{URL: srv.URL, Log: logs})
		if err != nil {
			t.Fatal(err)
		}
		if err := Register(x, ToolFunc("charge", "Charges once per key.", contracts.CapabilityIdempotent,
			func(ctx context.Context, _ struct{}) (string, error) {
				keys <- IdempotencyKey(ctx)
				if hang {
					<-ctx.Done()
					return "", ctx.Err()
				}
				return "charged", nil
			})); err != nil {
			t.Fatal(err)
		}
		return x, logs
	}

	first, logs := executor(true)
	sigs := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() { done <- first.run(ctx, sigs) }()
	natstest.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), `"message":"ready"`) }, "the executor to be ready")
	if _, err := srv.Client.Submit(ctx, contracts.BatchSubmission{RunID: "run-key", ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"charge"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "charge"}}}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	select {
	case k := <-keys:
		seen = append(seen, k)
	case <-ctx.Done():
		t.Fatal("the tool never ran")
	}
	if got := IdempotencyKey(ctx); got != "" {
		t.Errorf("IdempotencyKey outside a tool body = %q, want empty", got)
	}
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGINT
	if err := <-done; !errors.Is(err, app.ErrStoppedAtOnce) {
		t.Fatalf("first executor: %v, want ErrStoppedAtOnce", err)
	}

	second, _ := executor(false)
	r, err := second.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	res, err := srv.Client.Await(ctx, "run-key", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != contracts.OutcomeCompleted {
		t.Fatalf("results %+v", res.Results)
	}
	seen = append(seen, <-keys)
	want := contracts.IdempotencyKey(contracts.OperationID("run-key", 1, "c1"))
	if len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Errorf("keys %q, want %s on both runs", seen, want)
	}
}
