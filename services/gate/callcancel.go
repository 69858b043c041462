package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// handleCallCancel is the handler of io.awaken.call.cancel.v1: the cancellation of one call.
// The gate is the one writer of decisions, so it alone moves a call that has not started:
//
//   - Awaiting (a ticket, a schedule) or Executing and not entered by an executor: the call
//     is completed, by compare-and-swap, with the model-visible error
//     "cancelled before start: {reason}" (its ticket cleared). An executor entering the call
//     concurrently, or an approval handing it over, wins or loses the same CAS: exactly one
//     outcome is committed.
//   - Requested: the batch has not reached the call (a sequential batch whose earlier call
//     still runs or waits) or the revision that asks for it (the batch's recording, the
//     previous call's output) is not yet consumed. A set_result decision holding the
//     cancelled output is recorded on it, so the gate's own dispatch (gateCall, or the
//     probe) completes it when the batch gets there, in batch order, and the batch goes on.
//   - Executing and entered: the body runs in an executor. The gate tells the executors,
//     on [contracts.Names.CallStopSubject], to stop it; the executor that holds it ends the
//     call (cancelled_in_flight, or the tool's acknowledged outcome).
//   - terminal: nothing changes (the api refuses this case with call_terminal first).
//
// Every write is a terminal revision or a decision of one call: the rest of the batch goes
// on and the publisher's barrier publishes it as usual. A redelivery finds its own write
// and changes nothing more (a stop notice sent again is harmless).
func (s *Service) handleCallCancel(ctx context.Context, d bus.Delivery) error {
	cc, err := contracts.DecodeCallCancel(d.Event.Data)
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: decode call cancel: %w", err))
	}
	ctx, b, index, err := s.commandCall(ctx, "call cancel", cc.OperationID,
		func(c zerolog.Context) zerolog.Context { return c.Str("actor", cc.Actor) })
	if err != nil || b == nil {
		return err
	}
	// Every call of a finished batch is terminal. Past the run retention its call records
	// are gone while the run record may still hold the batch (and this process's cache
	// may too), and an absent record reads as Requested: cancelling it would write a
	// record of a finished batch again. So the phase is read from the store.
	fresh, err := s.env.FreshBatch(ctx, b.Submission.RunID, b.Submission.Step)
	switch {
	case errors.Is(err, pipeline.ErrBatchNotFound):
		zerolog.Ctx(ctx).Info().Msg("call cancel: the batch is past its retention; nothing changes")
		return nil
	case err != nil:
		return fmt.Errorf("gate: call cancel: read batch: %w", err)
	case fresh.Phase != contracts.BatchPhaseOpen:
		zerolog.Ctx(ctx).Info().Str("phase", string(fresh.Phase)).Msg("call cancel: the batch is finished; nothing changes")
		return nil
	}
	return s.cancelCall(ctx, b, index, cc)
}

// commandCall finds the call an operator's command (what: "call cancel", "call resolve")
// names by operation id op: its batch and index, with ctx's logger naming the run, batch,
// call and the command's fields. An id that does not parse is permanent; a batch or call
// that does not exist is logged and answers a nil batch (nothing to do, nothing to retry).
func (s *Service) commandCall(ctx context.Context, what, op string, fields func(zerolog.Context) zerolog.Context) (context.Context, *contracts.BatchRecord, int, error) {
	runID, step, callID, err := contracts.ParseOperationID(op)
	if err != nil {
		return ctx, nil, 0, bus.Permanent(fmt.Errorf("gate: %s: %w", what, err))
	}
	log := fields(zerolog.Ctx(ctx).With().Str("run_id", runID).Str("batch_id", contracts.BatchID(runID, step)).
		Str("call_id", callID)).Logger()
	ctx = log.WithContext(ctx)
	b, err := s.env.Batch(ctx, runID, step)
	if errors.Is(err, pipeline.ErrBatchNotFound) {
		log.Warn().Msg(what + " names no recorded batch; nothing to do")
		return ctx, nil, 0, nil
	}
	if err != nil {
		return ctx, nil, 0, fmt.Errorf("gate: %s: load batch: %w", what, err)
	}
	if err := checkBatch(b); err != nil {
		return ctx, nil, 0, bus.Permanent(err)
	}
	for i, c := range b.Submission.Calls {
		if c.CallID == callID {
			return ctx, b, i, nil
		}
	}
	log.Warn().Msg(what + " names no call of its batch; nothing to do")
	return ctx, nil, 0, nil
}

