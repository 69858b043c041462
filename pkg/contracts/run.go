package contracts

import (
	"errors"
	"slices"
	"time"
)

// Why a run ended, in [RunEnded.Reason].
const (
	// RunEndCancelled: the run was cancelled (io.awaken.run.cancel.v1).
	RunEndCancelled = "cancelled"
	// RunEndStateConflict: a batch of the run staged conflicting state (the
	// original's StateConflict failure); the conflicting keys are in [RunEnded.Keys].
	RunEndStateConflict = "state_conflict"
	// RunEndCapabilityBound: a schedule rule deferred a call as an action kind the run
	// may not perform (the original's CapabilityBound failure).
	RunEndCapabilityBound = "capability_bound"
)

// RunEnded says that, and why, a run ended. It is part of the run record and, for an end
// decided when a batch is published (a state conflict), of that batch's finalized event
// ("run_ended"). A run that ended takes no more batches.
type RunEnded struct {
	Reason string `json:"reason"`
	// Keys are the conflicting state keys of a state_conflict, sorted, each once.
	Keys []string `json:"keys,omitempty"`
}

// RunRecord is the durable lifecycle of one run, keyed by run id ([Names.RunsBucket]):
// which of its batches is active (submitted and not yet finalized) and whether the run
// ended. Every write is a compare-and-swap, so two batcher replicas that accept batches
// of one run at once cannot both claim it.
type RunRecord struct {
	RunID string `json:"run_id"`
	// ActiveStep is the step of the run's one active batch; nil when none is.
	ActiveStep *int64 `json:"active_step,omitempty"`
	// Ended is set once, when the run ends; it never changes afterwards.
	Ended   *RunEnded `json:"ended,omitempty"`
	EndedAt time.Time `json:"ended_at,omitzero"`
}

// RejectionForNewBatch is the rejection of a new batch of step for this run, or nil when
// the run can take it: run_cancelled or run_ended once it ended, run_busy while another
// step is active. The active step itself is not refused (a resubmission of the open batch).
func (r *RunRecord) RejectionForNewBatch(step int64) *Rejection {
	batchID := BatchID(r.RunID, step)
	switch {
	case r.Ended != nil && r.Ended.Reason == RunEndCancelled:
		return Reject(RejectRunCancelled, "run %s was cancelled; batch %s is not accepted", r.RunID, batchID)
	case r.Ended != nil:
		return Reject(RejectRunEnded, "run %s ended (%s); batch %s is not accepted", r.RunID, r.Ended.Reason, batchID)
	case r.ActiveStep != nil && *r.ActiveStep != step:
		return Reject(RejectRunBusy, "batch %s of run %s is not published yet; submit %s again once it is",
			BatchID(r.RunID, *r.ActiveStep), r.RunID, batchID)
	}
	return nil
}

// End records that the run ended for ended's reason; a run that already ended keeps its
// first end. It reports whether the record changed.
func (r *RunRecord) End(ended RunEnded, at time.Time) bool {
	if r.Ended != nil {
		return false
	}
	r.Ended, r.EndedAt = &ended, at
	return true
}

// StateConflictKeys returns the sorted keys of cmds that conflict under the rules of
// [ValidateStagedCommands] (an exclusive key set twice, or one key staged under two merge
// policies), each once; nil when none does. Commands that are invalid in themselves are
// not conflicts and are ignored here.
func StateConflictKeys(cmds []Command) []string {
	type slot struct {
		scope Scope
		key   string
	}
	merges := map[slot]MergePolicy{}
	sets := map[slot]int{}
	conflicting := map[string]bool{}
	for _, c := range cmds {
		if c.Validate() != nil {
			continue
		}
		k := slot{c.Scope, c.Key}
		if m, ok := merges[k]; ok && m != c.Merge {
			conflicting[c.Key] = true
		} else if !ok {
			merges[k] = c.Merge
		}
		if c.Action.Kind == ActionSet {
			sets[k]++
			if c.Merge == MergeExclusive && sets[k] > 1 {
				conflicting[c.Key] = true
			}
		}
	}
	if len(conflicting) == 0 {
		return nil
	}
	keys := make([]string, 0, len(conflicting))
	for k := range conflicting {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// IsStateConflict reports whether err (from [ValidateStagedCommands]) is a state conflict
// rather than an invalid command.
func IsStateConflict(err error) bool { return errors.Is(err, ErrStateConflict) }
