package brainexec

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// reconcileBinder decodes a call's raw arguments for the tool's reconcile function.
type reconcileBinder func(args json.RawMessage) (func(ctx context.Context) (contracts.Reconciled, error), error)

// bindReconcile returns the binder of t's reconcile function, nil when t has none.
func bindReconcile[A, O any](t tool.Tool[A, O]) reconcileBinder {
	rc, ok := t.(tool.Reconciler[A])
	if !ok {
		return nil
	}
	return func(raw json.RawMessage) (func(ctx context.Context) (contracts.Reconciled, error), error) {
		args, err := contracts.DecodeArguments[A](raw)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (contracts.Reconciled, error) { return rc.Reconcile(ctx, args) }, nil
	}
}

// CanReconcile reports whether implementation impl is registered, unambiguously, with a
// reconcile function.
func (r *Registry) CanReconcile(impl string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.tools[impl]
	return ok && !e.ambiguous && e.reconcile != nil
}

// ReconcileAs calls the reconcile function of implementation impl for inv.
func (r *Registry) ReconcileAs(ctx context.Context, impl string, inv tool.Invocation) (contracts.Reconciled, error) {
	r.mu.RLock()
	e, ok := r.tools[impl]
	r.mu.RUnlock()
	if !ok || e.ambiguous || e.reconcile == nil {
		return contracts.Reconciled{}, fmt.Errorf("tool %s has no reconcile function", impl)
	}
	run, err := e.reconcile(inv.Arguments)
	if err != nil {
		return contracts.Reconciled{}, err
	}
	return run(ctx)
}

// Reconciles reports whether a call of configured tool toolID is reconciled after a
// crash: its Go implementation has a reconcile function, or it is an MCP tool whose server
// configures a companion (executors.mcp[].reconcile).
func (i *invoker) Reconciles(toolID string) bool {
	t, ok := i.cfg.Tool(toolID)
	if !ok || t.Target != contracts.TargetBrain {
		return false
	}
	if i.mcp != nil && i.mcp.Owns(toolID) {
		_, ok := i.cfg.MCPReconcileTool(toolID)
		return ok
	}
	return i.reg.CanReconcile(implementationOf(t))
}

// Reconcile asks the reconcile function of inv's tool (see [Invoker.Reconciles]).
func (i *invoker) Reconcile(ctx context.Context, inv tool.Invocation) (contracts.Reconciled, error) {
	if i.mcp != nil && i.mcp.Owns(inv.ToolID) {
		companion, ok := i.cfg.MCPReconcileTool(inv.ToolID)
		if !ok {
			return contracts.Reconciled{}, fmt.Errorf("mcp tool %s has no reconcile companion", inv.ToolID)
		}
		return reconcileByCompanion(ctx, i.mcp, companion, inv)
	}
	t, ok := i.cfg.Tool(inv.ToolID)
	if !ok {
		return contracts.Reconciled{}, contracts.ErrUnknownTool(inv.ToolID)
	}
	return i.reg.ReconcileAs(ctx, implementationOf(t), inv)
}

// reconcileByCompanion calls the companion tool with the call's own arguments and its
// operation id and idempotency key in _meta (exactly as the call itself was sent), and
// reads its answer. A companion result that is an error, or not the JSON answer, fails.
func reconcileByCompanion(ctx context.Context, b mcpInvoker, companion string, inv tool.Invocation) (contracts.Reconciled, error) {
	args := inv.Arguments
	if len(strings.TrimSpace(string(args))) == 0 {
		args = json.RawMessage(`{}`)
	}
	out, err := b.Invoke(ctx, companion, args, inv.OperationID)
	if err != nil {
		return contracts.Reconciled{}, fmt.Errorf("companion %s: %w", companion, err)
	}
	if out.IsError {
		return contracts.Reconciled{}, fmt.Errorf("companion %s answered an error: %s", companion, truncateText(out.Text(), 256))
	}
	raw := []byte(out.Text())
	if out.StructuredContent != nil {
		raw = out.StructuredContent
	}
	res, err := contracts.DecodeReconcileAnswer(inv.CallID, raw)
	if err != nil {
		return contracts.Reconciled{}, fmt.Errorf("companion %s: %w", companion, err)
	}
	return res, nil
}

// mcpInvoker is the part of the MCP bridge a reconcile companion is called through.
type mcpInvoker interface {
	Owns(toolID string) bool
	Invoke(ctx context.Context, toolID string, args json.RawMessage, operationID string) (contracts.ToolOutput, error)
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
