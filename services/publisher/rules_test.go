package publisher_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestStateConflictEndsTheRun: two calls of one batch set the same exclusive key. The
// original ends the run with StateConflict; here the finalized event says so, naming the
// conflicting key ("run_ended": {"reason": "state_conflict", "keys": ["owner"]}), and the
// run record is ended, so the batcher refuses the run's next batch with run_ended.
func TestStateConflictEndsTheRun(t *testing.T) {
	h := newHarness(t)
	const run = "run-conflict-ends"
	sub := submission(run, 1, calls(3, "echo")...)
	h.createBatch(sub, false)
	fine := contracts.Command{Key: "notes", Scope: contracts.ScopeThread, Merge: contracts.MergeDisjoint,
		Action: contracts.Action{Kind: contracts.ActionSet, Value: json.RawMessage(`"x"`)}}
	h.completeStaging(sub, func(k int) contracts.Command {
		if k == 2 {
			return fine
		}
		return claimOwner
	})
	h.announce(sub, 2, false, "1")
	f := h.waitPublications(t, run, 1)[0].finalized
	if f.RunEnded == nil || f.RunEnded.Reason != contracts.RunEndStateConflict || !slices.Equal(f.RunEnded.Keys, []string{"owner"}) {
		t.Fatalf("finalized run_ended = %+v, want state_conflict on [owner]", f.RunEnded)
	}
	if len(f.State) != 0 {
		t.Errorf("finalized state = %+v, want empty: no write of a conflicting commit wins", f.State)
	}
	rec, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(run))
	if err != nil {
		t.Fatalf("run record: %v", err)
	}
	if rec.Ended == nil || rec.Ended.Reason != contracts.RunEndStateConflict || rec.ActiveStep != nil {
		t.Errorf("run record %+v, want ended in a state conflict with no active batch", rec)
	}
	if rej := rec.RejectionForNewBatch(2); rej == nil || rej.Code != contracts.RejectRunEnded {
		t.Errorf("the run's next batch is refused with %v, want run_ended", rej)
	}
}
