package executor

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
)

// TestReconcileAfterARestart is the key case through the public API: a
// never_replay Go tool registered WithReconcile charges a fake provider (deduplicating by
// idempotency key), and its executor is stopped at once before it can commit — as a crash
// leaves it, entered and never completed. A second executor gets the redelivered request,
// asks the reconcile, which finds the charge under the call's key, and the batch publishes
// the call completed with the reconciled output: the body ran once (the provider counts
// its charges). Before the reconcile hook the call was published indeterminate.
func TestReconcileAfterARestart(t *testing.T) {
	const cfgYAML = "policy: {default_behavior: allow}\nconsumers: {ack_wait: 1s}\n" +
		"executors: {reconcile: {backoff: 10ms, timeout: 5s}}\ntools:\n  - id: pay\n"
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
	var mu sync.Mutex
	charged := map[string]int{} // the provider: idempotency key → charges
	entered := make(chan struct{}, 4)
	executor := func(hang bool) (*Executor, *natstest.SyncBuffer) {
		logs := &natstest.SyncBuffer{}
		x, err := New(cfg, Options{URL: srv.URL, Log: logs})
		if err != nil {
			t.Fatal(err)
		}
		pay := ToolFunc("pay", "Pays.", contracts.CapabilityNonRecoverable, func(ctx context.Context, _ struct{}) (string, error) {
			mu.Lock()
			charged[IdempotencyKey(ctx)]++
			mu.Unlock()
			entered <- struct{}{}
			if hang {
				<-ctx.Done() // the process goes away before the outcome is committed
				return "", ctx.Err()
			}
			return "paid", nil
		})
		status := func(ctx context.Context, _ struct{}) (contracts.Reconciled, error) {
			mu.Lock()
			defer mu.Unlock()
			if charged[IdempotencyKey(ctx)] == 0 {
				return contracts.NotRun(), nil
			}
			return contracts.Ran(contracts.TextOutput("", "paid (reconciled)")), nil
		}
		if err := Register(x, WithReconcile(pay, status)); err != nil {
			t.Fatal(err)
		}
		return x, logs
	}

	first, logs := executor(true)
	sigs := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() { done <- first.run(ctx, sigs) }()
	natstest.WaitFor(t, 30*time.Second, func() bool { return strings.Contains(logs.String(), `"message":"ready"`) }, "the executor to be ready")
	if _, err := srv.Client.Submit(ctx, contracts.BatchSubmission{RunID: "run-pay", ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"pay"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "pay"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the tool never ran")
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
	res, err := srv.Client.Await(ctx, "run-pay", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].Outcome != contracts.OutcomeCompleted || res.Results[0].Output.Text() != "paid (reconciled)" {
		t.Fatalf("results %+v, want completed \"paid (reconciled)\"", res.Results)
	}
	key := contracts.IdempotencyKey(contracts.OperationID("run-pay", 1, "c1"))
	mu.Lock()
	defer mu.Unlock()
	if len(charged) != 1 || charged[key] != 1 {
		t.Errorf("charges %v, want one under %s (the body ran once)", charged, key)
	}
}
