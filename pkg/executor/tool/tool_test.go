package tool_test

import (
	"context"
	"errors"
	"testing"

	"github.com/awaken-dev/awaken/internal/toolctx"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// TestInvocationOutsideAnExecutor: everything a body may ask is harmless outside an
// executor — no invocation, empty ids, BeginBody and ReportProgress do nothing — so a tool
// body can be unit-tested by calling it.
func TestInvocationOutsideAnExecutor(t *testing.T) {
	ctx := context.Background()
	if _, ok := tool.InvocationFrom(ctx); ok {
		t.Error("InvocationFrom found an invocation in a bare context")
	}
	if got := tool.OperationID(ctx); got != "" {
		t.Errorf("OperationID = %q, want empty", got)
	}
	if got := tool.IdempotencyKey(ctx); got != "" {
		t.Errorf("IdempotencyKey = %q, want empty", got)
	}
	if err := (tool.Invocation{OperationID: "tool-batch:r:1:c"}).BeginBody(ctx); err != nil {
		t.Errorf("BeginBody outside an executor: %v", err)
	}
	tool.ReportProgress(ctx, 1, 2, "nobody listens")
}

// TestInvocationCarriedByTheContext: what WithInvocation puts in is what a body reads, and
// the idempotency key depends on the operation id alone.
func TestInvocationCarriedByTheContext(t *testing.T) {
	op := contracts.OperationID("run-1", 2, "call_1")
	inv := tool.Invocation{RunID: "run-1", Step: 2, CallID: "call_1", OperationID: op, ToolID: "shout", Attempt: 3}
	ctx := tool.WithInvocation(context.Background(), inv)
	got, ok := tool.InvocationFrom(ctx)
	if !ok || got.CallID != "call_1" || got.ToolID != "shout" || got.Attempt != 3 {
		t.Fatalf("InvocationFrom = %+v, %v", got, ok)
	}
	if tool.OperationID(ctx) != op {
		t.Errorf("OperationID = %q, want %q", tool.OperationID(ctx), op)
	}
	want := contracts.IdempotencyKey(op)
	if tool.IdempotencyKey(ctx) != want || inv.IdempotencyKey() != want {
		t.Errorf("IdempotencyKey = %q / %q, want %q", tool.IdempotencyKey(ctx), inv.IdempotencyKey(), want)
	}
	again := inv
	again.Attempt = 4
	if again.IdempotencyKey() != want {
		t.Error("the idempotency key changed with the attempt")
	}
}

// TestTheExecutorHooks: BeginBody and ReportProgress reach the hooks the executor core
// installs in the body's context, and BeginBody's error is returned as it is (the invoker
// must then not run the body).
func TestTheExecutorHooks(t *testing.T) {
	errLedger := errors.New("ledger down")
	var starts int
	var reports []float64
	ctx := toolctx.WithBodyStart(context.Background(), func(context.Context) error { starts++; return errLedger })
	ctx = toolctx.WithProgress(ctx, func(progress, _ float64, _ string) { reports = append(reports, progress) })
	if err := (tool.Invocation{}).BeginBody(ctx); !errors.Is(err, errLedger) || starts != 1 {
		t.Errorf("BeginBody = %v after %d starts, want the ledger's error after 1", err, starts)
	}
	tool.ReportProgress(ctx, 1, 3, "a")
	tool.ReportProgress(ctx, 2, 3, "b")
	if len(reports) != 2 || reports[1] != 2 {
		t.Errorf("reports %v, want [1 2]", reports)
	}
}

type shoutArgs struct {
	Text string `json:"text"`
}

// TestToolFuncAndWithReconcile: a ToolFunc is its arguments, and WithReconcile keeps the
// tool and adds the Reconciler the executor looks for.
func TestToolFuncAndWithReconcile(t *testing.T) {
	shout := tool.ToolFunc("shout", "Shouts.", contracts.CapabilityReplaySafe,
		func(_ context.Context, a shoutArgs) (string, error) { return a.Text + "!", nil })
	if shout.ID() != "shout" || shout.Description() != "Shouts." || shout.Capability() != contracts.CapabilityReplaySafe {
		t.Errorf("ToolFunc = %s %q %s", shout.ID(), shout.Description(), shout.Capability())
	}
	if _, ok := shout.(tool.Reconciler[shoutArgs]); ok {
		t.Error("a plain ToolFunc claims a reconcile function")
	}
	rec := tool.WithReconcile(shout, func(context.Context, shoutArgs) (contracts.Reconciled, error) {
		return contracts.NotRun(), nil
	})
	if out, err := rec.Call(context.Background(), shoutArgs{Text: "hi"}); err != nil || out != "hi!" {
		t.Errorf("Call = %q, %v", out, err)
	}
	rc, ok := rec.(tool.Reconciler[shoutArgs])
	if !ok {
		t.Fatal("WithReconcile's tool is not a Reconciler")
	}
	if r, err := rc.Reconcile(context.Background(), shoutArgs{}); err != nil || r.Outcome != contracts.ReconcileNotRun {
		t.Errorf("Reconcile = %+v, %v", r, err)
	}
}
