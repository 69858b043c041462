package gate

import (
	"context"

	"github.com/awaken-dev/awaken/internal/gatechain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// isCapabilityBound reports whether rec was ended by [gatechain.CapabilityBound].
func isCapabilityBound(rec *contracts.CallRecord) bool {
	return rec.Phase.Kind == contracts.PhaseIndeterminate && gatechain.IsCapabilityBoundReason(rec.Phase.Reason)
}

// endCapabilityBound ends b's run with capability_bound — on the run record, so it takes
// no more batches (run_ended) — and seals every unfinished call of b with reason, whose
// outputs let the publisher finalize the batch, then announces the end
// (io.awaken.run.ended.v1) and deletes the run's limits ledger keys. Redelivery repeats it
// harmlessly.
func (s *Service) endCapabilityBound(ctx context.Context, b *contracts.BatchRecord, reason string) error {
	run, err := s.endRun(ctx, b.Submission.RunID, contracts.RunEndCapabilityBound)
	if err != nil {
		return err
	}
	if err := s.seal(ctx, b, -1, reason, b.Parallel); err != nil {
		return err
	}
	if err := s.announceRunEnded(ctx, run); err != nil {
		return err
	}
	return s.limits.DeleteRunLedgerKeys(ctx, b.Submission.RunID)
}
