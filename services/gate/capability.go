package gate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// capabilityBoundPrefix starts the Indeterminate reason of the calls of a batch whose run
// ended because a schedule rule named an action kind the run may not perform.
const capabilityBoundPrefix = "capability_bound: "

// capabilityBound reports whether outcome defers call of sub as a scheduled action of a
// kind the run may not perform (as in the original: a schedule with an action kind must be permitted
// by the run's environment, else the run ends with CapabilityBound, with no ticket and no
// execution). The run's permitted kinds are its snapshot's action_kinds. It returns the
// reason the run's unfinished calls are sealed with.
func capabilityBound(sub *contracts.BatchSubmission, outcome contracts.GateOutcome) (string, bool) {
	if outcome.Kind != contracts.GateSchedule || outcome.ActionKind == "" ||
		slices.Contains(sub.Agent.ActionKinds, outcome.ActionKind) {
		return "", false
	}
	return fmt.Sprintf("%saction kind %q is not permitted for run %s", capabilityBoundPrefix, outcome.ActionKind, sub.RunID), true
}

// isCapabilityBound reports whether rec was ended by [capabilityBound].
func isCapabilityBound(rec *contracts.CallRecord) bool {
	return rec.Phase.Kind == contracts.PhaseIndeterminate && strings.HasPrefix(rec.Phase.Reason, capabilityBoundPrefix)
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
