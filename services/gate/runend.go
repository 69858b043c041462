package gate

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// endCancelledRun records on the run record that the run was cancelled, so the batcher
// refuses every later batch of it (run_cancelled), and returns the run's open batch, if
// any: the batch the cancellation must seal. The run record holds it (the claim and the
// batch record are one write), so the record this write is based on names every batch of
// the run that can still be open. A run cancelled before has its first end kept.
func (s *Service) endCancelledRun(ctx context.Context, runID string) (*contracts.BatchRecord, error) {
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
	if rec.Batch == nil || rec.Batch.Phase != contracts.BatchPhaseOpen {
		return nil, nil
	}
	return rec.Batch, nil
}
