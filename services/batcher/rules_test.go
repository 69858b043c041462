package batcher_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// rejectionOf waits for the rejection answering the submission with ce-id eventID.
func (h *harness) rejectionOf(eventID string) contracts.BatchRejected {
	h.T.Helper()
	var got *contracts.BatchRejected
	natstest.WaitFor(h.T, waitTimeout, func() bool {
		for _, r := range h.rejections() {
			if r.EventID == eventID {
				got = &r
				return true
			}
		}
		return false
	}, "the rejection of "+eventID)
	return *got
}

// noBatch asserts that (run, step) has no batch record.
func (h *harness) noBatch(run string, step int64) {
	h.T.Helper()
	if _, err := pipeline.ReadBatch(h.Ctx, h.Env.Runs, h.Env.Batches, run, step, true); !errors.Is(err, state.ErrNotFound) {
		h.T.Errorf("batch %s is stored (err %v), want nothing of the refused submission", contracts.BatchID(run, step), err)
	}
}

// stored reports whether (run, step) has a batch record, in the run record or archived.
func (h *harness) stored(run string, step int64) bool {
	_, err := pipeline.ReadBatch(h.Ctx, h.Env.Runs, h.Env.Batches, run, step, false)
	return err == nil
}

// TestRunPolicyThatDoesNotCompileIsRejectedAtSubmission: a run policy whose pattern the
// rule grammar refuses is rejected with invalid_policy (naming the rule) before anything
// is stored, instead of being accepted and blocking every call with "invalid run policy".
func TestRunPolicyThatDoesNotCompileIsRejectedAtSubmission(t *testing.T) {
	h := newHarness(t)
	const run = "run-bad-policy"
	sub := submission(run, 1, call("c1", "echo"))
	sub.Policy = &contracts.PolicyConfig{Rules: []contracts.PolicyRule{{Pattern: `echo(text =~ "x")`, Behavior: contracts.BehaviorAllow}}}
	h.submitSettled("bad-policy-1", sub)

	got := h.rejectionOf("bad-policy-1")
	if got.Code != string(contracts.RejectInvalidPolicy) || got.RunID != run || got.BatchID != sub.BatchID() ||
		!strings.Contains(got.Message, "rules[0].pattern") {
		t.Errorf("rejection %+v, want invalid_policy for %s naming rules[0].pattern", got, sub.BatchID())
	}
	h.noBatch(run, 1)
	h.wantRecorded(run, 0)
}

