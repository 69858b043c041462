package execcore

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

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

// endCallCancelled ends a call whose body was stopped by the cancellation cc: with the
// body's outcome marked acknowledged when it returned one (bodyErr nil), else
// Indeterminate(cancelled_in_flight) — if this delivery still owns the call (else it keeps
// what the gate or another delivery committed). Its output is announced once terminal.
func (x *Executor) endCallCancelled(ctx context.Context, key string, req contracts.ExecRequest, seq uint64, attempt uint16,
	marked bool, op string, cc contracts.CallCancel, out contracts.ToolOutput, bodyErr error) error {
	acked := bodyErr == nil
	if acked {
		var size int
		out, size = finishOutput(req.CallID, out, MaxOutputBytes)
		var err error
		if out, err = x.byReference(ctx, op, out, size); err != nil {
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
	rec, _, err := x.env.Calls.Update(ctx, key, func(cur *contracts.CallRecord, exists bool) error {
		sealed = false
		if !exists || !holds(cur, attempt, seq, marked) {
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
	if !rec.Phase.IsTerminal() {
		return nil
	}
	zerolog.Ctx(ctx).Info().Str("phase", string(rec.Phase.Kind)).Bool("acknowledged", acked).Msg("call stopped by its cancellation")
	return x.announce(ctx, req, rec, op)
}
