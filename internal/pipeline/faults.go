package pipeline

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
)

// This file is the only place the fault hook is called. Fault injection is test
// machinery: a handler returns the steps of its operation — the state change it commits,
// what that change implies and it publishes (effects.go) — and the effects runtime runs
// the fault point at each step's boundary, so no handler body calls the hook
// (internal/archrules checks it).

// FaultPoint names a step boundary where tests inject crashes: the consume loop's own
// ([bus.FaultAfterHandlerBeforeAck]) and the handlers' below are one kind, one type.
type FaultPoint = bus.FaultPoint

const (
	// FaultAfterCommit fires after a handler's state change and before its publishes.
	FaultAfterCommit FaultPoint = "after-commit"
	// FaultAfterPublish fires after a handler's publishes and before the ack.
	FaultAfterPublish FaultPoint = "after-publish"
	// FaultInTool fires inside a tool body, after the executor entered it.
	FaultInTool FaultPoint = "in-tool"
	// FaultInReconcile fires after a reconcile answered and before its outcome is
	// committed (execcore's reconcile of a call found entered after a crash).
	FaultInReconcile FaultPoint = "in-reconcile"
)

// FaultHook is called at every fault point with the service name and the operation id.
// A non-nil error aborts the handler there as if the process died (the message is not
// acked). It is nil in production: only test wiring sets it.
type FaultHook func(ctx context.Context, service string, point FaultPoint, operationID string) error

// operation is one operation of a service's handler — a call, a batch, a probe, named by
// its operation id — whose steps the effects runtime runs ([Env.Apply]), each followed by
// its fault point. It is the runtime's alone: no handler reaches a fault point itself.
type operation struct {
	env     *Env // its Faults is read at each point, as a test may set it at any time
	service string
	id      string
}

// step runs step and then, when step reports that it reached point (a commit that wrote,
// a ledger write that was made, a hand-off that passed a slot on), the fault point named
// by it. An error of step is returned as is and reaches no point; the hook's error is
// returned wrapped, with the service, point and operation named.
func (o operation) step(ctx context.Context, point FaultPoint, step func() (reached bool, err error)) error {
	reached, err := step()
	if err != nil || !reached || o.env.Faults == nil {
		return err
	}
	if err := o.env.Faults(ctx, o.service, point, o.id); err != nil {
		return fmt.Errorf("%s: fault %s on %s: %w", o.service, point, o.id, err)
	}
	return nil
}
