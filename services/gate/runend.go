package gate

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

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
