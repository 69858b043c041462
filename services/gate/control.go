package gate

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// This file is the gate's side of cancellation and resolution, the handlers of its control
// consumer ([contracts.ConsumerGateControl]): a run's cancellation (end the run, seal its
// open batch, tell the executors to stop its bodies, announce the end, delete its ledger
// keys), a call's cancellation, and an operator's resolution of an indeterminate call. The
// resolution of a ticket is services/gate/tickets'.

// handleRunCancel is the handler of run cancellation: every open batch of the run is
// sealed — each non-terminal call becomes Indeterminate("cancelled"), its ticket is
// cleared — and each sealed call's terminal revision is its output, so the publisher
// finalizes the batch and its results publish once; then the executors are told to stop
// the run's bodies in flight (stopRunBodies), the run's io.awaken.run.ended.v1 is
// published (announceRunEnded) and the run's limits ledger keys are deleted. A late
// approval or timer then finds no ticket. Redelivery re-seals nothing (the calls are
// terminal) and re-publishes the same notice and event.
//
// Its effects, in order: the run's end recorded ([FaultAfterRunEnd]); the seal of the batch
// that write found open, a sub-operation of the batch ([Service.sealEffects], handing each
// sealed call to the barrier); the notices and the announcement; the ledger keys deleted.
func (s *Service) handleRunCancel(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	rc, err := contracts.DecodeRunCancel(d.Event.Data)
	if err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: decode run cancel: %w", err))
	}
	log := zerolog.Ctx(ctx).With().Str("run_id", rc.RunID).Logger()
	// What the end's write found, for the steps after it.
	var ended struct {
		open *contracts.BatchRecord
		run  contracts.RunRecord
	}
	return pipeline.Effects{Op: rc.RunID, Log: &log, Steps: []pipeline.Effect{
		pipeline.Step(FaultAfterRunEnd, func(ctx context.Context) (bool, error) {
			var err error
			ended.open, ended.run, err = s.endCancelledRun(ctx, rc.RunID)
			return true, err
		}),
		pipeline.Do(func(ctx context.Context) error {
			if ended.open == nil {
				return nil
			}
			if err := checkBatch(ended.open); err != nil {
				return bus.Permanent(err)
			}
			return s.env.Apply(ctx, ServiceName, s.sealEffects(ended.open, -1, cancelledReason, ended.open.Parallel))
		}),
		pipeline.Do(func(ctx context.Context) error {
			if err := s.stopRunBodies(ctx, rc); err != nil {
				return err
			}
			return s.announceRunEnded(ctx, ended.run)
		}),
		// After the announcement, off the path of whoever waits for the cancel to be done.
		pipeline.Do(func(ctx context.Context) error {
			if err := s.limits.DeleteRunLedgerKeys(ctx, rc.RunID); err != nil {
				return err
			}
			sealed := 0
			if ended.open != nil {
				sealed = 1
			}
			zerolog.Ctx(ctx).Info().Int("batches", sealed).Str("reason", ended.run.Ended.Reason).Msg("run cancelled")
			return nil
		}),
	}}, nil
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

// seal runs the effects of sealing call index of b, or every call ([Service.sealEffects]),
// for work that does not return its effects (an exhausted delivery, a capability-bound
// run's end).
func (s *Service) seal(ctx context.Context, b *contracts.BatchRecord, index int, reason string, parallel bool) error {
	return s.env.Apply(ctx, ServiceName, s.sealEffects(b, index, reason, parallel))
}

