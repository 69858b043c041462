package execcore

import (
	"context"
	"encoding/json"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Invocation is one attempt of one call as an [Invoker] sees it: who the call is (its
// run, step and call ids and its durable operation id), what to run (the configured tool
// id and the model's arguments) and which attempt this is. It is plain data apart from the
// body-start hook, so an Invoker may copy it freely.
type Invocation struct {
	RunID  string
	Step   int64
	Index  int
	CallID string
	// OperationID is "{batch_id}:{call_key}", the key of every exactly-once check. A tool
	// that talks to an external system sends [Invocation.IdempotencyKey], derived from it.
	OperationID string
	// ToolID is the configured tool id the model called (not the implementation name a
	// configuration entry may map it to).
	ToolID string
	// Arguments are the model's raw JSON arguments, exactly as submitted.
	Arguments json.RawMessage
	// Attempt counts executor entries of this call from 1; a recovery after a crash under
	// a replayable policy runs attempt n+1. Local retries after an
	// UnavailableBeforeDispatch error keep the attempt.
	Attempt uint16

	beginBody func(ctx context.Context, inv Invocation) error
}

// IdempotencyKey is the call's idempotency key ([contracts.IdempotencyKey] of its
// operation id): the same for every attempt, so a provider that deduplicates by it runs
// the effect once however often the body runs.
func (inv Invocation) IdempotencyKey() string {
	if inv.OperationID == "" {
		return ""
	}
	return contracts.IdempotencyKey(inv.OperationID)
}

// BeginBody must be called by an Invoker immediately before the tool body starts, after
// every check that can fail without running it (lookup, argument decoding). It records
// the start in the body-run ledger when the executor has one, which is how tests and the
// chaos checker prove how many times each operation's body ran. An error means the start
// could not be recorded; the Invoker must then not run the body and should return the
// error as it is (it is an UnavailableBeforeDispatch error, so the executor retries
// without counting a replay). On an Invocation built by hand it does nothing.
func (inv Invocation) BeginBody(ctx context.Context) error {
	if inv.beginBody == nil {
		return nil
	}
	return inv.beginBody(ctx, inv)
}

// Invoker runs the body of one tool call. The executor core calls it with a context that
// carries the invocation (see [InvocationFrom]) and ends at the tool's timeout or when the
// executor shuts down; a body must honour it.
//
// Return a *contracts.ToolError to choose the error the model sees; return
// [contracts.UnavailableBeforeDispatch] only with proof that the effect did not start (the
// core then retries locally). Any other error becomes an execution error. The returned
// output's call id and normalisation are taken care of by the core. An Invoker is called
// concurrently from several workers and must be safe for that.
type Invoker interface {
	Invoke(ctx context.Context, inv Invocation) (contracts.ToolOutput, error)
}

// InvokerFunc adapts a function to [Invoker].
type InvokerFunc func(ctx context.Context, inv Invocation) (contracts.ToolOutput, error)

// Invoke calls f.
func (f InvokerFunc) Invoke(ctx context.Context, inv Invocation) (contracts.ToolOutput, error) {
	return f(ctx, inv)
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv, as the core hands it to an [Invoker]. Custom
// executors and tests that call an Invoker directly use it to give tools the same view.
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the invocation a tool body is running for, so a tool can read its
// operation id (its idempotency key), its configured tool id or its attempt.
func InvocationFrom(ctx context.Context) (Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(Invocation)
	return inv, ok
}

// OperationID returns the durable operation id of the call whose body runs under ctx, or
// "" outside an invocation.
func OperationID(ctx context.Context) string {
	inv, _ := InvocationFrom(ctx)
	return inv.OperationID
}

// IdempotencyKey returns the idempotency key of the call whose body runs under ctx (see
// [Invocation.IdempotencyKey]), or "" outside an invocation.
func IdempotencyKey(ctx context.Context) string {
	inv, _ := InvocationFrom(ctx)
	return inv.IdempotencyKey()
}
