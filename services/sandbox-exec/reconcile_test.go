package sandboxexec_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	sandboxexec "github.com/awaken-dev/awaken/services/sandbox-exec"
)

// countingEngine counts the engine's runs per tool id.
type countingEngine struct {
	sandboxexec.Engine
	mu   sync.Mutex
	runs map[string]int
}

func (c *countingEngine) Invoke(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	c.mu.Lock()
	c.runs[req.ToolID]++
	c.mu.Unlock()
	return c.Engine.Invoke(ctx, req)
}

// TestReconcileModuleAfterCrash: a never_replay sandbox tool configures reconcile_module.
// The executor dies after the tool's module ran (the in-tool fault); the redelivery runs
// the reconcile module instead of making the call indeterminate — with the call's
// arguments on stdin and its idempotency key in the environment — and the call completes
// with the output the module answered; the tool's module ran once. Without the
// reconcile module (what every sandbox call had before) the call ends indeterminate.
func TestReconcileModuleAfterCrash(t *testing.T) {
	probe := buildWasm(t, "probe.wasm", "../../internal/sandbox/testdata/probe")
	reconciler := buildWasm(t, "reconciler.wasm", "./testdata/reconciler")
	cache, err := sandboxtest.New(probe, reconciler)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cache.Close() })
	for _, withModule := range []bool{true, false} {
		t.Run(fmt.Sprintf("reconcile_module=%v", withModule), func(t *testing.T) {
			line := ""
			if withModule {
				line = "\n    reconcile_module: " + reconciler
			}
			e := exectest.New(t, fmt.Sprintf(`
tools:
  - id: probe
    target: sandbox
    module: %s%s
    timeout: 10s
executors:
  sandbox:
    enabled: true
`, probe, line))
			e.SetFault(exectest.FailTimes(pipeline.FaultInTool, 1, nil))
			engine, err := sandbox.NewEngine(e.Ctx, sandbox.EngineOptions{CacheDir: cache.Dir})
			if err != nil {
				t.Fatal(err)
			}
			counting := &countingEngine{Engine: engine, runs: map[string]int{}}
			s, err := sandboxexec.StartWithEngine(e.Ctx, e.Env, counting, exectest.FastRetries()...)
			if err != nil {
				t.Fatal(err)
			}
			stopOnCleanup(t, s)
			c := exectest.Call{RunID: "run-rc", Step: 1, CallID: "call_rc", ToolID: "probe", Args: `{"amount":3}`,
				Target: contracts.TargetSandbox, Policy: contracts.DefaultRecoveryPolicy()}
			e.Allow(c)
			rec := e.WaitTerminal(c)
			counting.mu.Lock()
			toolRuns := counting.runs["probe"]
			counting.mu.Unlock()
			if toolRuns != 1 {
				t.Errorf("tool module ran %d times, want 1", toolRuns)
			}
			if !withModule {
				if rec.Phase.Kind != contracts.PhaseIndeterminate {
					t.Fatalf("phase %s, want Indeterminate", rec.Phase.Kind)
				}
				return
			}
			got, isErr := exectest.Text(t, rec)
			want := "reconciled " + contracts.IdempotencyKey(c.Op()) + ` {"amount":3}`
			if rec.Phase.Kind != contracts.PhaseCompleted || isErr || strings.TrimSpace(got) != want {
				t.Fatalf("phase %s %q output %q (error %v), want Completed %q", rec.Phase.Kind, rec.Phase.Reason, got, isErr, want)
			}
			if len(rec.Reconciles) != 1 || rec.Reconciles[0].Outcome != contracts.ReconcileRan {
				t.Errorf("reconciles %+v, want one, ran", rec.Reconciles)
			}
		})
	}
}