// sealEffects returns the effects, an operation of b's batch id, that mark every
// non-terminal call of b — or only call index, when index ≥ 0 — Indeterminate(reason) and
// clear its ticket. The sealing revision of each call is its output (the record is the
// work: a hand-off to the barrier), written with Parallel set to parallel: a seal of every
// call of a batch at once advances no sequential dispatch. A call the executor completes
// concurrently keeps its output: the executor's compare-and-swap and ours are ordered by
// the store, and Completed is never downgraded. A seal that finds every call terminal (a
// redelivery) commits nothing.
func (s *Service) sealEffects(b *contracts.BatchRecord, index int, reason string, parallel bool) pipeline.Effects {
	sub := &b.Submission
	// Every call at once: the output of call i must not dispatch call i+1 while this loop
	// has yet to seal it (the gate's own dispatch reads the output the moment it is written), and the
	// calls are sealed in model order, so the last call's output, the one that opens a
	// sequential batch's barrier, is written when every earlier call is terminal.
	parallel = parallel || index < 0
	return pipeline.Effects{Op: sub.BatchID(), Steps: []pipeline.Effect{
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			sealed := false
			for i := range sub.Calls {
				if index >= 0 && i != index {
					continue
				}
				wrote, err := s.sealCall(ctx, b, i, reason, parallel)
				if err != nil {
					return false, err
				}
				sealed = sealed || wrote
			}
			return sealed, nil
		}, pipeline.ToBarrier),
		// Each sealed call's terminal revision is its output: nothing more to publish.
		pipeline.Publish(nil),
	}}
}

