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
// outputs let the publisher finalize the batch, then announces the end
// (io.awaken.run.ended.v1). Redelivery repeats it harmlessly.
func (s *Service) endCapabilityBound(ctx context.Context, b *contracts.BatchRecord, reason string) error {
	run, err := s.endRun(ctx, b.Submission.RunID, contracts.RunEndCapabilityBound)
	if err != nil {
		return err
	}
	if err := s.seal(ctx, b, -1, reason, b.Parallel); err != nil {
		return err
	}
	return s.announceRunEnded(ctx, run)
}
