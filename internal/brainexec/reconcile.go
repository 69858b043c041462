package brainexec

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

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
