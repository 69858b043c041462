package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Concurrency limits hold a slot for every call of their tools from the moment the gate
// hands the call to its executor until the call ends. The slots live in the limits ledger,
// one entry per limit and key value, next to the shares of the other kinds:
//
//   - Taking a slot ([limiter.acquire]) happens before the call's record is handed over:
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

// Outcomes of a concurrency limit, the outcome label of awaken_limit_events_total.
const (
	slotTaken  = "slot_taken"  // a free slot was taken
	slotQueued = "slot_queued" // no slot was free: the call waits in order
	slotHanded = "slot_handed" // a slot given back went to the first waiter
	slotFreed  = "slot_freed"  // a slot given back went to no one (nobody waited)
)

// errNoSlot: the ledger entry has no free slot; the call was queued.
var errNoSlot = errors.New("no free slot")

// hasSlots reports whether a concurrency limit applies to the call: only then does its
// hand-over touch the ledger.
func (l *limiter) hasSlots(call contracts.ToolCall) bool {
	return l.anyConcurrency(func(lim *contracts.Limit) bool { return lim.Matches(call) })
}

// slotsForTool reports whether a concurrency limit names toolID, whatever the arguments:
// the terminal records of its calls may give slots back.
func (l *limiter) slotsForTool(toolID string) bool {
	return l.anyConcurrency(func(lim *contracts.Limit) bool { return lim.MatchesTool(toolID) })
}

func (l *limiter) anyConcurrency(matches func(*contracts.Limit) bool) bool {
	if l == nil {
		return false
	}
	for k := range l.limits {
		if lim := &l.limits[k]; lim.Kind == contracts.LimitConcurrency && matches(lim) {
			return true
		}
	}
	return false
}

// waiter is where the record of call i of b is.
func waiter(b *contracts.BatchRecord, i int) contracts.LimitWaiter {
	sub := &b.Submission
	return contracts.LimitWaiter{Op: callOp(b, i), RunID: sub.RunID, Step: sub.Step, Index: i}
}

// slotKey is the ledger key of lim's slots for the calls of b (no window).
func slotKey(lim *contracts.Limit, b *contracts.BatchRecord) (key, value string) {
	value = lim.KeyValue(&b.Submission)
	return contracts.LimitLedgerKey(lim.Name, value, time.Time{}), value
}

// acquire takes, in configuration order, a slot of every concurrency limit matching call
// i of b. It returns "" when the call holds all of them, or the name of the first limit
// with no free slot, in whose queue the call now waits (holding the earlier limits' slots).
func (l *limiter) acquire(ctx context.Context, b *contracts.BatchRecord, i int) (string, error) {
	if !l.hasSlots(b.Submission.Calls[i]) {
		return "", nil
	}
	st, err := l.store(ctx)
	if err != nil {
		return "", err
	}
	w := waiter(b, i)
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind != contracts.LimitConcurrency || !lim.Matches(b.Submission.Calls[i]) {
			continue
		}
		key, value := slotKey(lim, b)
		outcome := slotTaken
		_, _, err := st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
			outcome = slotTaken
			if !exists {
				*cur = contracts.LimitLedgerEntry{Limit: lim.Name, Kind: lim.Kind, Key: lim.Key, Value: value}
			}
			if _, held := cur.Held[w.Op]; held {
				outcome = limitHeld
				return state.ErrNoChangeOnLeader
			}
			queued := cur.WaitingIndex(w.Op)
			if cur.Used+1 > lim.Max() {
				outcome = slotQueued
				if queued >= 0 {
					// Waiting already. Update confirms a refusal on the leader's value: a
					// writer that looks again after writing its waiting record must see a
					// hand-off made meanwhile, not a replica's older queue.
					return errNoSlot
				}
				cur.Waiting = append(cur.Waiting, w)
				return nil
			}
			if queued >= 0 {
				cur.Waiting = append(cur.Waiting[:queued:queued], cur.Waiting[queued+1:]...)
			}
			if cur.Held == nil {
				cur.Held = map[string]float64{}
			}
			cur.Held[w.Op] = 1
			cur.Used++
			return nil
		})
		switch {
		case errors.Is(err, errNoSlot): // still queued
		case err != nil:
			return "", fmt.Errorf("gate: limit %s: take a slot for %s: %w", lim.Name, w.Op, err)
		}
		if outcome != limitHeld {
			l.env.Telemetry.LimitEvent(lim.Name, outcome)
		}
		if outcome == slotQueued {
			return lim.Name, nil
		}
	}
	return "", nil
}

