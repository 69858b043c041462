package contracts

import (
	"errors"
	"fmt"
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
// which of its batches is active (submitted and not yet finalized), the record of its
// current batch, and whether the run ended. Every write is a compare-and-swap, so two
// batcher replicas that accept batches of one run at once cannot both claim it.
//
// The run record holds the open batch: accepting a batch (claiming the run and recording
// the batch) is one write of this record ([RunRecord.Open]), and finalizing the batch and
// releasing the run is one more ([RunRecord.FinalizeBatch]). A finished batch stays in
// Batch until the next batch of the run replaces it; the one that replaces it first
// archives it in the batches bucket ([Names.BatchesBucket]), where the publisher also
// archives it once its results are published, so a batch that is no longer the run's
// current one is always found there.
type RunRecord struct {
	RunID string `json:"run_id"`
	// ActiveStep is the step of the run's one active batch; nil when none is. It is
	// Batch's step while Batch is open.
	ActiveStep *int64 `json:"active_step,omitempty"`
	// Batch is the record of the run's current batch: the open one, or the last one
	// finalized until the next batch replaces it. Its phase is open or finalized, never
	// published (the archive records that).
	Batch *BatchRecord `json:"batch,omitempty"`
	// LastStep is the highest step the run ever accepted; nil on a record written before
	// it existed. A step above it has never been recorded, so accepting it needs no look at
	// the archive.
	LastStep *int64 `json:"last_step,omitempty"`
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

// Holds returns the record of step when it is the run's current batch (open or
// finalized), else nil.
func (r *RunRecord) Holds(step int64) *BatchRecord {
	if r.Batch == nil || r.Batch.Submission.Step != step {
		return nil
	}
	return r.Batch
}

// MayHaveRecorded reports whether a batch of step may have been recorded for this run
// before (and so may be in the archive): false only for a step above every step the run
// accepted.
func (r *RunRecord) MayHaveRecorded(step int64) bool {
	return r.LastStep == nil || step <= *r.LastStep
}

// Open makes rec, an open batch of this run, the run's current and active batch: the
// claim and the batch record in one write. The caller has checked
// [RunRecord.RejectionForNewBatch] and archived the batch it replaces.
func (r *RunRecord) Open(rec BatchRecord) error {
	sub := &rec.Submission
	if sub.RunID != r.RunID || rec.Phase != BatchPhaseOpen {
		return fmt.Errorf("%w: batch %s (%s) cannot open on run %s", ErrInvalidTransition, sub.BatchID(), rec.Phase, r.RunID)
	}
	if r.Batch != nil && r.Batch.Phase == BatchPhaseOpen && r.Batch.Submission.Step != sub.Step {
		return fmt.Errorf("%w: batch %s of run %s is still open", ErrInvalidTransition, r.Batch.Submission.BatchID(), r.RunID)
	}
	step := sub.Step
	r.Batch, r.ActiveStep = &rec, &step
	if r.LastStep == nil || step > *r.LastStep {
		last := step
		r.LastStep = &last
	}
	return nil
}

// FinalizeBatch finalizes the run's current batch, which must be step's, with the records
// of its calls ([BatchRecord.Finalize], whose errors it returns: [ErrBatchFinalized] for
// a batch finalized before), releases the run (the run may take its next batch) and
// records the end the batch decided, if any (ended, a state conflict): one write.
func (r *RunRecord) FinalizeBatch(step int64, calls []CallRecord, ended *RunEnded, at time.Time) error {
	b := r.Holds(step)
	if b == nil {
		return fmt.Errorf("%w: batch %s is not the current batch of run %s", ErrBatchNotHeld, BatchID(r.RunID, step), r.RunID)
	}
	if err := b.Finalize(calls); err != nil {
		return err
	}
	if r.ActiveStep != nil && *r.ActiveStep == step {
		r.ActiveStep = nil
	}
	if ended != nil {
		r.End(*ended, at)
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
