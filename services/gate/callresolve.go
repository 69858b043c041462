package gate

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
func (s *Service) handleCallResolve(ctx context.Context, d bus.Delivery) error {
	ev := d.Event
	cr, err := contracts.DecodeCallResolve(ev.Data)
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: decode call resolve: %w", err))
	}
	ctx, b, index, err := s.commandCall(ctx, "call resolve", cr.OperationID,
		func(c zerolog.Context) zerolog.Context {
			return c.Str("actor", cr.Actor).Str("outcome", string(cr.Outcome))
		})
	if err != nil || b == nil {
		return err
	}
	log := zerolog.Ctx(ctx)
	res := contracts.CallResolution{
		CommandID: ev.ID, Outcome: cr.Outcome, Output: cr.ResolvedOutput(), Note: cr.Note,
		Actor: cr.Actor, Role: cr.Role, At: s.env.Now(),
	}
	rec, _, err := s.loadCall(ctx, b, index)
	if err != nil {
		return err
	}
	switch {
	case rec.Resolution != nil && rec.Resolution.CommandID == ev.ID:
		if rec.Resolution.Applied == contracts.ResolutionCorrected {
			return s.publishCorrection(ctx, b, index, rec) // a redelivery: publish again (deduplicated)
		}
		return nil
	case rec.Resolution != nil:
		log.Warn().Str("resolved_by", rec.Resolution.CommandID).Msg("call resolve refused: the call was resolved already")
		return nil
	case rec.Phase.Kind != contracts.PhaseIndeterminate:
		log.Warn().Str("phase", string(rec.Phase.Kind)).Msg("call resolve refused: the call is not indeterminate")
		return nil
	}

	var inResults bool
	if err := s.env.Operation(ServiceName, cr.OperationID).Step(ctx, FaultAfterResolveRecorded, func() (bool, error) {
		inResults, err = s.recordOnBatch(ctx, b, index, res)
		return inResults, err
	}); err != nil {
		return err
	}
	if inResults {
		return s.writeResolution(ctx, b, index, res, false)
	}
	// The batch was finalized first: its results keep the indeterminate result.
	published, err := s.batchPublished(ctx, b)
	if err != nil {
		return err
	}
	if !published {
		return errAwaitingPublication
	}
	return s.writeResolution(ctx, b, index, res, true)
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
// publishes a correction's event.
func (s *Service) writeResolution(ctx context.Context, b *contracts.BatchRecord, index int, res contracts.CallResolution, correction bool) error {
	log := zerolog.Ctx(ctx)
	for range maxCASAttempts {
		rec, rev, err := s.loadCall(ctx, b, index)
		if err != nil {
			return err
		}
		if correction {
			err = rec.RecordCorrection(res, res.At)
		} else {
			err = rec.ResolveIndeterminate(res, res.At)
		}
		if err != nil {
			return bus.Permanent(fmt.Errorf("gate: resolve %s: %w", rec.CallID, err))
		}
		switch _, err := s.putCall(ctx, b, index, rec, rev); {
		case errors.Is(err, errRaced):
			continue
		case err != nil:
			return err
		}
		if correction {
			log.Info().Msg("call resolved after publication: correction recorded")
			return s.publishCorrection(ctx, b, index, rec)
		}
		log.Info().Msg("call resolved: the batch's results carry the resolution")
		return nil
	}
	return fmt.Errorf("gate: resolve call %d of %s: %d concurrent writers in a row", index, b.Submission.BatchID(), maxCASAttempts)
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
