package batcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// reasonOutputExhausted is the Indeterminate reason of a call whose gate request the
// batcher could not publish: the output of the call before it failed on every delivery.
const reasonOutputExhausted = "batcher: the gate request of this call could not be published (the previous call's output failed on every delivery)"

// handleOutput advances sequential dispatch: the output of
// call i announces that it is terminal, so the gate request of call i+1 is published. It
// is stateless — the next request carries a deterministic id, and the gate re-publishes
// what a recorded decision implies instead of deciding twice — so a redelivered output
// costs at most one deduplicated publish. Outputs of calls dispatched in parallel advance
// nothing: their batch has no next call to gate.
func (s *Service) handleOutput(ctx context.Context, d bus.Delivery) error {
	out, rec, err := s.output(ctx, d)
	if err != nil {
		return err
	}
	sub := &rec.Submission
	log := zerolog.Ctx(ctx).With().Str("batch_id", sub.BatchID()).Str("run_id", sub.RunID).Str("call_id", out.CallID).Logger()
	ctx = log.WithContext(ctx)
	if out.Parallel {
		log.Debug().Int("index", out.Index).Msg("output of a parallel call; nothing to advance")
		return nil
	}
	next := out.Index + 1
	if next >= len(sub.Calls) {
		log.Debug().Int("index", out.Index).Msg("output of the last call; the publisher takes over")
		return nil
	}
	req, err := s.gateRequest(rec, next, false)
	if err != nil {
		return err
	}
	if _, err := s.env.Pub.Publish(ctx, req.Subject, req.Event); err != nil {
		return fmt.Errorf("batcher: batch %s: publish gate request of call %d: %w", sub.BatchID(), next, err)
	}
	op := contracts.OperationID(sub.RunID, sub.Step, sub.Calls[next].CallID)
	if err := s.env.Fault(ctx, ServiceName, pipeline.FaultAfterPublish, op); err != nil {
		return err
	}
	log.Debug().Int("next", next).Str("gate_request", req.Event.ID).Msg("advanced to the next call")
	return nil
}

// output reads the CallOutput a terminal call-record revision announces and loads its
// batch. A revision that names no call, names no recorded batch, or does not match the
// batch's call at its index is permanent: call records exist only for calls of recorded
// batches.
func (s *Service) output(ctx context.Context, d bus.Delivery) (contracts.CallOutput, *contracts.BatchRecord, error) {
	out, err := pipeline.CallOutputOf(s.env.Names, d)
	if err != nil {
		return out, nil, err
	}
	rec, err := s.env.Batch(ctx, out.RunID, out.Step)
	if err != nil {
		if errors.Is(err, pipeline.ErrBatchNotFound) {
			return out, nil, bus.Permanent(err)
		}
		return out, nil, fmt.Errorf("batcher: load batch of call output: %w", err)
	}
	sub := &rec.Submission
	if len(rec.Pinned) != len(sub.Calls) {
		return out, nil, bus.Permanent(fmt.Errorf("batcher: batch %s has %d pins for %d calls",
			sub.BatchID(), len(rec.Pinned), len(sub.Calls)))
	}
	if out.Index < 0 || out.Index >= len(sub.Calls) || sub.Calls[out.Index].CallID != out.CallID {
		return out, nil, contracts.Reject(contracts.RejectInvalidField,
			"call output names call %d %q, which is not a call of batch %s", out.Index, out.CallID, sub.BatchID())
	}
	return out, rec, nil
}

// outputExhausted runs when an output failed transiently on every delivery: the next
// call's gate request may never have been published, so that call — if it is still
// Requested — becomes Indeterminate, and that revision is its output. The batch then
// advances past it and still finishes.
func (s *Service) outputExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	out, rec, err := s.output(ctx, d)
	if err != nil {
		if bus.IsPermanent(err) {
			return nil
		}
		return err
	}
	next := out.Index + 1
	if out.Parallel || next >= len(rec.Submission.Calls) {
		return nil
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("batch_id", rec.Submission.BatchID()).Int("next", next).
		Msg("call output exhausted; sealing the next call")
	return s.seal(ctx, rec, []int{next}, reasonOutputExhausted)
}

// seal makes each call at indices that is still Requested (or has no record yet)
// Indeterminate with reason, by compare-and-swap; that terminal revision is its output. A
// call that has moved on belongs to the gate or an executor and is left alone. Sealing is
// idempotent: a call already sealed is left as it is.
func (s *Service) seal(ctx context.Context, rec *contracts.BatchRecord, indices []int, reason string) error {
	sub := &rec.Submission
	for _, i := range indices {
		c := sub.Calls[i]
		key := contracts.CallKeyOf(rec, i)
		cur, _, err := s.env.Calls.Update(ctx, key, func(cur *contracts.CallRecord, exists bool) error {
			if !exists {
				*cur = contracts.NewCallRecord(i, c, rec.Pinned[i].Policy)
			}
			if cur.Phase.Kind != contracts.PhaseRequested {
				return state.ErrNoChange
			}
			return cur.MarkIndeterminate(reason, s.env.Now())
		})
		if err != nil {
			return fmt.Errorf("batcher: seal call %s: %w", key, err)
		}
		if !cur.IndeterminateFor(reason) {
			zerolog.Ctx(ctx).Info().Str("call_id", c.CallID).Str("phase", string(cur.Phase.Kind)).
				Msg("call has moved on; not sealing it")
		}
	}
	return nil
}
