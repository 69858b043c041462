package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// FaultAfterLimitRelease fires after the ledger gave back the shares of a call that ended
// without running, before its terminal record is acknowledged: the redelivery finds
// nothing held and gives back nothing more.
const FaultAfterLimitRelease pipeline.FaultPoint = "after-limit-release"

// FaultAfterLimitSettle fires after the ledger settled and folded the budget shares of a
// call that ran, before its terminal record is acknowledged: the redelivery finds the
// operation no longer held and settles nothing twice.
const FaultAfterLimitSettle pipeline.FaultPoint = "after-limit-settle"

// limitReleaseRoute is the gate's consumer of terminal call records
// ([contracts.ConsumerGateLimits]), registered only when the host policy has limits: a
// gate without them reads nothing more. It gives back the concurrency slots of every call
// that ends, and the other limits' shares of every call that ends without its body having
// run; the shares of a call that ran are spent, and leave the entries' held shares
// ([limiter.endShares]).
func (s *Service) limitReleaseRoutes() []bus.Route {
	if s.limits == nil {
		return nil
	}
	// One durable on each partition's call records.
	return bus.PerPartition(s.env.Names, func(n contracts.Names) bus.Route {
		return bus.Route{Spec: bus.ConsumerSpec{
			Stream: n.CallRecordsStream(), Durable: contracts.ConsumerGateLimits,
			FilterSubjects: []string{n.CallRecordsFilter()},
			AcceptTypes:    []string{contracts.TypeCallOutput}, Records: true,
		}, Handler: s.onTerminalCall, Delivery: releaseForEver}
	})
}

// releaseForEver is the limit releases' change to the gate's delivery: they are retried
// for ever, on the pipeline's back-off. The call is already terminal, so there is nothing
// to seal on exhaustion, and a release given up would hold its concurrency slot — and
// strand every call queued behind it — for good. A permanent failure (a record that does
// not decode) is still dead-lettered at once.
var releaseForEver = []bus.DeliveryOption{bus.WithDelivery(-1)}

// onTerminalCall handles one terminal call record: a call whose decision took limit shares
// (allow, ask, schedule), or that has no recorded decision, and that never reached
// execution — an ask denied or expired, a schedule or an ask cancelled, an entry check
// that failed, a call sealed by a cancellation between its ledger write and its
// decision's — gives back its share in every limit that matches it; a call that reached
// execution ends its shares (settled at the cost its tool reported, folded into used). The
// keys are derived again from the immutable batch record (its submission and created_at)
// and the host limits, exactly as the decision derived them, and each release or
// settlement is a no-op when the operation holds nothing, so a redelivery, or a call that
// a limit itself blocked, releases or settles nothing twice.
func (s *Service) onTerminalCall(ctx context.Context, d bus.Delivery) error {
	_, runID, step, rec, err := pipeline.CallRecordOf(s.env.Names, d)
	if err != nil {
		return err
	}
	if !rec.Phase.IsTerminal() {
		return nil
	}
	op := contracts.OperationID(runID, step, rec.CallID)
	// The batch is read only when a limit has something to look up in it, once.
	var b *contracts.BatchRecord
	var i int
	batch := func() error {
		if b != nil {
			return nil
		}
		var err error
		b, i, err = s.terminalCall(ctx, runID, step, &rec)
		return err
	}
	// Slots first: whatever ended the call — its body, a cancellation, a block after its
	// slot was taken — its slots go back (to the next waiter), and its place in a queue.
	if s.limits.slotsForTool(rec.ToolID) {
		if err := batch(); err != nil {
			return err
		}
		if err := s.releaseSlots(ctx, b, i); err != nil {
			return err
		}
	}
	// A call sealed without a decision (a cancellation) may still hold shares: its
	// decision reserved them and lost the race to the seal before it was recorded.
	if rec.Decision != nil && !counts(rec.Decision) {
		return nil
	}
	// A call the gate handed to an executor may have run — a replay-safe tool's executor
	// claims no durable entry before its body — so its shares stay spent: only a call that
	// never reached execution gives them back (never fewer counted than ran).
	// A call that ended waiting for a concurrency slot (its SlotWait still set) was never
	// handed to an executor.
	if _, dispatched := rec.MarkTime(contracts.StageExecuting); (dispatched || rec.Entered) && rec.SlotWait == "" {
		if rec.Decision == nil || !s.limits.counting(rec.ToolID) {
			return nil
		}
		// Its shares are spent: they fold into the entries' used totals.
		if err := batch(); err != nil {
			return err
		}
		return s.env.Operation(ServiceName, op).Step(ctx, FaultAfterLimitSettle, func() (bool, error) {
			settled, err := s.limits.endShares(ctx, b, i, op, rec.Decision, rec.Cost)
			return settled > 0, err
		})
	}
	if err := batch(); err != nil {
		return err
	}
	return s.env.Operation(ServiceName, op).Step(ctx, FaultAfterLimitRelease, func() (bool, error) {
		released, err := s.limits.releaseAll(ctx, b, i, op, rec.Decision)
		if err != nil {
			return false, err
		}
		if released > 0 {
			zerolog.Ctx(ctx).Debug().Str("batch_id", b.Submission.BatchID()).Str("run_id", runID).Str("call_id", rec.CallID).
				Int("limits", released).Msg("limit shares given back: the call never ran")
		}
		return true, nil
	})
}