// sealCall marks call i Indeterminate(reason) unless it is terminal, and clears any ticket
// it parked on (also when an earlier delivery sealed it and crashed before clearing). It
// reports whether it wrote the call's record.
func (s *Service) sealCall(ctx context.Context, b *contracts.BatchRecord, i int, reason string, parallel bool) (bool, error) {
	for range maxCASAttempts {
		rec, rev, err := s.loadCall(ctx, b, i)
		if err != nil {
			return false, err
		}
		if rec.Phase.IsTerminal() {
			if rec.IndeterminateFor(reason) {
				if err := s.clearTickets(ctx, b, i, &rec); err != nil {
					return false, err
				}
			}
			return false, nil
		}
		if err := rec.MarkIndeterminate(reason, s.env.Now()); err != nil {
			return false, bus.Permanent(fmt.Errorf("gate: seal call %s: %w", rec.CallID, err))
		}
		if parallel {
			rec.RunOutsideSequence()
		}
		switch _, err := s.putCall(ctx, b, i, rec, rev); {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return false, err
		}
		// Counted once: only the write that sealed the call gets here.
		if reason == cancelledReason {
			s.env.Telemetry.Indeterminate(telemetry.ReasonCancelled)
		} else {
			s.env.Telemetry.Indeterminate(telemetry.ReasonDeliveryExhausted)
		}
		return true, s.clearTickets(ctx, b, i, &rec)
	}
	return false, fmt.Errorf("gate: seal call %s: %d concurrent writers in a row", b.Submission.Calls[i].CallID, maxCASAttempts)
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
// Every write is a terminal revision (handed to the barrier) or a decision of one call
// (handed to no one): the rest of the batch goes on and the publisher's barrier publishes
// it as usual. A redelivery finds its own write and changes nothing more (a stop notice
// sent again is harmless).
func (s *Service) handleCallCancel(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	cc, err := contracts.DecodeCallCancel(d.Event.Data)
	if err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: decode call cancel: %w", err))
	}
	ctx, b, index, err := s.commandCall(ctx, "call cancel", cc.OperationID,
		func(c zerolog.Context) zerolog.Context { return c.Str("actor", cc.Actor) })
	if err != nil || b == nil {
		return pipeline.Effects{}, err
	}
	// Every call of a finished batch is terminal. Past the run retention its call records
	// are gone while the run record may still hold the batch (and this process's cache
	// may too), and an absent record reads as Requested: cancelling it would write a
	// record of a finished batch again. So the phase is read from the store.
	fresh, err := s.env.FreshBatch(ctx, b.Submission.RunID, b.Submission.Step)
	switch {
	case errors.Is(err, pipeline.ErrBatchNotFound):
		zerolog.Ctx(ctx).Info().Msg("call cancel: the batch is past its retention; nothing changes")
		return pipeline.Effects{}, nil
	case err != nil:
		return pipeline.Effects{}, fmt.Errorf("gate: call cancel: read batch: %w", err)
	case fresh.Phase != contracts.BatchPhaseOpen:
		zerolog.Ctx(ctx).Info().Str("phase", string(fresh.Phase)).Msg("call cancel: the batch is finished; nothing changes")
		return pipeline.Effects{}, nil
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

// cancelCall decides what cc does to call i of b (see [Service.handleCallCancel]) from
// the call's record as read, and returns its effects. The write is a compare-and-swap on
// that read: when it loses ([errRaced]) the handler decides again from the new record.
func (s *Service) cancelCall(ctx context.Context, b *contracts.BatchRecord, i int, cc *contracts.CallCancel) (pipeline.Effects, error) {
	log := zerolog.Ctx(ctx)
	call := b.Submission.Calls[i]
	reason := cancelReasonText(cc.Reason)
	out := contracts.ErrorOutput(call.CallID, contracts.CancelledBeforeStartPrefix+reason)
	rec, rev, err := s.loadCall(ctx, b, i)
	if err != nil {
		return pipeline.Effects{}, err
	}
	now := s.env.Now()
	mark := &contracts.CallCancelMark{Actor: cc.Actor, Reason: reason, Outcome: contracts.CancelBeforeStart, At: now}
	switch {
	case rec.Phase.IsTerminal():
		log.Info().Str("phase", string(rec.Phase.Kind)).Msg("call cancel: the call is terminal; nothing changes")
		return pipeline.Effects{}, nil
	case rec.Phase.Kind == contracts.PhaseRequested:
		if rec.Cancel != nil {
			return pipeline.Effects{}, nil // recorded by an earlier delivery
		}
		o := &contracts.GateOutcome{Kind: contracts.GateSetResult, Output: &out}
		if rec.Decision == nil {
			if err := rec.Decide(o, s.env.Telemetry.TraceParent(ctx), now); err != nil {
				return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
			}
		} else if err := rec.ReplaceProbedDecision(o); err != nil {
			// A probe's decision not yet applied: the cancellation replaces it.
			return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
		}
	case rec.Phase.Kind == contracts.PhaseAwaiting || rec.ExecutingUnentered():
		if err := rec.Complete(out, now); err != nil {
			return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
		}
	default: // Executing, entered: the body runs
		return pipeline.Effects{Op: callOp(b, i), Log: log, Steps: []pipeline.Effect{
			pipeline.Do(func(ctx context.Context) error { return s.stopInFlight(ctx, cc) }),
		}}, nil
	}
	if err := rec.MarkCancelled(mark); err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: cancel call %s: %w", call.CallID, err))
	}
	return pipeline.Effects{Op: callOp(b, i), Log: log, Steps: []pipeline.Effect{
		// A terminal record is the call's output; a decision alone hands nothing on: the
		// gate's dispatch applies it when the batch reaches the call.
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			if _, err := s.putCall(ctx, b, i, rec, rev); err != nil {
				return false, err
			}
			if !rec.Phase.IsTerminal() {
				return true, nil
			}
			return true, s.clearTickets(ctx, b, i, &rec)
		}, callHandOffs(&rec)...),
		pipeline.Do(func(ctx context.Context) error {
			if rec.Phase.IsTerminal() {
				zerolog.Ctx(ctx).Info().Str("reason", reason).Msg("call cancelled before start")
			} else {
				zerolog.Ctx(ctx).Info().Str("reason", reason).Msg("call cancel recorded; the call ends cancelled when its batch reaches it")
			}
			return nil
		}),
	}}, nil
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

// errAwaitingPublication: the batch of a call to correct is finalized but its results are
// not yet on the results stream. The correction waits for them (the delivery is retried),
// so a platform never reads a correction before the result it corrects.
var errAwaitingPublication = errors.New("the batch is finalized and its results are not published yet")

// FaultAfterResolveRecorded fires after a resolution was recorded on the open batch (the
// run record) and before the call record moves to Completed: a crash there leaves the
// batch resolved and the call Indeterminate, which the redelivered command completes.
const FaultAfterResolveRecorded pipeline.FaultPoint = "after-resolve-recorded"