// releaseSlots gives back op's slot (call i of b, now terminal) in every concurrency limit
// matching the call, and takes it out of any queue. A slot given back goes, in the same
// write, to the first waiter, and the hand-off is remembered until that waiter ends. It
// returns the waiters op handed a slot to — now or on an earlier delivery — whose calls
// the caller must hand over.
func (l *limiter) releaseSlots(ctx context.Context, b *contracts.BatchRecord, i int) ([]contracts.LimitWaiter, error) {
	if !l.hasSlots(b.Submission.Calls[i]) {
		return nil, nil
	}
	st, err := l.store(ctx)
	if err != nil {
		return nil, err
	}
	op := waiter(b, i).Op
	var granted []contracts.LimitWaiter
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind != contracts.LimitConcurrency || !lim.Matches(b.Submission.Calls[i]) {
			continue
		}
		key, _ := slotKey(lim, b)
		var handed *contracts.LimitWaiter
		outcome := ""
		_, _, err := st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
			handed, outcome = nil, ""
			if !exists {
				return state.ErrNoChangeOnLeader
			}
			changed := false
			// op ended, so a hand-off to op is done with: forget it.
			for from, to := range cur.Handed {
				if to.Op == op {
					delete(cur.Handed, from)
					changed = true
				}
			}
			if q := cur.WaitingIndex(op); q >= 0 {
				cur.Waiting = append(cur.Waiting[:q:q], cur.Waiting[q+1:]...)
				changed = true
			}
			if amount, held := cur.Held[op]; held {
				delete(cur.Held, op)
				cur.Used -= amount
				changed = true
				outcome = slotFreed
				if len(cur.Waiting) > 0 && cur.Used+1 <= lim.Max() {
					next := cur.Waiting[0]
					cur.Waiting = cur.Waiting[1:]
					cur.Held[next.Op] = 1
					cur.Used++
					if cur.Handed == nil {
						cur.Handed = map[string]contracts.LimitWaiter{}
					}
					cur.Handed[op] = next
					outcome = slotHanded
				}
			}
			if h, ok := cur.Handed[op]; ok {
				handed = &h // now, or by a delivery that crashed before handing the call over
			}
			if !changed {
				return state.ErrNoChangeOnLeader
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("gate: limit %s: give back the slot of %s: %w", lim.Name, op, err)
		}
		if outcome != "" {
			l.env.Telemetry.LimitEvent(lim.Name, outcome)
		}
		if handed != nil {
			granted = append(granted, *handed)
		}
	}
	return granted, nil
}

// admit hands call i of b — moved into execution and not handed over yet — to its
// executor if it holds a slot of every concurrency limit matching it; otherwise it records
// which limit's slot the call waits for. strict is set on the paths that just wrote the
// call into execution (a resolution): a record that does not show it yet is an error, and
// redelivered. A hand-off (not strict) that finds the call not in execution yet does
// nothing: the writer that puts it there looks at the ledger after its write and admits the
// call itself.
func (s *Service) admit(ctx context.Context, b *contracts.BatchRecord, i int, strict bool) error {
	limit, err := s.limits.acquire(ctx, b, i)
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
	if !rec.Phase.IsTerminal() || !s.limits.hasSlots(b.Submission.Calls[i]) {
		return nil
	}
	return s.releaseSlots(ctx, b, i)
}

// releaseSlots gives back the slots of call i of b, which ended, and hands over the calls
// they went to ([Service.handOverWaiters]).
func (s *Service) releaseSlots(ctx context.Context, b *contracts.BatchRecord, i int) error {
	from := callOp(b, i)
	var granted []contracts.LimitWaiter
	if err := s.env.Operation(ServiceName, from).Step(ctx, FaultAfterSlotHandOff, func() (handedOff bool, err error) {
		granted, err = s.limits.releaseSlots(ctx, b, i)
		return len(granted) > 0, err
	}); err != nil {
		return err
	}
	return s.handOverWaiters(ctx, from, granted)
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
		if w.Index < 0 || w.Index >= len(b.Submission.Calls) || waiter(b, w.Index).Op != w.Op {
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
