package toolreg

import (
	"context"
	"encoding/json"
	"fmt"

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
		args, err := decodeArguments[A](raw)
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
