package gate

import (
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// indeterminate writes call i of b as an executor that lost its body would: Indeterminate.
func (h *harness) indeterminate(b *contracts.BatchRecord, i int) {
	h.T.Helper()
	rec := newCallRecord(b, i)
	if err := rec.MarkIndeterminate("executor_lost", h.Env.Now()); err != nil {
		h.T.Fatal(err)
	}
	if _, err := h.Env.Calls.Put(h.Ctx, callKey(b, i), rec); err != nil {
		h.T.Fatal(err)
	}
}

func (h *harness) resolveCall(id string, b *contracts.BatchRecord, i int, outcome contracts.ReconcileOutcome, out *contracts.ToolOutput) {
	h.publish(h.Env.Names.CallResolveSubject(), id, contracts.TypeCallResolve,
		contracts.CallResolve{OperationID: op(b, i), Outcome: outcome, Output: out, Note: "checked", Actor: "ops:ana", Role: "operator"})
}

// TestCallResolveOpenBatchSurvivesACrash: the gate records a resolution on the open batch
// (the run record) first and then completes the call record; a crash between the two
// leaves the batch resolved and the call Indeterminate, and the redelivered command
// completes the call with the same resolution, recorded once.
func TestCallResolveOpenBatchSurvivesACrash(t *testing.T) {
	h := newHarness(t)
	b := h.store(h.submission(1, call("call_1", "echo", `{}`), call("call_2", "ask_me", `{}`)))
	h.indeterminate(b, 0)
	h.FailAt(FaultAfterResolveRecorded, op(b, 0), 1, nil)
	out := contracts.TextOutput("call_1", "done by hand")
	h.resolveCall("res#1", b, 0, contracts.ReconcileRan, &out)

	rec := h.waitCall(b, 0, "resolved", func(rec contracts.CallRecord) bool { return rec.Resolution != nil })
	if got, _ := rec.Output(); rec.Phase.Kind != contracts.PhaseCompleted || got.Text() != "done by hand" ||
		rec.Resolution.CommandID != "res#1" || rec.Resolution.Applied != contracts.ResolutionResolved ||
		rec.Resolution.Actor != "ops:ana" || rec.Resolution.Role != "operator" {
		t.Fatalf("resolved call = %+v (resolution %+v)", rec.Phase, rec.Resolution)
	}
	if n := h.Injected(); n != 1 {
		t.Fatalf("crash fired %d times, want 1", n)
	}
	run, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(testRunID))
	if err != nil {
		t.Fatal(err)
	}
	if held := run.Holds(1); held == nil || len(held.Resolutions) != 1 || held.Resolutions[0].CommandID != "res#1" {
		t.Fatalf("the open batch's resolutions = %+v, want the one", run.Batch)
	}
}

// TestCallResolveFinalizedBatchWaitsForPublication: a resolution that finds its batch
// finalized without it is a correction — and waits until the results are published (the
// command is retried), so the correction never goes out before the result it corrects.
// Then the call keeps its Indeterminate phase with the correction recorded, and the
// correction event names both results.
func TestCallResolveFinalizedBatchWaitsForPublication(t *testing.T) {
	h := newHarness(t)
	b := h.store(h.submission(1, call("call_1", "echo", `{}`)))
	h.indeterminate(b, 0)
	sub := &b.Submission
	if _, _, err := h.Env.Runs.Update(h.Ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, _ bool) error {
		cur.Holds(sub.Step).Phase, cur.ActiveStep = contracts.BatchPhaseFinalized, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.resolveCall("res#2", b, 0, contracts.ReconcileNotRun, nil)

	control, err := h.JS.Consumer(h.Ctx, h.Env.Names.ControlStream(), contracts.ConsumerGateControl)
	if err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, waitLong, func() bool {
		info, err := control.Info(h.Ctx)
		return err == nil && info.NumRedelivered > 0
	}, "the resolution retried while the results are not published")
	if rec := h.mustCall(b, 0); rec.Resolution != nil || rec.Phase.Kind != contracts.PhaseIndeterminate {
		t.Fatalf("resolution applied before the publication: %+v", rec.Resolution)
	}
	if n := len(h.Messages(h.Env.Names.ResultsStream(), h.Env.Names.ResultCorrectionsSubject(sub.RunID))); n != 0 {
		t.Fatalf("%d corrections published before the results", n)
	}

	h.published(b)
	rec := h.waitCall(b, 0, "corrected", func(rec contracts.CallRecord) bool { return rec.Resolution != nil })
	if rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Resolution.Applied != contracts.ResolutionCorrected ||
		rec.Resolution.Output.Text() != contracts.NotRunPrefix+"checked" {
		t.Fatalf("corrected call = %+v (resolution %+v)", rec.Phase, rec.Resolution)
	}
	var msgs []msg
	natstest.WaitFor(t, waitLong, func() bool {
		msgs = h.Messages(h.Env.Names.ResultsStream(), h.Env.Names.ResultCorrectionsSubject(sub.RunID))
		return len(msgs) == 1
	}, "the correction event")
	if msgs[0].Event.Type != contracts.TypeResultCorrected || msgs[0].Event.ID != contracts.ResultCorrectedID(op(b, 0)) {
		t.Fatalf("correction message = %s %s", msgs[0].Event.Type, msgs[0].Event.ID)
	}
}
