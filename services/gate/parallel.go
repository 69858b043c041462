package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// FaultAfterParallelDecision fires after the gate recorded the decision of one call of a
// declared-parallel batch and before it decides the next: a crash there leaves some
// calls decided and none handed over, and the redelivered recording decides from the
// first undecided call on.
const FaultAfterParallelDecision pipeline.FaultPoint = "after-parallel-decision"

// gateDeclared returns the steps that gate a recorded batch whose every call's tool
// declares parallel ([contracts.BatchRecord.ParallelDeclared]), in two passes, each call's
// work an operation of the call's own run by [pipeline.Env.Apply]:
//
//  1. Decide: every call is decided in model order, and each permission decision is
//     recorded on its call record (Requested with its decision) before the next call is
//     decided. A decision already recorded is never made again, so the redelivered
//     recording revision after a crash in this pass decides from the first undecided call.
//     A call the chain answers without a permission decision (unknown tool, invalid
//     arguments) is not recorded: the second pass derives that answer again, identically.
//  2. Apply: only once every decision is durable does the gate apply them, with the
//     sequential path's own step ([Service.gateCall], which reuses a recorded decision):
//     first every call that does not run now (a block or fixed result completes, an ask
//     or a schedule parks with its ticket), then every allowed call, each of whose entry
//     revisions is its executor request. So no body starts before every decision of the
//     batch is recorded, and the allowed calls start together.
//
// Every call record of the batch is marked to run outside the sequential order
// ([Service.newCallRecord]), so no output gates another call: a parked call is resolved
// and handed over on its own, and the publisher's barrier waits for every call to be
// terminal and publishes in model order.
func (s *Service) gateDeclared(b *contracts.BatchRecord) []pipeline.Effect {
	n := len(b.Submission.Calls)
	runsNow := make([]bool, n)
	steps := make([]pipeline.Effect, 0, n+1)
	for i := range n {
		steps = append(steps, pipeline.Do(func(ctx context.Context) (err error) {
			runsNow[i], err = s.recordParallelDecision(withCall(ctx, b, i), b, i)
			return err
		}))
	}
	return append(steps, pipeline.Do(func(ctx context.Context) error {
		for _, allowed := range []bool{false, true} {
			for i := range n {
				if runsNow[i] != allowed {
					continue
				}
				if err := s.gateCall(ctx, b, i, false); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// recordParallelDecision decides call i of a declared-parallel batch and records the
// decision on its still Requested record, unless one is recorded already or the call is
// past Requested. runsNow reports whether the call's recorded decision allows it and it
// has not been applied yet: such calls are handed over last, together. It is a
// sub-operation of the call's own, so the fault point that follows a recorded decision
// names the call.
func (s *Service) recordParallelDecision(ctx context.Context, b *contracts.BatchRecord, i int) (runsNow bool, err error) {
	err = s.env.Apply(ctx, ServiceName, pipeline.Effects{Op: callOp(b, i), Steps: []pipeline.Effect{
		pipeline.Step(FaultAfterParallelDecision, func(ctx context.Context) (bool, error) {
			return s.decideParallelCall(ctx, b, i, &runsNow)
		}),
	}})
	return runsNow, err
}

// decideParallelCall is [Service.recordParallelDecision]'s write: it reports whether it
// recorded a decision, and sets *runsNow.
func (s *Service) decideParallelCall(ctx context.Context, b *contracts.BatchRecord, i int, runsNow *bool) (bool, error) {
	for range maxCASAttempts {
		rec, rev, err := s.loadCall(ctx, b, i)
		if err != nil {
			return false, err
		}
		if rec.Phase.Kind != contracts.PhaseRequested {
			return false, nil
		}
		if rec.Decision != nil {
			*runsNow = rec.Decision.IsAllow()
			return false, nil
		}
		d, err := s.decideNow(ctx, b, i, nil)
		if err != nil {
			return false, err
		}
		if d.outcome == nil {
			return false, nil
		}
		if err := rec.Decide(d.outcome, s.env.Telemetry.TraceParent(ctx), s.env.Now()); err != nil {
			return false, bus.Permanent(fmt.Errorf("gate: decide call %s: %w", callOp(b, i), err))
		}
		if d.bound != "" {
			// A schedule the run may not perform ends the call now, as on the sequential
			// path; the second pass ends the run.
			if err := s.applyDecision(b, i, &rec, d); err != nil {
				return false, bus.Permanent(err)
			}
		}
		switch _, err := s.putCall(ctx, b, i, rec, rev); {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return false, err
		}
		// Counted once: only the delivery whose write recorded the decision gets here.
		s.env.Telemetry.GateDecision(d.outcome.AuditLabel())
		*runsNow = d.bound == "" && d.outcome.IsAllow()
		return true, nil
	}
	return false, fmt.Errorf("gate: call %s: %d concurrent writers in a row", callOp(b, i), maxCASAttempts)
}
