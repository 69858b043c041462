package tool

import (
	"context"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Tool is a typed Brain tool: A is its arguments type, from which the model-visible JSON
// Schema is derived and into which the model's arguments are decoded strictly (the same
// type, so the schema the model sees is the schema that is enforced); O is its output type.
//
// Call's output renders as follows: a string is the text of the result; a
// contracts.ToolOutput is used as is (images, staged state, explicit errors); any other
// value is rendered as JSON text. A returned *contracts.ToolError is what the model sees;
// any other error becomes "tool execution failed: {error}". Return
// contracts.UnavailableBeforeDispatch only with proof that the effect did not start: the
// executor then retries without counting a replay.
//
// Call runs concurrently for different calls, must honour ctx (its deadline is the tool's
// timeout) and must be safe to run again for the same operation when its capability says
// so. The methods other than Call must be constant.
type Tool[A, O any] interface {
	// ID is the implementation name; configuration entries refer to it (builtin: …).
	ID() string
	// Description is shown to the model when the configuration gives none.
	Description() string
	// Capability is what repeating the body means (see contracts.ToolRecoveryCapability).
	Capability() contracts.ToolRecoveryCapability
	// Call runs the body.
	Call(ctx context.Context, args A) (O, error)
}

// funcTool is the Tool built by [ToolFunc].
type funcTool[A, O any] struct {
	id, description string
	capability      contracts.ToolRecoveryCapability
	fn              func(context.Context, A) (O, error)
}

// ID, Description, Capability and Call implement Tool with the values given to ToolFunc.
func (t funcTool[A, O]) ID() string                                   { return t.id }
func (t funcTool[A, O]) Description() string                          { return t.description }
func (t funcTool[A, O]) Capability() contracts.ToolRecoveryCapability { return t.capability }
func (t funcTool[A, O]) Call(ctx context.Context, a A) (O, error)     { return t.fn(ctx, a) }

// ToolFunc makes a [Tool] of a function, for tools that need no state of their own:
//
//	executor.Register(x, executor.ToolFunc("shout", "Upper-cases text.",
//		contracts.CapabilityReplaySafe, func(ctx context.Context, a ShoutArgs) (string, error) {
//			return strings.ToUpper(a.Text), nil
//		}))
func ToolFunc[A, O any](id, description string, capability contracts.ToolRecoveryCapability,
	fn func(ctx context.Context, args A) (O, error)) Tool[A, O] {
	return funcTool[A, O]{id: id, description: description, capability: capability, fn: fn}
}

// Reconciler is implemented by a [Tool] that can find out, after a crash, whether a call
// of it ran. When the executor finds a never_replay call of the tool entered and never
// completed (its process died while the body ran), it calls Reconcile with the call's
// arguments — [IdempotencyKey] of ctx is the call's key, the one the body sent to the
// external system — instead of making the call indeterminate, and commits the answer:
// [contracts.Ran] completes the call with that output (no second run), [contracts.NotRun]
// runs the body again if the recovery policy's max_attempts allows (else the model reads
// "did not run"), [contracts.Unknown] leaves it indeterminate. An error, a panic or a
// timeout (executors.reconcile.timeout) counts as unknown and is retried with back-off up
// to executors.reconcile.attempts (docs/protocol.md, Recovery).
type Reconciler[A any] interface {
	Reconcile(ctx context.Context, args A) (contracts.Reconciled, error)
}

// reconciledTool is the Tool [WithReconcile] returns.
type reconciledTool[A, O any] struct {
	Tool[A, O]
	reconcile func(ctx context.Context, args A) (contracts.Reconciled, error)
}

// Reconcile implements [Reconciler].
func (t reconciledTool[A, O]) Reconcile(ctx context.Context, args A) (contracts.Reconciled, error) {
	return t.reconcile(ctx, args)
}

// WithReconcile returns t with the reconcile function fn (see [Reconciler]), for a tool
// built with [ToolFunc] or one that does not implement Reconcile itself:
//
//	executor.Register(x, executor.WithReconcile(charge,
//		func(ctx context.Context, a ChargeArgs) (contracts.Reconciled, error) {
//			return lookUpCharge(ctx, executor.IdempotencyKey(ctx)) // ran, not_run or unknown
//		}))
func WithReconcile[A, O any](t Tool[A, O], fn func(ctx context.Context, args A) (contracts.Reconciled, error)) Tool[A, O] {
	return reconciledTool[A, O]{Tool: t, reconcile: fn}
}
