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

// The gate's work is two kinds of record revision, not messages of their own (the record is
// the work, internal/pipeline records.go):
//   - the run-record revision that records a batch ([contracts.TypeBatchRecorded], on the
//     runs bucket's stream) gates its first call, probes a parallel-delegation batch, or
//     gates every call of a declared-parallel batch (parallel.go);
//   - the terminal revision of call i of a sequential batch ([contracts.TypeCallOutput], on
//     the calls bucket's stream) gates call i+1.
//
// Both are stateless beyond the records: a call past Requested re-publishes what its
// committed state implies instead of being decided again ([Service.gateCall]), so a
// redelivered or replayed revision never decides twice.

// Exhaustion reasons: the Indeterminate reason of a call whose gating failed on every
// delivery of the revision that asked for it.
const (
	exhaustedRecorded = "gate: the batch's recording failed on every delivery to the gate"
	exhaustedOutput   = "gate: the output of the call before it failed on every delivery to the gate"
)

// handleRecorded gates the batch a run-record revision records: its first call
// ([Service.gateCallEffects]: the decision's commit hands the call to its executor, to the
// barrier, or to no one), the probe of a parallel-delegation batch ([Service.probe]), or
// every call of a declared-parallel batch ([Service.gateDeclared]). The batch arrives in
// the revision itself, so the gate reads no batch record; it is remembered for the outputs
// that advance the batch.
func (s *Service) handleRecorded(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	b, err := s.recorded(d)
	if err != nil {
		return pipeline.Effects{}, err
	}
	s.env.Remember(b)
	if !b.Parallel {
		// No record of call 0 can exist at the first delivery but a cancellation's seal,
		// which the create then finds (see [Service.gateCallEffects]).
		return s.gateCallEffects(ctx, b, 0, d.NumDelivered == 1)
	}
	sub := &b.Submission
	log := zerolog.Ctx(ctx).With().Str("run_id", sub.RunID).Str("batch_id", sub.BatchID()).Logger()
	eff := pipeline.Effects{Op: pipeline.ProbeID(sub.BatchID()), Log: &log}
	if b.ParallelDeclared {
		// Every call's steps are operations of their own (the call's id), run in turn.
		eff.Op = sub.BatchID()
		return eff.Then(s.gateDeclared(b)...), nil
	}
	steps, err := s.probe(log.WithContext(ctx), b)
	if err != nil {
		return pipeline.Effects{}, err
	}
	return eff.Then(steps...), nil
}

// recorded reads and checks the batch of a [contracts.TypeBatchRecorded] revision.
func (s *Service) recorded(d bus.Delivery) (*contracts.BatchRecord, error) {
	b, err := pipeline.BatchRecordedOf(s.env.Names, d)
	if err != nil {
		return nil, err
	}
	if err := checkBatch(b); err != nil {
		return nil, bus.Permanent(err)
	}
	if len(b.Submission.Calls) == 0 {
		return nil, contracts.Reject(contracts.RejectInvalidField, "batch %s records no call", b.Submission.BatchID())
	}
	return b, nil
}

// recordedExhausted runs when gating a recorded batch failed transiently on every
// delivery: its first call (every call of a parallel batch) still Requested becomes
// Indeterminate, and that terminal revision is its output, so the batch still finishes.
func (s *Service) recordedExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	b, err := s.recorded(d)
	if err != nil {
		return nil // nothing to seal: the revision records no batch the gate could read
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("batch_id", b.Submission.BatchID()).Msg("recorded batch exhausted; sealing")
	if b.Parallel {
		return s.seal(ctx, b, -1, exhaustedRecorded, true)
	}
	return s.seal(ctx, b, 0, exhaustedRecorded, false)
}

