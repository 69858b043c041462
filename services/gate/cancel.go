package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// handleCancel is the handler of run cancellation: every open
// batch of the run is sealed — each non-terminal call becomes Indeterminate("cancelled"),
// its ticket is cleared — and a CallOutput is published per sealed call so the publisher
// finalizes the batch and its results publish once; then the executors are told to stop
// the run's bodies in flight (stopRunBodies), the run's io.awaken.run.ended.v1 is
// published (announceRunEnded) and the run's limits ledger keys are deleted. A late
// approval or timer then finds no ticket. Redelivery re-seals nothing (the calls are
// terminal) and re-publishes the same notice and event.
func (s *Service) handleRunCancel(ctx context.Context, d bus.Delivery) error {
	ev := d.Event
	rc, err := contracts.DecodeRunCancel(ev.Data)
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: decode run cancel: %w", err))
	}
	log := zerolog.Ctx(ctx).With().Str("run_id", rc.RunID).Logger()
	ctx = log.WithContext(ctx)
	var (
		open *contracts.BatchRecord
		run  contracts.RunRecord
	)
	if err := s.env.Operation(ServiceName, rc.RunID).Step(ctx, FaultAfterRunEnd, func() (bool, error) {
		open, run, err = s.endCancelledRun(ctx, rc.RunID)
		return true, err
	}); err != nil {
		return err
	}
	sealed := 0
	if open != nil {
		if err := checkBatch(open); err != nil {
			return bus.Permanent(err)
		}
		if err := s.seal(ctx, open, -1, cancelledReason, open.Parallel); err != nil {
			return err
		}
		sealed++
	}
	if err := s.stopRunBodies(ctx, rc); err != nil {
		return err
	}
	if err := s.announceRunEnded(ctx, run); err != nil {
		return err
	}
	// After the announcement, off the path of whoever waits for the cancel to be done.
	if err := s.limits.DeleteRunLedgerKeys(ctx, rc.RunID); err != nil {
		return err
	}
	log.Info().Int("batches", sealed).Str("reason", run.Ended.Reason).Msg("run cancelled")
	return nil
}

// stopRunBodies tells the executors (core NATS, on [contracts.Names.CallStopSubject]) to
// stop the bodies of rc's run in flight. It is sent only now, after the run's end is
// recorded and its open batch sealed, so no executor commits a call of the run before the
// seal: the order is end, seal, stop. A missed notice lets a body run to its end; its call
// keeps the seal.
func (s *Service) stopRunBodies(ctx context.Context, rc *contracts.RunCancel) error {
	ev, err := s.env.Event(ServiceName, rc.RunID+":stop", contracts.TypeRunCancel, *rc)
	if err != nil {
		return fmt.Errorf("gate: build run stop: %w", err)
	}
	if err := s.env.PublishNotice(s.env.Names.CallStopSubject(), ev); err != nil {
		return fmt.Errorf("gate: publish run stop: %w", err)
	}
	return nil
}

// seal marks every non-terminal call of b — or only call index, when index ≥ 0 —
// Indeterminate(reason) and clears its ticket. The sealing revision of each call is its
// output (the record is the work), written with Parallel set to parallel: a seal of every
// call of a batch at once advances no sequential dispatch. A call the executor completes
// concurrently keeps its output: the executor's compare-and-swap and ours are ordered by
// the store, and Completed is never downgraded.
func (s *Service) seal(ctx context.Context, b *contracts.BatchRecord, index int, reason string, parallel bool) error {
	sub := &b.Submission
	// Every call at once: the output of call i must not dispatch call i+1 while this loop
	// has yet to seal it (the gate's own dispatch reads the output the moment it is written), and the
	// calls are sealed in model order, so the last call's output, the one that opens a
	// sequential batch's barrier, is written when every earlier call is terminal.
	parallel = parallel || index < 0
	op := s.env.Operation(ServiceName, sub.BatchID())
	if err := op.Commit(ctx, func() (bool, error) {
		for i := range sub.Calls {
			if index >= 0 && i != index {
				continue
			}
			if _, err := s.sealCall(ctx, b, i, reason, parallel); err != nil {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return err
	}
	// Each sealed call's terminal revision is its output: nothing more to publish.
	return op.Publish(ctx, nil)
}

// sealCall marks call i Indeterminate(reason) unless it is terminal, and clears any ticket
// it parked on (also when an earlier delivery sealed it and crashed before clearing). It
// returns the committed record.
func (s *Service) sealCall(ctx context.Context, b *contracts.BatchRecord, i int, reason string, parallel bool) (contracts.CallRecord, error) {
	for range maxCASAttempts {
		rec, rev, err := s.loadCall(ctx, b, i)
		if err != nil {
			return contracts.CallRecord{}, err
		}
		if rec.Phase.IsTerminal() {
			if rec.IndeterminateFor(reason) {
				if err := s.clearTickets(ctx, b, i, &rec); err != nil {
					return contracts.CallRecord{}, err
				}
			}
			return rec, nil
		}
		if err := rec.MarkIndeterminate(reason, s.env.Now()); err != nil {
			return contracts.CallRecord{}, bus.Permanent(fmt.Errorf("gate: seal call %s: %w", rec.CallID, err))
		}
		if parallel {
			rec.RunOutsideSequence()
		}
		switch _, err := s.putCall(ctx, b, i, rec, rev); {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return contracts.CallRecord{}, err
		}
		// Counted once: only the write that sealed the call gets here.
		if reason == cancelledReason {
			s.env.Telemetry.Indeterminate(telemetry.ReasonCancelled)
		} else {
			s.env.Telemetry.Indeterminate(telemetry.ReasonDeliveryExhausted)
		}
		if err := s.clearTickets(ctx, b, i, &rec); err != nil {
			return contracts.CallRecord{}, err
		}
		return rec, nil
	}
	return contracts.CallRecord{}, fmt.Errorf("gate: seal call %s: %d concurrent writers in a row", b.Submission.Calls[i].CallID, maxCASAttempts)
}

// clearTickets deletes every ticket call i could have parked on. Only a call that was ever
// Awaiting can have one, and its correlation ids are derived, so no lookup is needed.
func (s *Service) clearTickets(ctx context.Context, b *contracts.BatchRecord, i int, rec *contracts.CallRecord) error {
	if _, parked := rec.MarkTime(contracts.StageAwaiting); !parked {
		return nil
	}
	sub := &b.Submission
	for _, r := range []contracts.TicketReason{contracts.ReasonPermission, contracts.ReasonScheduledAction, contracts.ReasonClientExecution} {
		if err := s.tickets.DeleteTicket(ctx, contracts.CorrelationID(r, sub.RunID, sub.Step, sub.Calls[i].CallID), 0); err != nil {
			return err
		}
	}
	return nil
}