// endShares ends op's shares, for call i of b, which ran: they are spent, and leave the
// entries' held shares for their used totals. In a budget matching the call whose tool
// reported what the call cost, the share is settled at that amount (the configured cost
// was the reservation, the report is what is spent) and folded in one write, which it
// returns the count of; a share not held (folded by an earlier delivery, a budget added
// since, an earlier block) is left alone, so a redelivered record settles nothing twice.
// Every other share is only noted ended: the next write of its key folds it
// ([limiter.foldEnded]) — no write of its own, so a call costs the ledger no more writes
// than its decision's.
func (l *limiter) endShares(ctx context.Context, b *contracts.BatchRecord, i int, op string, decided *contracts.GateOutcome, cost *float64) (int, error) {
	sub := &b.Submission
	at, err := l.sharesAt(ctx, b, i, op, decided)
	if err != nil {
		return 0, err
	}
	st, err := l.store(ctx)
	if err != nil {
		return 0, err
	}
	settled := 0
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind == contracts.LimitConcurrency || !lim.Matches(sub.Calls[i]) {
			continue
		}
		key := contracts.LimitLedgerKey(lim.Name, lim.KeyValue(sub), lim.WindowStart(at))
		if lim.Kind != contracts.LimitBudget || cost == nil {
			l.noteEnded(key, op)
			continue
		}
		var folded []string
		wrote := false
		_, _, err := st.Update(ctx, key, func(cur *contracts.LimitLedgerEntry, exists bool) error {
			folded, wrote = nil, false
			held, ok := cur.Held[op]
			if !exists || !ok {
				return state.ErrNoChangeOnLeader
			}
			folded = l.foldEnded(key, cur, op)
			delete(cur.Held, op)
			cur.Used += *cost - held
			wrote = true
			return nil
		})
		if err != nil {
			return settled, fmt.Errorf("gate: limit %s: settle %s at its reported cost %v: %w", lim.Name, op, *cost, err)
		}
		l.forgetEnded(key, folded)
		if wrote {
			settled++
			l.env.Telemetry.LimitEvent(lim.Name, limitSettled)
		}
	}
	return settled, nil
}

// terminalCall returns the batch of call record rec and the call's index in it.
func (s *Service) terminalCall(ctx context.Context, runID string, step int64, rec *contracts.CallRecord) (*contracts.BatchRecord, int, error) {
	b, err := s.env.Batch(ctx, runID, step)
	if err != nil {
		return nil, 0, fmt.Errorf("gate: limits: %w", err)
	}
	i := rec.Index
	if i < 0 || i >= len(b.Submission.Calls) || b.Submission.Calls[i].CallID != rec.CallID {
		return nil, 0, contracts.Reject(contracts.RejectInvalidField, "call %s is not call %d of batch %s", rec.CallID, i, b.Submission.BatchID())
	}
	return b, i, nil
}

// releaseAll gives back op's share, for call i of b, in every limit matching the call; it
// returns how many it looked at.
func (l *limiter) releaseAll(ctx context.Context, b *contracts.BatchRecord, i int, op string, decided *contracts.GateOutcome) (int, error) {
	sub := &b.Submission
	n := 0
	at, err := l.sharesAt(ctx, b, i, op, decided)
	if err != nil {
		return 0, err
	}
	for k := range l.limits {
		lim := &l.limits[k]
		if lim.Kind == contracts.LimitConcurrency || !lim.Matches(sub.Calls[i]) {
			continue
		}
		key := contracts.LimitLedgerKey(lim.Name, lim.KeyValue(sub), lim.WindowStart(at))
		if err := l.release(ctx, key, op); err != nil {
			return n, err
		}
		l.env.Telemetry.LimitEvent(lim.Name, limitReleased)
		n++
	}
	return n, nil
}

// sharesAt is the moment whose windows the decision decided took op's shares in (call i of
// b): the batch's recording, or the window a waiting rate limit deferred the call to —
// named by the recorded decision, or, for a decision lost to a seal (decided nil), by the
// deferral pointer in the ledger.
func (l *limiter) sharesAt(ctx context.Context, b *contracts.BatchRecord, i int, op string, decided *contracts.GateOutcome) (time.Time, error) {
	switch {
	case decided != nil && decided.Until != nil:
		return *decided.Until, nil
	case decided == nil:
		if lim := l.waitingRate(b.Submission.Calls[i]); lim != nil {
			until, err := l.deferredWindow(ctx, lim, b, op)
			if err != nil || !until.IsZero() {
				return until, err
			}
		}
	}
	return b.CreatedAt, nil
}