// handleOutput advances sequential dispatch: the terminal revision of call i gates call
// i+1. Outputs of calls dispatched in parallel, of a batch's last call, and of a batch no
// longer open (a revision replayed to a new durable) advance nothing.
//
// A call its run's cancellation ended (Indeterminate "cancelled", which only a run cancel
// writes: the gate's seal, or an executor that stopped the body) hands nothing on: its run
// is ending, so the calls after it are sealed cancelled, never gated. This holds whichever
// commits first, the gate's handling of the cancellation or an executor's stop, so a
// cancelled run never runs its next call — without reading the run record on the path of
// every call.
func (s *Service) handleOutput(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	b, next, runCancelled, err := s.nextCall(ctx, d)
	if err != nil || b == nil {
		return pipeline.Effects{}, err
	}
	if runCancelled {
		sub := &b.Submission
		log := zerolog.Ctx(ctx).With().Str("run_id", sub.RunID).Str("batch_id", sub.BatchID()).
			Str("call_id", sub.Calls[next].CallID).Logger()
		return pipeline.Effects{Op: sub.BatchID(), Log: &log, Steps: []pipeline.Effect{
			pipeline.Do(func(ctx context.Context) error {
				zerolog.Ctx(ctx).Info().Msg("the call before it was ended by its run's cancellation; sealing the batch's remaining calls")
				// The seal is an operation of the batch's own (control.go).
				return s.seal(ctx, b, -1, cancelledReason, b.Parallel)
			}),
		}}, nil
	}
	return s.gateCallEffects(ctx, b, next, d.NumDelivered == 1)
}

// nextCall returns the batch of the output d announces and the index of the call it
// releases, or a nil batch when it releases none. runCancelled reports that the output's
// call was ended by its run's cancellation, so the call it releases must be sealed, not
// gated.
func (s *Service) nextCall(ctx context.Context, d bus.Delivery) (b *contracts.BatchRecord, next int, runCancelled bool, err error) {
	out, rec, err := pipeline.CallOutputRecordOf(s.env.Names, d)
	if err != nil {
		return nil, 0, false, err
	}
	if out.Parallel {
		return nil, 0, false, nil
	}
	b, err = s.env.Batch(ctx, out.RunID, out.Step)
	if err != nil {
		// Not found included: call records exist only for calls of recorded batches, so
		// only a read behind the batch's write answers so; the redelivery reads again.
		return nil, 0, false, fmt.Errorf("gate: load the batch of call output %s: %w", out.CallID, err)
	}
	if err := checkBatch(b); err != nil {
		return nil, 0, false, bus.Permanent(err)
	}
	sub := &b.Submission
	if out.Index < 0 || out.Index >= len(sub.Calls) || sub.Calls[out.Index].CallID != out.CallID {
		return nil, 0, false, contracts.Reject(contracts.RejectInvalidField,
			"call output names call %d %q, which is not a call of batch %s", out.Index, out.CallID, sub.BatchID())
	}
	next = out.Index + 1
	if next >= len(sub.Calls) || b.Phase != contracts.BatchPhaseOpen {
		return nil, 0, false, nil
	}
	return b, next, rec.IndeterminateFor(cancelledReason), nil
}

// outputExhausted runs when an output failed transiently on every delivery: the next call
// may never have been gated, so it — if it is still Requested — becomes Indeterminate, and
// that revision is its output. The batch then advances past it and still finishes.
func (s *Service) outputExhausted(ctx context.Context, d bus.Delivery, cause error) error {
	b, next, _, err := s.nextCall(ctx, d)
	if err != nil {
		if bus.IsPermanent(err) || errors.Is(err, pipeline.ErrBatchNotFound) {
			return nil // nothing to seal: the output names no call, or no batch on any delivery
		}
		return err
	}
	if b == nil {
		return nil
	}
	zerolog.Ctx(ctx).Error().Err(cause).Str("batch_id", b.Submission.BatchID()).Int("next", next).
		Msg("call output exhausted; sealing the next call")
	return s.seal(ctx, b, next, exhaustedOutput, false)
}