// cancelCall applies cc to call i of b (see [Service.handleCallCancel]).
func (s *Service) cancelCall(ctx context.Context, b *contracts.BatchRecord, i int, cc *contracts.CallCancel) error {
	log := zerolog.Ctx(ctx)
	call := b.Submission.Calls[i]
	reason := cancelReasonText(cc.Reason)
	out := contracts.ErrorOutput(call.CallID, contracts.CancelledBeforeStartPrefix+reason)
	for range maxCASAttempts {
		rec, rev, err := s.loadCall(ctx, b, i)
		if err != nil {
			return err
		}
		now := s.env.Now()
		mark := &contracts.CallCancelMark{Actor: cc.Actor, Reason: reason, Outcome: contracts.CancelBeforeStart, At: now}
		switch {
		case rec.Phase.IsTerminal():
			log.Info().Str("phase", string(rec.Phase.Kind)).Msg("call cancel: the call is terminal; nothing changes")
			return nil
		case rec.Phase.Kind == contracts.PhaseRequested:
			if rec.Cancel != nil {
				return nil // recorded by an earlier delivery
			}
			o := &contracts.GateOutcome{Kind: contracts.GateSetResult, Output: &out}
			if rec.Decision == nil {
				if err := rec.Decide(o, s.env.Telemetry.TraceParent(ctx), now); err != nil {
					return bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
				}
			} else if err := rec.ReplaceProbedDecision(o); err != nil {
				// A probe's decision not yet applied: the cancellation replaces it.
				return bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
			}
		case rec.Phase.Kind == contracts.PhaseAwaiting || rec.ExecutingUnentered():
			if err := rec.Complete(out, now); err != nil {
				return bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
			}
		default: // Executing, entered: the body runs
			return s.stopInFlight(ctx, cc)
		}
		if err := rec.MarkCancelled(mark); err != nil {
			return bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
		}
		switch _, err := s.putCall(ctx, b, i, rec, rev); {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return err
		}
		if rec.Phase.IsTerminal() {
			if err := s.clearTickets(ctx, b, i, &rec); err != nil {
				return err
			}
			log.Info().Str("reason", reason).Msg("call cancelled before start")
		} else {
			log.Info().Str("reason", reason).Msg("call cancel recorded; the call ends cancelled when its batch reaches it")
		}
		return nil
	}
	return fmt.Errorf("gate: cancel call %s: %d concurrent writers in a row", call.CallID, maxCASAttempts)
}

// stopInFlight tells the executors to stop the body of the call cc names. It is a core
// NATS publish: the executor that holds the call ends it; one that missed the notice lets
// the body run to its end and commits its outcome, as a run cancel missed would.
func (s *Service) stopInFlight(ctx context.Context, cc *contracts.CallCancel) error {
	ev, err := s.env.Event(ServiceName, cc.OperationID+":stop", contracts.TypeCallCancel, *cc)
	if err != nil {
		return fmt.Errorf("gate: build call stop: %w", err)
	}
	if err := s.env.PublishNotice(s.env.Names.CallStopSubject(), ev); err != nil {
		return fmt.Errorf("gate: publish call stop: %w", err)
	}
	zerolog.Ctx(ctx).Info().Msg("call cancel: the body is running; executors told to stop it")
	return nil
}

// cancelReasonText is the reason a call cancel records: the operator's, or a default.
func cancelReasonText(reason string) string {
	if reason == "" {
		return "cancelled by operator"
	}
	return reason
}
