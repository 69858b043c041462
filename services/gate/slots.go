package gate

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/limits"
)

// Concurrency limits hold a slot for every call of their tools from the moment the gate
// hands the call to its executor until the call ends. The slots live in the limits ledger
// (services/gate/limits); this file does the call-record writes around them:
//
//   - Taking a slot ([limits.Ledger.Acquire]) happens before the call's record is handed over:
//     in the write that records an allowed decision (gateCall, the probe), or, for a call an
//     approval or a due time moved into execution, before the hand-over write ([Service.admit]).
//     A call that finds no free slot joins the entry's queue and its record says so
//     (Executing, not handed over, [contracts.CallRecord.SlotWait]): no executor has it.
//   - Giving a slot back happens when the holder's record turns terminal, whatever ended it
//     ([Service.onTerminalCall]): the same compare-and-swap passes the slot to the first
//     waiter and remembers the hand-off, then the gate hands that waiter's call over.
//
// Every writer of a waiting record looks at the ledger again after writing it, and every
// hand-off looks at the record after writing the ledger, so of two that race one always sees
// the other: a waiter is never stranded with a slot and no executor. Slots are acquired in
// configuration order and held while the call waits for a later limit's, so no two calls wait
// for each other. Each step is keyed by the operation id: a redelivered or replayed step
// finds its slot held, or its place in the queue, and takes nothing twice.

// FaultAfterSlotHandOff fires after a release passed a slot to a waiter in the ledger and
// before the waiter's call is handed to its executor: the redelivered release finds the
// hand-off recorded and hands the call over then.
const FaultAfterSlotHandOff pipeline.FaultPoint = "after-slot-hand-off"

// admit hands call i of b — moved into execution and not handed over yet — to its
// executor if it holds a slot of every concurrency limit matching it; otherwise it records
// which limit's slot the call waits for. strict is set on the paths that just wrote the
// call into execution (a resolution): a record that does not show it yet is an error, and
// redelivered. A hand-off (not strict) that finds the call not in execution yet does
// nothing: the writer that puts it there looks at the ledger after its write and admits the
// call itself.
func (s *Service) admit(ctx context.Context, b *contracts.BatchRecord, i int, strict bool) error {
	limit, err := s.limits.Acquire(ctx, b, i)
	if err != nil {
		return err
	}
	call := b.Submission.Calls[i]
	if limit == "" {
		rec, err := s.handOver(ctx, b, i, strict)
		if err != nil {
			return err
		}
		return s.giveBackIfEnded(ctx, b, i, rec)
	}
	rec, _, err := s.env.Calls.Update(ctx, callKey(b, i), func(cur *contracts.CallRecord, exists bool) error {
		if !exists || cur.Phase.Kind == contracts.PhaseAwaiting || cur.Phase.Kind == contracts.PhaseRequested {
			if strict {
				return errHandOverUnseen
			}
			return state.ErrNoChangeOnLeader
		}
		if !cur.ExecutingUnentered() || cur.Input != nil || cur.SlotWait == limit {
			return state.ErrNoChange
		}
		return cur.WaitForSlot(limit)
	})
	if err != nil {
		return fmt.Errorf("gate: call %s waits for a slot of limit %s: %w", call.CallID, limit, err)
	}
	if rec.Phase.IsTerminal() {
		return s.giveBackIfEnded(ctx, b, i, rec)
	}
	zerolog.Ctx(ctx).Debug().Str("call_id", call.CallID).Str("limit", limit).Msg("call waits for a concurrency slot")
	return nil
}

// giveBackIfEnded gives back the slots of call i of b, whose record rec was read after its
// slots were taken, when rec shows the call ended: its end's own release may have run
// before the slots were taken, and then found nothing to give back.
func (s *Service) giveBackIfEnded(ctx context.Context, b *contracts.BatchRecord, i int, rec contracts.CallRecord) error {
	if !rec.Phase.IsTerminal() || !s.limits.HasSlots(b.Submission.Calls[i]) {
		return nil
	}
	return s.releaseSlots(ctx, b, i)
}

// releaseSlots gives back the slots of call i of b, which ended, and hands over the calls
// they went to ([Service.handOverWaiters]), as an operation of the ended call's own: the
// fault point after the ledger passed a slot on names it.
func (s *Service) releaseSlots(ctx context.Context, b *contracts.BatchRecord, i int) error {
	from := callOp(b, i)
	var granted []contracts.LimitWaiter
	return s.env.Apply(ctx, ServiceName, pipeline.Effects{Op: from, Steps: []pipeline.Effect{
		pipeline.Step(FaultAfterSlotHandOff, func(ctx context.Context) (handedOff bool, err error) {
			granted, err = s.limits.ReleaseSlots(ctx, b, i)
			return len(granted) > 0, err
		}),
		pipeline.Do(func(ctx context.Context) error { return s.handOverWaiters(ctx, from, granted) }),
	}})
}

// handOverWaiters hands over the calls the slots a release gave back went to: each
// waiter's call is admitted (it may wait for a later limit's slot still), unless its tool
// was paused meanwhile — then it completes with the pause's blocked output, and its own
// end gives the slot on.
func (s *Service) handOverWaiters(ctx context.Context, from string, granted []contracts.LimitWaiter) error {
	for _, w := range granted {
		b, err := s.env.Batch(ctx, w.RunID, w.Step)
		if err != nil {
			return fmt.Errorf("gate: the batch of slot waiter %s: %w", w.Op, err)
		}
		if w.Index < 0 || w.Index >= len(b.Submission.Calls) || limits.Waiter(b, w.Index).Op != w.Op {
			zerolog.Ctx(ctx).Error().Str("op", w.Op).Msg("slot waiter names no call of its batch; skipped")
			continue
		}
		call := b.Submission.Calls[w.Index]
		pause, err := s.env.ToolPaused(ctx, call.ToolID)
		if err != nil {
			return fmt.Errorf("gate: %w", err)
		}
		if pause != nil {
			if err := s.completePaused(ctx, b, w.Index, pause); err != nil {
				return err
			}
			continue
		}
		if err := s.admit(ctx, b, w.Index, false); err != nil {
			return err
		}
		zerolog.Ctx(ctx).Debug().Str("run_id", w.RunID).Str("batch_id", b.Submission.BatchID()).Str("call_id", call.CallID).
			Str("from", from).Msg("concurrency slot handed over")
	}
	return nil
}

// completePaused completes a waiting call (not handed over) whose tool was paused while it
// waited, as the kill switch completes calls decided before it that have not started.
func (s *Service) completePaused(ctx context.Context, b *contracts.BatchRecord, i int, pause *contracts.ToolPause) error {
	call := b.Submission.Calls[i]
	out, _ := pause.GateOutcome().ImmediateOutput(call.CallID)
	_, _, err := s.env.Calls.Update(ctx, callKey(b, i), func(cur *contracts.CallRecord, exists bool) error {
		if !exists || !cur.ExecutingUnentered() || cur.Input != nil {
			return state.ErrNoChangeOnLeader
		}
		return cur.Complete(out.Normalize(), s.env.Now())
	})
	if err != nil {
		return fmt.Errorf("gate: complete paused waiter %s: %w", call.CallID, err)
	}
	return nil
}
