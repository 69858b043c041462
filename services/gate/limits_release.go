package gate

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/limits"
)

// FaultAfterLimitReserve fires after a limit's ledger write reserved a call's share and
// before the decision that counts on it is recorded ([limits.FaultAfterReserve]).
const FaultAfterLimitReserve = limits.FaultAfterReserve

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
// ([limits.Ledger.EndShares]).
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
		}, Handler: s.env.Handle(ServiceName, s.onTerminalCall), Delivery: releaseForEver}
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
//
// Its effects, in order: the call's concurrency slots given back (to the next waiter);
// its other shares settled ([FaultAfterLimitSettle]) or released ([FaultAfterLimitRelease]).
// Neither hands work on through a record: the slots' hand-off is a write of its own.
func (s *Service) onTerminalCall(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	_, runID, step, rec, err := pipeline.CallRecordOf(s.env.Names, d)
	if err != nil {
		return pipeline.Effects{}, err
	}
	if !rec.Phase.IsTerminal() {
		return pipeline.Effects{}, nil
	}
	op := contracts.OperationID(runID, step, rec.CallID)
	// Slots first: whatever ended the call — its body, a cancellation, a block after its
	// slot was taken — its slots go back (to the next waiter), and its place in a queue.
	slots := s.limits.SlotsForTool(rec.ToolID)
	shares := s.sharesOfTerminal(&rec)
	if !slots && shares == sharesKept {
		return pipeline.Effects{}, nil
	}
	// The batch is read only when a limit has something to look up in it, once.
	b, i, err := s.terminalCall(ctx, runID, step, &rec)
	if err != nil {
		return pipeline.Effects{}, err
	}
	eff := pipeline.Effects{Op: op}
	if slots {
		eff = eff.Then(pipeline.Do(func(ctx context.Context) error { return s.releaseSlots(ctx, b, i) }))
	}
	switch shares {
	case sharesSpent:
		// Its shares are spent: they fold into the entries' used totals.
		eff = eff.Then(pipeline.Step(FaultAfterLimitSettle, func(ctx context.Context) (bool, error) {
			settled, err := s.limits.EndShares(ctx, b, i, op, rec.Decision, rec.Cost)
			return settled > 0, err
		}))
	case sharesReleased:
		eff = eff.Then(pipeline.Step(FaultAfterLimitRelease, func(ctx context.Context) (bool, error) {
			released, err := s.limits.ReleaseAll(ctx, b, i, op, rec.Decision)
			if err != nil {
				return false, err
			}
			if released > 0 {
				zerolog.Ctx(ctx).Debug().Str("batch_id", b.Submission.BatchID()).Str("run_id", runID).Str("call_id", rec.CallID).
					Int("limits", released).Msg("limit shares given back: the call never ran")
			}
			return true, nil
		}))
	}
	return eff, nil
}

// What becomes of the limit shares (all but the concurrency slots) of a terminal call.
type terminalShares int

const (
	// sharesKept: the call holds none to give back or settle (its decision took none, or
	// its tool is counted by no limit).
	sharesKept terminalShares = iota
	// sharesSpent: the call may have run; its shares are settled and folded into used.
	sharesSpent
	// sharesReleased: the call never reached execution; its shares are given back.
	sharesReleased
)

// sharesOfTerminal says what becomes of the limit shares of terminal call rec.
func (s *Service) sharesOfTerminal(rec *contracts.CallRecord) terminalShares {
	// A call sealed without a decision (a cancellation) may still hold shares: its
	// decision reserved them and lost the race to the seal before it was recorded.
	if rec.Decision != nil && !limits.Counts(rec.Decision) {
		return sharesKept
	}
	// A call the gate handed to an executor may have run — a replay-safe tool's executor
	// claims no durable entry before its body — so its shares stay spent: only a call that
	// never reached execution gives them back (never fewer counted than ran).
	// A call that ended waiting for a concurrency slot (its SlotWait still set) was never
	// handed to an executor.
	if _, dispatched := rec.MarkTime(contracts.StageExecuting); (dispatched || rec.Entered) && rec.SlotWait == "" {
		if rec.Decision == nil || !s.limits.Counting(rec.ToolID) {
			return sharesKept
		}
		return sharesSpent
	}
	return sharesReleased
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
