package gate

import (
	"context"
	"fmt"

	"github.com/awaken-dev/awaken/internal/gatechain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// isCapabilityBound reports whether rec was ended by [gatechain.CapabilityBound].
func isCapabilityBound(rec *contracts.CallRecord) bool {
	return rec.Phase.Kind == contracts.PhaseIndeterminate && gatechain.IsCapabilityBoundReason(rec.Phase.Reason)
}

// endCapabilityBound ends b's run with capability_bound — on the run record, so it takes
// no more batches (run_ended) — and seals every unfinished call of b with reason, whose
// outputs let the publisher finalize the batch. Redelivery repeats it harmlessly.
func (s *Service) endCapabilityBound(ctx context.Context, b *contracts.BatchRecord, reason string) error {
	runID := b.Submission.RunID
	if _, _, err := s.env.Runs.Update(ctx, contracts.RunKey(runID), func(cur *contracts.RunRecord, exists bool) error {
		if !exists {
			cur.RunID = runID
		}
		cur.End(contracts.RunEnded{Reason: contracts.RunEndCapabilityBound}, s.env.Now())
		return nil
	}); err != nil {
		return fmt.Errorf("gate: end run %s (capability bound): %w", runID, err)
	}
	return s.seal(ctx, b, -1, reason, b.Parallel)
}