// handleCallResolve is the handler of io.awaken.call.resolve.v1: an operator's resolution
// of an indeterminate call (see pkg/contracts/resolve.go for the two cases). The ordering
// that makes exactly one of them happen is the run record: the resolution is recorded on
// the open batch there by compare-and-swap, and the publisher finalizes the batch by
// compare-and-swap on the same record, publishing what the record holds. Whichever write
// is first decides: a resolution recorded first is in the results; a finalize first makes
// the resolution a correction, published once the results are.
//
// The command is validated by the api before it is published; here it is checked again
// against the committed state, which may have moved: a call that is not Indeterminate, or
// that another command resolved, is refused (logged; nothing changes, and the api's
// watcher sees no write of its command).
//
// Its effects, in order: the resolution recorded on the open batch
// ([FaultAfterResolveRecorded]); the call's record written, a terminal revision handed to
// the barrier — Completed when the batch's results carry the resolution, a correction once
// they are published without it; a correction's event published.
func (s *Service) handleCallResolve(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	ev := d.Event
	cr, err := contracts.DecodeCallResolve(ev.Data)
	if err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: decode call resolve: %w", err))
	}
	ctx, b, index, err := s.commandCall(ctx, "call resolve", cr.OperationID,
		func(c zerolog.Context) zerolog.Context {
			return c.Str("actor", cr.Actor).Str("outcome", string(cr.Outcome))
		})
	if err != nil || b == nil {
		return pipeline.Effects{}, err
	}
	log := zerolog.Ctx(ctx)
	res := contracts.CallResolution{
		CommandID: ev.ID, Outcome: cr.Outcome, Output: cr.ResolvedOutput(), Note: cr.Note,
		Actor: cr.Actor, Role: cr.Role, At: s.env.Now(),
	}
	rec, _, err := s.loadCall(ctx, b, index)
	if err != nil {
		return pipeline.Effects{}, err
	}
	switch {
	case rec.Resolution != nil && rec.Resolution.CommandID == ev.ID:
		if rec.Resolution.Applied == contracts.ResolutionCorrected {
			// A redelivery: publish again (deduplicated).
			return pipeline.Effects{Op: cr.OperationID, Log: log, Steps: []pipeline.Effect{
				pipeline.Do(func(ctx context.Context) error { return s.publishCorrection(ctx, b, index, rec) }),
			}}, nil
		}
		return pipeline.Effects{}, nil
	case rec.Resolution != nil:
		log.Warn().Str("resolved_by", rec.Resolution.CommandID).Msg("call resolve refused: the call was resolved already")
		return pipeline.Effects{}, nil
	case rec.Phase.Kind != contracts.PhaseIndeterminate:
		log.Warn().Str("phase", string(rec.Phase.Kind)).Msg("call resolve refused: the call is not indeterminate")
		return pipeline.Effects{}, nil
	}

	// What each step found, for the steps after it.
	var resolved struct {
		inResults bool
		rec       contracts.CallRecord
	}
	return pipeline.Effects{Op: cr.OperationID, Log: log, Steps: []pipeline.Effect{
		pipeline.Step(FaultAfterResolveRecorded, func(ctx context.Context) (bool, error) {
			var err error
			resolved.inResults, err = s.recordOnBatch(ctx, b, index, res)
			return resolved.inResults, err
		}),
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			if !resolved.inResults {
				// The batch was finalized first: its results keep the indeterminate result,
				// and the correction waits for them to be published.
				published, err := s.batchPublished(ctx, b)
				if err != nil {
					return false, err
				}
				if !published {
					return false, errAwaitingPublication
				}
			}
			var err error
			resolved.rec, err = s.writeResolution(ctx, b, index, res, !resolved.inResults)
			return err == nil, err
		}, pipeline.ToBarrier),
		pipeline.Do(func(ctx context.Context) error {
			if resolved.inResults {
				zerolog.Ctx(ctx).Info().Msg("call resolved: the batch's results carry the resolution")
				return nil
			}
			zerolog.Ctx(ctx).Info().Msg("call resolved after publication: correction recorded")
			return s.publishCorrection(ctx, b, index, resolved.rec)
		}),
	}}, nil
}

