package batcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// claimRun makes sub's batch the active batch of its run, by compare-and-swap on the run
// record, before anything of the batch is stored: one active batch per run. Two batcher
// replicas claiming two steps of one run at once are ordered by the store, and the loser
// is refused. It returns the run's rejection (run_busy, run_cancelled, run_ended) when the
// run cannot take the batch; claiming the step that is already active succeeds (a
// redelivery, or a resubmission of the open batch).
func (s *Service) claimRun(ctx context.Context, sub *contracts.BatchSubmission) error {
	var refused *contracts.Rejection
	_, _, err := s.env.Runs.Update(ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		refused = nil
		if !exists {
			cur.RunID = sub.RunID
		}
		if refused = cur.RejectionForNewBatch(sub.Step); refused != nil {
			return state.ErrNoChange
		}
		if cur.ActiveStep != nil {
			return state.ErrNoChange // this very step is active already
		}
		step := sub.Step
		cur.ActiveStep = &step
		return nil
	})
	if err != nil {
		return fmt.Errorf("batcher: batch %s: claim run %s: %w", sub.BatchID(), sub.RunID, err)
	}
	if refused != nil {
		return refused
	}
	return nil
}

// releaseRun clears the run's active step if it is sub's, for a claim that turned out to
// stand for no open batch: the batch already existed and was finished (an identical
// resubmission of a published batch), or it could not be recorded at all.
func (s *Service) releaseRun(ctx context.Context, sub *contracts.BatchSubmission) error {
	_, _, err := s.env.Runs.Update(ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		if !exists || cur.ActiveStep == nil || *cur.ActiveStep != sub.Step {
			return state.ErrNoChange
		}
		cur.ActiveStep = nil
		return nil
	})
	if err != nil {
		return fmt.Errorf("batcher: batch %s: release run %s: %w", sub.BatchID(), sub.RunID, err)
	}
	return nil
}

// refusedByRun reports whether err is the run's refusal of a new batch.
func refusedByRun(err error) (*contracts.Rejection, bool) {
	var rej *contracts.Rejection
	if !errors.As(err, &rej) {
		return nil, false
	}
	switch rej.Code {
	case contracts.RejectRunBusy, contracts.RejectRunCancelled, contracts.RejectRunEnded:
		return rej, true
	}
	return nil, false
}
