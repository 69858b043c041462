package executor

import (
	"context"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The tests of this file stop an executor at once while a Go tool's body runs (as a crash
// leaves the call: entered, never completed) and start a second one, which gets the
// redelivered request.

// TestIdempotencyKeyIsStableAcrossARestart: a Go tool reads its key with IdempotencyKey.
// The first executor is stopped at once while the body runs (as a crash would leave it),
// a second one gets the redelivered request and runs the replay-safe tool again: both
// runs see the same key, the one derived from the call's operation id.
func TestIdempotencyKeyIsStableAcrossARestart(t *testing.T) {
	const cfgYAML = "policy: {default_behavior: allow}\nconsumers: {ack_wait: 1s}\ntools:\n" +
		"  - id: charge\n    capability: idempotent\n    recovery_policy: {mode: idempotent, max_attempts: 3}\n"
	ctx, srv, cfg := startStack(t, cfgYAML)
	keys := make(chan string, 4)
	executor := func(hang bool) loggedExecutor {
		x := newLoggedExecutor(t, srv, cfg)
		if err := Register(x.Executor, ToolFunc("charge", "Charges once per key.", contracts.CapabilityIdempotent,
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
		return x
	}

	run := runUntilSignalled(t, ctx, executor(true))
	submitOneCall(t, ctx, srv, "run-key", "charge")
	seen := []string{receiveFromTool(t, ctx, keys)}
	if got := IdempotencyKey(ctx); got != "" {
		t.Errorf("IdempotencyKey outside a tool body = %q, want empty", got)
	}
	run.stopAtOnce(t)

	res := awaitAfterRestart(t, ctx, srv, executor(false).Executor, "run-key")
	if len(res.Results) != 1 || res.Results[0].Outcome != contracts.OutcomeCompleted {
		t.Fatalf("results %+v", res.Results)
	}
	seen = append(seen, <-keys)
	want := contracts.IdempotencyKey(contracts.OperationID("run-key", 1, "c1"))
	if len(seen) != 2 || seen[0] != want || seen[1] != want {
		t.Errorf("keys %q, want %s on both runs", seen, want)
	}
}

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
	ctx, srv, cfg := startStack(t, cfgYAML)
	var mu sync.Mutex
	charged := map[string]int{} // the provider: idempotency key → charges
	entered := make(chan struct{}, 4)
	executor := func(hang bool) loggedExecutor {
		x := newLoggedExecutor(t, srv, cfg)
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
		if err := Register(x.Executor, WithReconcile(pay, status)); err != nil {
			t.Fatal(err)
		}
		return x
	}

	run := runUntilSignalled(t, ctx, executor(true))
	submitOneCall(t, ctx, srv, "run-pay", "pay")
	receiveFromTool(t, ctx, entered)
	run.stopAtOnce(t)

	res := awaitAfterRestart(t, ctx, srv, executor(false).Executor, "run-pay")
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