// TestOneActiveBatchPerRun: while step 1 of a run is open, a submission of step 2 is
// refused with run_busy (batch_id and run_id set) and nothing of it is stored; an
// identical resubmission of step 1 stays a no-op; once step 1 is finalized (the publisher
// clears the run's active batch), step 2 sent again under a new ce-id is accepted.
func TestOneActiveBatchPerRun(t *testing.T) {
	h := newHarness(t)
	const run = "run-busy"
	first := submission(run, 1, call("c1", "echo"))
	h.Submit("busy-1", first)
	h.waitRecorded(run, 1)

	second := submission(run, 2, call("c1", "echo"))
	h.submitSettled("busy-2", second)
	got := h.rejectionOf("busy-2")
	if got.Code != string(contracts.RejectRunBusy) || got.RunID != run || got.BatchID != second.BatchID() ||
		!strings.Contains(got.Message, first.BatchID()) {
		t.Fatalf("rejection %+v, want run_busy for %s naming the open %s", got, second.BatchID(), first.BatchID())
	}
	h.noBatch(run, 2)

	h.submitSettled("busy-1-again", first)
	for _, r := range h.rejections() {
		if r.EventID == "busy-1-again" {
			t.Fatalf("identical resubmission of the open batch was rejected: %+v", r)
		}
	}

	// The publisher's part, once step 1 is finalized: the run has no active batch (and
	// has not archived step 1 yet: the claim of step 2 must).
	if _, _, err := h.Env.Runs.Update(h.Ctx, contracts.RunKey(run), func(cur *contracts.RunRecord, _ bool) error {
		cur.Batch.Phase, cur.ActiveStep = contracts.BatchPhaseFinalized, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.Submit("busy-2-again", second)
	natstest.WaitFor(t, waitTimeout, func() bool { return h.stored(run, 2) }, "step 2 recorded once step 1 is no longer active")
	if rec, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(run)); err != nil || rec.ActiveStep == nil || *rec.ActiveStep != 2 ||
		rec.Holds(2) == nil {
		t.Errorf("run record %+v (%v), want step 2 active and held", rec, err)
	}
	recordedStep2 := h.runRevision(run)
	// Step 1 left the run record archived, so an identical resubmission of it is still
	// the no-op, not a second run of the batch.
	if a, _, err := h.Env.Batches.Get(h.Ctx, contracts.BatchKey(run, 1)); err != nil || a.Phase != contracts.BatchPhaseFinalized {
		t.Errorf("step 1 archived as %+v (%v), want finalized", a.Phase, err)
	}
	h.submitSettled("busy-1-late", first)
	for _, r := range h.rejections() {
		if r.EventID == "busy-1-late" {
			t.Fatalf("identical resubmission of the archived batch was rejected: %+v", r)
		}
	}
	h.wantRunUnchanged(run, recordedStep2)
}

// TestOneActiveBatchPerRunUnderConcurrentBatchers: two batcher replicas receive steps 1
// and 2 of many runs at once; the run record's compare-and-swap admits exactly one step
// of each run and refuses the other with run_busy.
func TestOneActiveBatchPerRunUnderConcurrentBatchers(t *testing.T) {
	h := newHarness(t)
	h.StartReplica() // a second replica on the same durable consumer
	const runs = 12
	var last uint64
	for i := range runs {
		run := "run-race-" + string(rune('a'+i))
		for step := int64(1); step <= 2; step++ {
			last = h.Submit(run+"-"+string(rune('0'+step)), submission(run, step, call("c1", "echo")))
		}
	}
	h.settled(last)
	busy := map[string]int{}
	for _, r := range h.rejections() {
		if r.Code != string(contracts.RejectRunBusy) {
			t.Errorf("unexpected rejection %+v", r)
		}
		busy[r.RunID]++
	}
	for i := range runs {
		run := "run-race-" + string(rune('a'+i))
		stored := 0
		for step := int64(1); step <= 2; step++ {
			if h.stored(run, step) {
				stored++
			}
		}
		if stored != 1 || busy[run] != 1 {
			t.Errorf("run %s: %d batches stored and %d run_busy rejections, want 1 and 1", run, stored, busy[run])
		}
	}
}

// TestEndedRunTakesNoMoreBatches: a cancelled run refuses every later batch with
// run_cancelled, a run ended otherwise (a state conflict) with run_ended; nothing of the
// refused batch is stored.
func TestEndedRunTakesNoMoreBatches(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct {
		run, reason string
		code        contracts.RejectCode
	}{
		{"run-cancelled", contracts.RunEndCancelled, contracts.RejectRunCancelled},
		{"run-ended", contracts.RunEndStateConflict, contracts.RejectRunEnded},
	} {
		rec := contracts.RunRecord{RunID: tt.run, Ended: &contracts.RunEnded{Reason: tt.reason}}
		if _, err := h.Env.Runs.Create(h.Ctx, contracts.RunKey(tt.run), rec); err != nil {
			t.Fatal(err)
		}
		sub := submission(tt.run, 3, call("c1", "echo"))
		h.submitSettled(tt.run+"-3", sub)
		got := h.rejectionOf(tt.run + "-3")
		if got.Code != string(tt.code) || got.RunID != tt.run || got.BatchID != sub.BatchID() {
			t.Errorf("rejection %+v, want %s for %s", got, tt.code, sub.BatchID())
		}
		h.noBatch(tt.run, 3)
	}
}
