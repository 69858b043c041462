package gate

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// endCancelledRun records on the run record that the run was cancelled, so the batcher
// refuses every later batch of it (run_cancelled), and returns the run's active step, if
// any: the batch the cancellation must seal. A run cancelled before has its first end
// kept.
func (s *Service) endCancelledRun(ctx context.Context, runID string) (*int64, error) {
	rec, _, err := s.env.Runs.Update(ctx, contracts.RunKey(runID), func(cur *contracts.RunRecord, exists bool) error {
		if !exists {
			cur.RunID = runID
		}
		cur.End(contracts.RunEnded{Reason: contracts.RunEndCancelled}, s.env.Now())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("gate: end cancelled run %s: %w", runID, err)
	}
	return rec.ActiveStep, nil
}
