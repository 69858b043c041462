package execcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// This file is the executors' side of cancellation: the gate's stop notices of a cancelled
// run or call end the bodies in flight, and a stopped call is sealed as cancelled.

// ReasonRunCancelled is the Indeterminate reason of a call whose body was stopped because
// its run was cancelled. It is the reason the gate seals the run's calls with, before it
// tells the executors to stop their bodies; a stopped body's call that this executor still
// owns ends the same way.
const ReasonRunCancelled = "cancelled"

// errRunCancelled is the cancellation cause of a tool context stopped by a run cancel.
var errRunCancelled = errors.New("run cancelled")

// runCancels tracks the contexts of the calls in flight in this process by run, so a run
// cancellation stops their bodies: a Go tool sees its context cancelled, an MCP server
// gets notifications/cancelled (the SDK sends it when the call's context ends), and a
// WebAssembly instance is closed (the engine closes modules when their context ends).
type runCancels struct {
	mu    sync.Mutex
	byRun map[string]map[*context.CancelCauseFunc]struct{}
	// byOp is the same contexts by operation id, for the cancellation of one call: a set,
	// since a duplicate request of a call is tracked too (until it sees the call is not its).
	byOp map[string]map[*context.CancelCauseFunc]struct{}
}

// track returns a context of ctx that a cancellation of runID cancels, and the function
// that stops tracking it (and releases it).
func (r *runCancels) track(ctx context.Context, runID, op string) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	r.mu.Lock()
	if r.byRun == nil {
		r.byRun = map[string]map[*context.CancelCauseFunc]struct{}{}
		r.byOp = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if r.byOp[op] == nil {
		r.byOp[op] = map[*context.CancelCauseFunc]struct{}{}
	}
	r.byOp[op][key] = struct{}{}
	if r.byRun[runID] == nil {
		r.byRun[runID] = map[*context.CancelCauseFunc]struct{}{}
	}
	r.byRun[runID][key] = struct{}{}
	r.mu.Unlock()
	return cctx, func() {
		r.mu.Lock()
		delete(r.byRun[runID], key)
		delete(r.byOp[op], key)
		if len(r.byOp[op]) == 0 {
			delete(r.byOp, op)
		}
		if len(r.byRun[runID]) == 0 {
			delete(r.byRun, runID)
		}
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// cancelRun cancels every tracked call of runID and returns how many there were.
func (r *runCancels) cancelRun(runID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for cancel := range r.byRun[runID] {
		(*cancel)(errRunCancelled)
	}
	return len(r.byRun[runID])
}

// listen subscribes handle (core NATS) to subject, which carries what (named in an
// error); without a connection there is nothing to listen on.
func (x *Executor) listen(subject, what string, handle nats.MsgHandler) (*nats.Subscription, error) {
	if x.env.Conn == nil {
		return nil, nil
	}
	sub, err := x.env.Conn.Subscribe(subject, handle)
	if err != nil {
		return nil, fmt.Errorf("%s: subscribe to %s: %w", x.opts.Service, what, err)
	}
	return sub, nil
}

// stopRun stops the calls in flight of the run a gate's stop notice names. The gate sends
// it once it has recorded the run's end and sealed the run's open batch, so a body is never
// stopped — and its call never committed by this executor — before the seal: the call is
// already Indeterminate("cancelled") by the gate, written outside its batch's sequence,
// and nothing its stop commits can hand the batch's next call over.
func (x *Executor) stopRun(rc *contracts.RunCancel) {
	if n := x.cancels.cancelRun(rc.RunID); n > 0 {
		x.env.Log.Info().Str("run_id", rc.RunID).Int("calls", n).Msg("run cancelled; stopping its calls in flight")
	}
}

// sealCancelled ends c's call, whose body was stopped by its run's cancellation: it
// becomes Indeterminate(ReasonRunCancelled) if this delivery still owns it (else it keeps
// what the gate or another delivery committed). A call that is terminal then goes on to
// its announcement; one that is not settles the operation.
func (x *Executor) sealCancelled(ctx context.Context, c *callRun) error {
	rec, err := x.seal(ctx, c.key, c.req, ReasonRunCancelled, telemetry.ReasonCancelled, func(cur *contracts.CallRecord) bool {
		return holds(cur, c.attempt, c.seq, c.marked)
	})
	if err != nil {
		return err
	}
	c.rec = rec
	if !rec.Phase.IsTerminal() {
		return pipeline.ErrSettled
	}
	zerolog.Ctx(ctx).Info().Str("phase", string(rec.Phase.Kind)).Msg("call stopped by its run's cancellation")
	return nil
}

// DefaultCancelGrace is how long a body stopped by its call's cancellation may take to
// return an acknowledging outcome ([Options.CancelGrace]).
const DefaultCancelGrace = 2 * time.Second

// callCancelled is the cancellation cause of a tool context stopped by the cancellation of
// its call: it carries the command, so the outcome records who cancelled and why.
type callCancelled struct{ cc contracts.CallCancel }

func (c *callCancelled) Error() string { return "call cancelled: " + c.cc.Reason }

// cancelCall cancels the tracked call op with cause and reports whether it was tracked.
func (r *runCancels) cancelCall(op string, cause error) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for cancel := range r.byOp[op] {
		(*cancel)(cause)
	}
	return len(r.byOp[op]) > 0
}

// listenForCallStops subscribes (core NATS) to the gate's stop notices
// ([contracts.Names.CallStopSubject]): the gate sends a [contracts.CallCancel] when it
// handles the cancellation of a call it finds entered by an executor, and a
// [contracts.RunCancel] once it has ended a cancelled run and sealed its open batch. A
// missed notice lets the body run to its end; its call keeps the gate's seal (a run
// cancel) or its outcome is committed (a call cancel).
func (x *Executor) listenForCallStops() error {
	sub, err := x.listen(x.env.Names.CallStopSubject(), "stop notices", x.onStop)
	x.stopSub = sub
	return err
}

// onStop stops what a stop notice names, if it runs here: one call's body, or every body
// of a run. A notice that does not decode, or of another type, is dropped.
func (x *Executor) onStop(m *nats.Msg) {
	ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil {
		return
	}
	switch ev.Type {
	case contracts.TypeRunCancel:
		if rc, err := contracts.DecodeRunCancel(ev.Data); err == nil {
			x.stopRun(rc)
		}
	case contracts.TypeCallCancel:
		cc, err := contracts.DecodeCallCancel(ev.Data)
		if err == nil && x.cancels.cancelCall(cc.OperationID, &callCancelled{cc: *cc}) {
			x.env.Log.Info().Str("operation_id", cc.OperationID).Str("actor", cc.Actor).Msg("call cancelled; stopping its body")
		}
	}
}

// callCancelOf returns the call cancellation that stopped ctx, if one did.
func callCancelOf(ctx context.Context) (*callCancelled, bool) {
	var cc *callCancelled
	return cc, ctx.Err() != nil && errors.As(context.Cause(ctx), &cc)
}

// acknowledgesCancel reports whether r, a body's result, answers the cancellation of its
// call: the call was cancelled and the body returned an outcome (no error) after all.
func acknowledgesCancel(ctx context.Context, r result) bool {
	_, cancelled := callCancelOf(ctx)
	return cancelled && r.err == nil && r.abort == nil
}

// awaitAcknowledgement waits, when ctx was stopped by its call's cancellation, up to the
// grace for the body to return; an outcome returned without error is the acknowledged one.
func (x *Executor) awaitAcknowledgement(ctx context.Context, done <-chan result) (contracts.ToolOutput, bool) {
	if _, cancelled := callCancelOf(ctx); !cancelled {
		return contracts.ToolOutput{}, false
	}
	t := time.NewTimer(x.opts.CancelGrace)
	defer t.Stop()
	select {
	case r := <-done:
		return r.out, r.err == nil && r.abort == nil
	case <-t.C:
		zerolog.Ctx(ctx).Warn().Dur("grace", x.opts.CancelGrace).Msg("cancelled body did not return within the grace; abandoned")
		return contracts.ToolOutput{}, false
	}
}

// endCallCancelled ends c's call, whose body was stopped by the cancellation cc: with the
// body's outcome marked acknowledged when it returned one (bodyErr nil), else
// Indeterminate(cancelled_in_flight) — if this delivery still owns the call (else it keeps
// what the gate or another delivery committed). A call that is terminal then goes on to
// its announcement; one that is not settles the operation.
func (x *Executor) endCallCancelled(ctx context.Context, c *callRun, cc contracts.CallCancel, out contracts.ToolOutput, bodyErr error) error {
	req := c.req
	acked := bodyErr == nil
	if acked {
		var size int
		out, size = finishOutput(req.CallID, out, MaxOutputBytes)
		var err error
		if out, err = x.byReference(ctx, c.op, out, size); err != nil {
			return err
		}
	}
	mark := &contracts.CallCancelMark{Actor: cc.Actor, Reason: cc.Reason, Outcome: contracts.CancelInFlight, At: x.env.Now()}
	if mark.Reason == "" {
		mark.Reason = "cancelled by operator"
	}
	if acked {
		mark.Outcome = contracts.CancelAcknowledged
	}
	sealed := false
	rec, _, err := x.env.Calls.Update(ctx, c.key, func(cur *contracts.CallRecord, exists bool) error {
		sealed = false
		if !exists || !holds(cur, c.attempt, c.seq, c.marked) {
			return errNotOwned
		}
		cur.AdoptPolicy(req.Policy)
		var err error
		if acked {
			err = cur.Complete(out, x.env.Now())
		} else {
			err = cur.MarkIndeterminate(contracts.CancelInFlight, x.env.Now())
		}
		if err != nil {
			return err
		}
		if err := cur.MarkCancelled(mark); err != nil {
			return err
		}
		sealed = true
		return nil
	})
	if err != nil {
		return err
	}
	if sealed && !acked {
		x.env.Telemetry.Indeterminate(telemetry.ReasonCancelled)
	}
	c.rec = rec
	if !rec.Phase.IsTerminal() {
		return pipeline.ErrSettled
	}
	zerolog.Ctx(ctx).Info().Str("phase", string(rec.Phase.Kind)).Bool("acknowledged", acked).Msg("call stopped by its cancellation")
	return nil
}
