package pipeline

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
)

// This file is the only place a service reaches the fault hook. Fault injection is test
// machinery: a handler states the steps of its operation — the state change it commits,
// what that change implies and it publishes — through the wrappers below, and the wrapper
// runs the fault point at the step's boundary, so no handler body calls the hook
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

// Operation is one operation of a service's handler — a call, a batch, a probe, named by
// its operation id — whose steps run through [Operation.Commit], [Operation.Publish] and
// [Operation.Step], each followed by its fault point.
type Operation struct {
	env     *Env // its Faults is read at each point, as a test may set it at any time
	service string
	id      string
}

// Operation returns the operation id of service: the id the fault hook is called with.
func (e *Env) Operation(service, id string) Operation {
	return Operation{env: e, service: service, id: id}
}

// Commit runs write, the state change of the operation, and then — when write reports
// that it committed something — the [FaultAfterCommit] point: a crash injected there
// leaves the change durable and nothing it implies published. A write that finds its
// change recorded by an earlier delivery reports false and reaches no commit point.
func (o Operation) Commit(ctx context.Context, write func() (committed bool, err error)) error {
	return o.Step(ctx, FaultAfterCommit, write)
}

// Publish runs publish, everything the committed state implies (nil: nothing, the
// commit is its own output), and then the [FaultAfterPublish] point, the boundary
// between the durable outputs and the acknowledgement.
func (o Operation) Publish(ctx context.Context, publish func() error) error {
	return o.Step(ctx, FaultAfterPublish, func() (bool, error) {
		if publish == nil {
			return true, nil
		}
		return true, publish()
	})
}

// Step runs step and then, when step reports that it reached point (a ledger write that
// was made, a hand-off that passed a slot on), the fault point named by it. An error of
// step is returned as is and reaches no point; the hook's error is returned wrapped, with
// the service, point and operation named.
func (o Operation) Step(ctx context.Context, point FaultPoint, step func() (reached bool, err error)) error {
	return o.step(ctx, point, step)
}

func (o Operation) step(ctx context.Context, point FaultPoint, step func() (reached bool, err error)) error {
	reached, err := step()
	if err != nil || !reached || o.env.Faults == nil {
		return err
	}
	if err := o.env.Faults(ctx, o.service, point, o.id); err != nil {
		return fmt.Errorf("%s: fault %s on %s: %w", o.service, point, o.id, err)
	}
	return nil
}
