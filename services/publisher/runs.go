package publisher

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// settleRun updates the run record once sub's batch is finalized: the batch is no longer
// the run's active one, so the run may take its next batch, and an end the batch decided
// (ended, a state conflict) is recorded so the run takes no more. It is idempotent, so
// every delivery of the batch's outputs may run it.
func (s *Service) settleRun(ctx context.Context, sub *contracts.BatchSubmission, ended *contracts.RunEnded) error {
	_, _, err := s.env.Runs.Update(ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		if !exists {
			cur.RunID = sub.RunID
		}
		changed := false
		if cur.ActiveStep != nil && *cur.ActiveStep == sub.Step {
			cur.ActiveStep, changed = nil, true
		}
		if ended != nil && cur.End(*ended, s.env.Now()) {
			changed = true
		}
		if !changed {
			return state.ErrNoChange
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("publisher: batch %s: settle run %s: %w", sub.BatchID(), sub.RunID, err)
	}
	return nil
}
