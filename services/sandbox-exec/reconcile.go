package sandboxexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// reconcileSuffix names, in the engine, the reconcile module loaded beside a tool's own.
// Configured tool ids hold no spaces (internal/config refuses them), so
// "{tool id} reconcile" is never another tool's id.
const reconcileSuffix = " reconcile"

// Reconciles reports whether sandbox tool toolID configures a reconcile module.
func (i *invoker) Reconciles(toolID string) bool {
	t, ok := i.cfg.Tool(toolID)
	return ok && t.Target == contracts.TargetSandbox && t.ReconcileModule != ""
}

// Reconcile runs the tool's reconcile module like the tool itself — the call's arguments on
// stdin, its operation id and idempotency key in the environment, the tool's limits — and
// reads its stdout as the answer {"outcome": ran|not_run|unknown, "output"?: text}.
func (i *invoker) Reconcile(ctx context.Context, inv execcore.Invocation) (contracts.Reconciled, error) {
	if i.engine == nil {
		return contracts.Reconciled{}, errors.New("sandbox executor unavailable")
	}
	t, ok := i.cfg.Tool(inv.ToolID)
	if !ok || t.ReconcileModule == "" {
		return contracts.Reconciled{}, fmt.Errorf("sandbox tool %s has no reconcile module", inv.ToolID)
	}
	id := t.ID + reconcileSuffix
	if !i.isLoaded(id) {
		if err := i.loadReconcile(ctx, t); err != nil {
			return contracts.Reconciled{}, err
		}
	}
	args := bytes.TrimSpace(inv.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	res, err := i.engine.Invoke(ctx, sandbox.Request{ToolID: id, OperationID: inv.OperationID,
		IdempotencyKey: inv.IdempotencyKey(), Args: args})
	if err != nil {
		if errors.Is(err, sandbox.ErrModuleUnavailable) {
			i.mu.Lock()
			i.loaded[id] = false
			i.mu.Unlock()
		}
		return contracts.Reconciled{}, fmt.Errorf("reconcile module: %w", err)
	}
	return contracts.DecodeReconcileAnswer(inv.CallID, res.Stdout)
}

// loadReconcile loads t's reconcile module with t's limits.
func (i *invoker) loadReconcile(ctx context.Context, t config.Tool) error {
	id := t.ID + reconcileSuffix
	err := i.engine.Load(ctx, id, sandbox.ModuleConfig{
		Path:           i.cfg.ReconcileModulePath(t),
		MemoryLimitMiB: t.MemoryLimitMiB,
		Timeout:        t.Timeout.D(),
		MaxOutputBytes: t.MaxOutputBytes,
	})
	i.mu.Lock()
	i.loaded[id] = err == nil
	i.mu.Unlock()
	return err
}