// recordOnBatch records res on call index's batch in the run record while the batch is
// open there, and reports whether the batch's results will carry it: true when it was
// recorded now or by an earlier delivery of the same command (the batch may be finalized
// since, or archived), false when the batch was finalized without it.
func (s *Service) recordOnBatch(ctx context.Context, b *contracts.BatchRecord, index int, res contracts.CallResolution) (bool, error) {
	sub := &b.Submission
	br := contracts.BatchResolution{Index: index, CallID: sub.Calls[index].CallID, CommandID: res.CommandID, Output: res.Output}
	held := false
	_, _, err := s.env.Runs.Update(ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		held = false
		if !exists {
			return contracts.ErrBatchNotHeld
		}
		open := cur.Holds(sub.Step)
		if open == nil || open.Hash != b.Hash {
			return contracts.ErrBatchNotHeld
		}
		held = true
		changed, err := open.RecordResolution(br)
		switch {
		case errors.Is(err, contracts.ErrBatchNotOpen):
			return err
		case err != nil:
			return bus.Permanent(fmt.Errorf("gate: resolve %s: %w", br.CallID, err))
		case !changed:
			return state.ErrNoChange
		}
		return nil
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, contracts.ErrBatchNotOpen):
		return false, nil
	case errors.Is(err, contracts.ErrBatchNotHeld) && !held:
		// The run moved on: the batch was finalized and archived (a claim archives only a
		// finalized batch). The archive says whether an earlier delivery recorded res.
		archived, _, aerr := s.env.Batches.GetFromLeader(ctx, contracts.BatchKey(sub.RunID, sub.Step))
		if aerr != nil {
			return false, fmt.Errorf("gate: resolve %s: read archive: %w", br.CallID, aerr)
		}
		r, ok := archived.Resolved(index)
		return ok && r.CommandID == res.CommandID, nil
	}
	return false, fmt.Errorf("gate: resolve %s: record on the batch: %w", br.CallID, err)
}

