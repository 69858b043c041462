package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Where a batch record lives (docs/architecture.md, "The run lifecycle"): the run record
// ([contracts.RunRecord.Batch]) holds the run's current batch — the open one, or the last
// one finalized until the next batch of the run replaces it — and the batches bucket
// archives every batch that is finished: the publisher archives it (phase published) once
// its results are published, and the claim that replaces a finalized batch in the run
// record archives it first (phase finalized) if the publisher has not yet. So a batch is
// in the run record, or in the archive, or both (then the archive is at least as far).

// ReadBatch returns the record of batch (runID, step) wherever it lives: the run record's
// current batch while it is open, else the archive's, else the run record's finalized one.
// It returns [state.ErrNotFound] when neither holds it. fromLeader reads both from the
// leader of their streams (state.ReadFromLeader): for an absence that drops work.
//
// The order is safe against the writes between the two reads: a batch leaves the run
// record only after it is archived, and an open batch is never archived.
func ReadBatch(ctx context.Context, runs *state.Store[contracts.RunRecord], batches *state.Store[contracts.BatchRecord],
	runID string, step int64, fromLeader bool) (contracts.BatchRecord, error) {
	var run contracts.RunRecord
	var err error
	if fromLeader {
		run, _, err = runs.GetFromLeader(ctx, contracts.RunKey(runID))
	} else {
		run, _, err = runs.Get(ctx, contracts.RunKey(runID))
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return contracts.BatchRecord{}, fmt.Errorf("pipeline: read run %s: %w", runID, err)
	}
	held := run.Holds(step)
	if held != nil && held.Phase == contracts.BatchPhaseOpen {
		return *held, nil
	}
	key := contracts.BatchKey(runID, step)
	var rec contracts.BatchRecord
	if fromLeader {
		rec, _, err = batches.GetFromLeader(ctx, key)
	} else {
		rec, _, err = batches.Get(ctx, key)
	}
	switch {
	case err == nil:
		return rec, nil
	case !errors.Is(err, state.ErrNotFound):
		return contracts.BatchRecord{}, fmt.Errorf("pipeline: read batch %s: %w", contracts.BatchID(runID, step), err)
	case held != nil:
		return *held, nil
	}
	return contracts.BatchRecord{}, err
}

// AcceptResult is what [Env.AcceptBatch] found or did.
type AcceptResult struct {
	// Created is true when this call recorded the batch (claimed the run for it).
	Created bool
	// Existing is the record of the same batch id found instead (the run's current batch
	// or an archived one): the caller compares its hash.
	Existing *contracts.BatchRecord
	// Refused is the run's refusal (run_busy, run_cancelled, run_ended) of a batch it
	// never recorded.
	Refused *contracts.Rejection
}

// AcceptBatch claims rec's run for rec, an open batch, and records it, in one
// compare-and-swap on the run record: one active batch per run, and the batch and its
// pins durable before any of its work exists. A batch id the run recorded before is not
// recorded again: its record is returned (the run's current batch, or from the archive,
// read from the leader, since an absence taken from a replica behind would run the batch
// a second time). A finalized batch the new one replaces is archived first, so it is
// never in neither place.
func (e *Env) AcceptBatch(ctx context.Context, rec contracts.BatchRecord) (AcceptResult, error) {
	sub := &rec.Submission
	var res AcceptResult
	_, _, err := e.Runs.Update(ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		res = AcceptResult{}
		if !exists {
			cur.RunID = sub.RunID
		}
		if held := cur.Holds(sub.Step); held != nil {
			existing := *held
			res.Existing = &existing
			return state.ErrNoChange
		}
		// Another batch is current, or none: an earlier record of this batch id can only
		// be in the archive.
		if exists && cur.MayHaveRecorded(sub.Step) {
			archived, _, err := e.Batches.GetFromLeader(ctx, contracts.BatchKey(sub.RunID, sub.Step))
			switch {
			case err == nil:
				res.Existing = &archived
				return state.ErrNoChange
			case !errors.Is(err, state.ErrNotFound):
				return fmt.Errorf("read archived batch: %w", err)
			}
		}
		if res.Refused = cur.RejectionForNewBatch(sub.Step); res.Refused != nil {
			return errRefused
		}
		// A step the run went past, of which nothing is kept: its batch may have run and
		// expired (the run record, the run's exactly-once marker, outlives the records of
		// its batches), so it is refused rather than run a second time.
		if exists && cur.LastStep != nil && sub.Step <= *cur.LastStep {
			res.Refused = contracts.Reject(contracts.RejectStaleStep,
				"batch %s: run %s has accepted steps up to %d and keeps no record of step %d (finished longer ago than the run retention, or never submitted); it is not run: submit the next step",
				sub.BatchID(), sub.RunID, *cur.LastStep, sub.Step)
			return errRefused
		}
		if prev := cur.Batch; prev != nil {
			if prev.Phase == contracts.BatchPhaseOpen {
				// Not reachable while active_step names the open batch; a record that says
				// otherwise is refused as busy rather than losing the open batch.
				res.Refused = contracts.Reject(contracts.RejectRunBusy, "batch %s of run %s is not published yet; submit %s again once it is",
					prev.Submission.BatchID(), sub.RunID, sub.BatchID())
				return errRefused
			}
			if _, err := e.ArchiveBatch(ctx, *prev); err != nil {
				return err
			}
		}
		if err := cur.Open(rec); err != nil {
			return err
		}
		res.Created = true
		return nil
	})
	if err != nil {
		return AcceptResult{}, fmt.Errorf("pipeline: accept batch %s: %w", sub.BatchID(), err)
	}
	return res, nil
}

// errRefused is how AcceptBatch's compare-and-swap callback reports a refusal. A refusal is
// final for the submission, and the run record it was read from may come from a replica
// behind the run's last write (a run still busy with the batch whose publication has just
// released it, say), so it is confirmed on the stream leader's run record.
var errRefused = fmt.Errorf("the run refuses the batch: %w", state.ErrNoChangeOnLeader)

// ArchiveBatch writes rec, a finished batch (finalized or published), to the batches
// bucket unless it is there already. It reports whether this call wrote it.
//
// A finalized batch — the claim of the run's next batch archiving the one its run record
// holds — is not archived over the marker of an expired archive: only a published batch's
// archive expires, so the marker says the batch was published and its records are gone,
// and archiving it again would leave a finalized record that carries no TTL and that no
// publisher ever marks published again (the marker is kept as long as the run record can
// hold the batch: bus.TopologyConfig.archiveMarkerTTL).
func (e *Env) ArchiveBatch(ctx context.Context, rec contracts.BatchRecord) (bool, error) {
	if rec.Phase == contracts.BatchPhaseOpen {
		return false, fmt.Errorf("pipeline: archive %s: %w: the batch is open", rec.Submission.BatchID(), contracts.ErrInvalidTransition)
	}
	create := e.Batches.Create
	if rec.Phase == contracts.BatchPhaseFinalized {
		create = e.Batches.CreateFirst
	}
	_, err := create(ctx, contracts.BatchKey(rec.Submission.RunID, rec.Submission.Step), rec)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, state.ErrExists):
		return false, nil
	}
	return false, fmt.Errorf("pipeline: archive %s: %w", rec.Submission.BatchID(), err)
}
