package tool

import (
	"context"
	"encoding/json"
	"math"

	"github.com/awaken-dev/awaken/internal/toolctx"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Invocation is one attempt of one call as a tool body (or the executor's invoker) sees
// it: who the call is (its run, step and call ids and its durable operation id), what to
// run (the configured tool id and the model's arguments) and which attempt this is. It is
// plain data, so it may be copied and built freely (tests of a tool body build one and
// give it with [WithInvocation]).
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

// BeginBody must be called by an invoker immediately before the tool body starts, after
// every check that can fail without running it (lookup, argument decoding). It records
// the start in the body-run ledger when the executor has one, which is how tests and the
// chaos checker prove how many times each operation's body ran. An error means the start
// could not be recorded; the invoker must then not run the body and should return the
// error as it is (it is an UnavailableBeforeDispatch error, so the executor retries
// without counting a replay).
//
// The ledger hook travels in ctx, installed by the executor core only: under any other
// context (a test, a body run by hand) BeginBody does nothing.
func (inv Invocation) BeginBody(ctx context.Context) error {
	if f := toolctx.BodyStart(ctx); f != nil {
		return f(ctx)
	}
	return nil
}

type invocationKey struct{}

// WithInvocation returns ctx carrying inv, as the executor hands it to a tool body. Custom
// invokers and tests that call a tool directly use it to give the body the same view.
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return context.WithValue(ctx, invocationKey{}, inv)
}

// InvocationFrom returns the invocation a tool body is running for, so a tool can read its
// operation id (its idempotency key), its configured tool id or its attempt; false outside
// a tool body.
func InvocationFrom(ctx context.Context) (Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(Invocation)
	return inv, ok
}

// OperationID returns the durable operation id of the call whose body runs under ctx, or
// "" outside a tool body.
func OperationID(ctx context.Context) string {
	inv, _ := InvocationFrom(ctx)
	return inv.OperationID
}

// IdempotencyKey returns the idempotency key of the call whose body runs under ctx, ""
// outside a tool body. It is a UUID (version 5) derived from the call's operation id alone
// — never from the attempt — so it is the same on every execution of the call: a
// redelivery, a replay after a crash (for a tool whose recovery policy allows one), the run
// after an approval, an executor restarted elsewhere. A tool whose effect lives in another
// system sends it there, so that system performs the effect once however often the body
// runs:
//
//	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://api.example.com/v1/charges", body)
//	req.Header.Set("Idempotency-Key", executor.IdempotencyKey(ctx))
//
// It is what makes a tool declared idempotent (capability idempotent) actually so.
func IdempotencyKey(ctx context.Context) string {
	inv, _ := InvocationFrom(ctx)
	return inv.IdempotencyKey()
}

// ReportProgress tells the platform how far a long tool body is: progress increases with
// every report, total is its end when known (0 when not), message says what is happening.
// The executor publishes the reports as io.awaken.tool.progress.v1 events on the run's
// events subject, at most one per 250 ms per call and always the last one; the console and
// `awaken batch watch` show them. Progress is a fact, never a result: it does not reach the
// call's record or its result, a report may be dropped, and reporting never blocks the
// body. Outside a tool body it does nothing.
func ReportProgress(ctx context.Context, progress, total float64, message string) {
	if f := toolctx.Progress(ctx); f != nil {
		f(progress, total, message)
	}
}

// ReportCost tells the executor what this call cost, in the unit of the host's budget
// limits (dollars, tokens, credits — whatever the configuration's tool costs are in).
// The tool's configured cost is what the gate reserved against a budget before the call
// ran; once the call completes, the budget is charged the reported amount instead, so the
// next calls are decided against what was really spent. The last report wins; a negative
// or non-finite amount is ignored (the reservation stands). A call that reports nothing
// keeps its configured cost. Outside a tool body it does nothing.
func ReportCost(ctx context.Context, amount float64) {
	if f := toolctx.Cost(ctx); f != nil && amount >= 0 && !math.IsInf(amount, 0) {
		f(amount)
	}
}