// batchPublished reports whether b's results are on the results stream: its archived
// record says published (read from the leader: the publisher archives right after it
// publishes).
func (s *Service) batchPublished(ctx context.Context, b *contracts.BatchRecord) (bool, error) {
	archived, _, err := s.env.Batches.GetFromLeader(ctx, contracts.BatchKey(b.Submission.RunID, b.Submission.Step))
	switch {
	case errors.Is(err, state.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("gate: read archive of %s: %w", b.Submission.BatchID(), err)
	}
	return archived.Phase == contracts.BatchPhasePublished, nil
}

// writeResolution records res on call index's record — Completed with the resolved
// output, or, for a correction, the call left Indeterminate with the correction — and
// returns the record written. A lost compare-and-swap re-reads the record and applies res
// to it again.
func (s *Service) writeResolution(ctx context.Context, b *contracts.BatchRecord, index int, res contracts.CallResolution, correction bool) (contracts.CallRecord, error) {
	for range maxCASAttempts {
		rec, rev, err := s.loadCall(ctx, b, index)
		if err != nil {
			return rec, err
		}
		if correction {
			err = rec.RecordCorrection(res, res.At)
		} else {
			err = rec.ResolveIndeterminate(res, res.At)
		}
		if err != nil {
			return rec, bus.Permanent(fmt.Errorf("gate: resolve %s: %w", rec.CallID, err))
		}
		switch _, err := s.putCall(ctx, b, index, rec, rev); {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return rec, err
		}
		return rec, nil
	}
	return contracts.CallRecord{}, fmt.Errorf("gate: resolve call %d of %s: %d concurrent writers in a row", index, b.Submission.BatchID(), maxCASAttempts)
}

// publishCorrection publishes the io.awaken.tool.result.corrected.v1 event of rec, a call
// whose resolution was recorded as a correction, on the run's corrections subject (in the
// results stream, beside the results). Its id is
// per call, so a redelivery publishes a duplicate the stream drops.
func (s *Service) publishCorrection(ctx context.Context, b *contracts.BatchRecord, index int, rec contracts.CallRecord) error {
	sub := &b.Submission
	res := rec.Resolution
	op := contracts.OperationID(sub.RunID, sub.Step, rec.CallID)
	published, _ := rec.Output()
	ev, err := s.env.Event(ServiceName, contracts.ResultCorrectedID(op), contracts.TypeResultCorrected, contracts.ResultCorrected{
		OperationID: op, RunID: sub.RunID, BatchID: sub.BatchID(), CallID: rec.CallID, Index: index,
		Published: published, Corrected: res.Output, Outcome: res.Outcome, Note: res.Note,
		Actor: res.Actor, Role: res.Role, At: res.At,
	})
	if err != nil {
		return fmt.Errorf("gate: build correction of %s: %w", op, err)
	}
	if _, err := s.env.Pub.Publish(ctx, s.env.Names.ResultCorrectionsSubject(sub.RunID), ev); err != nil {
		return fmt.Errorf("gate: publish correction of %s: %w", op, err)
	}
	return nil
}

// FaultAfterRunEnd fires after a run cancellation recorded the run's end and before the
// run's open batch is sealed: a crash there leaves the run ended with calls not yet
// terminal, which the redelivered cancellation seals. Meanwhile an executor may already
// have stopped a body on the same cancellation and committed its call Indeterminate
// ("cancelled"): that output seals the batch's remaining calls instead of gating the next
// ([Service.handleOutput]).
const FaultAfterRunEnd pipeline.FaultPoint = "after-run-end"

// endCancelledRun records on the run record that the run was cancelled, so the batcher
// refuses every later batch of it (run_cancelled), and returns the run's open batch, if
// any: the batch the cancellation must seal. The run record holds it (the claim and the
// batch record are one write), so the record this write is based on names every batch of
// the run that can still be open. A run cancelled before has its first end kept. It also
// returns the record as written, for [Service.announceRunEnded].
func (s *Service) endCancelledRun(ctx context.Context, runID string) (*contracts.BatchRecord, contracts.RunRecord, error) {
	rec, err := s.endRun(ctx, runID, contracts.RunEndCancelled)
	if err != nil {
		return nil, rec, err
	}
	if rec.Batch == nil || rec.Batch.Phase != contracts.BatchPhaseOpen {
		return nil, rec, nil
	}
	return rec.Batch, rec, nil
}

// endRun records reason as the end of runID on its run record (creating the record when
// the run never had a batch; a run that ended before keeps its first end) and returns the
// record as written.
func (s *Service) endRun(ctx context.Context, runID, reason string) (contracts.RunRecord, error) {
	rec, _, err := s.env.Runs.Update(ctx, contracts.RunKey(runID), func(cur *contracts.RunRecord, exists bool) error {
		if !exists {
			cur.RunID = runID
		}
		cur.End(contracts.RunEnded{Reason: reason}, s.env.Now())
		return nil
	})
	if err != nil {
		return rec, fmt.Errorf("gate: end run %s (%s): %w", runID, reason, err)
	}
	return rec, nil
}

// announceRunEnded publishes io.awaken.run.ended.v1 for the end rec records, on the run's
// events subject, so a platform (and the doors that wait for a cancel to be done) learns
// that the run takes no more batches. It is published after the seal's outputs — off the
// path of the batch, which the publisher finalizes from those — and under the run's one id
// ({run_id}:ended), so every re-publication (a redelivery, a second cancel) is dropped by
// the stream within its window; a plain subscriber sees each one. One stored message per
// ended run.
func (s *Service) announceRunEnded(ctx context.Context, rec contracts.RunRecord) error {
	if rec.Ended == nil {
		return nil
	}
	ev, err := s.env.Event(ServiceName, pipeline.RunEndedID(rec.RunID), contracts.TypeRunEnded, contracts.RunEndedEvent{
		RunID: rec.RunID, Reason: rec.Ended.Reason, Keys: rec.Ended.Keys, EndedAt: rec.EndedAt,
	})
	if err != nil {
		return fmt.Errorf("gate: build run ended: %w", err)
	}
	if _, err := s.env.Pub.Publish(ctx, s.env.Names.EventsSubject(rec.RunID), ev); err != nil {
		return fmt.Errorf("gate: announce run %s ended: %w", rec.RunID, err)
	}
	return nil
}
