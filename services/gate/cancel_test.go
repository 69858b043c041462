package gate

import (
	"errors"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"testing"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// TestCancelSealsTheRun: cancelling a run seals its open batch — the executing call, the
// call parked on a schedule and the ungated call become Indeterminate("cancelled"), the
// completed call keeps its output — clears the ticket, writes one CallOutput per sealed
// call (its sealing revision, which advances no sequential dispatch), and leaves a
// finished batch alone. A late timer and a late approval change nothing.
func TestCancelSealsTheRun(t *testing.T) {
	h := newHarness(t)

	// A published batch of the run: not open, so not touched.
	done := h.submission(1, call("call_0", "echo", `{}`))
	doneRec := h.store(done)
	h.published(doneRec)
	// The open batch: call_1 completed, call_2 executing, call_3 parked, call_4 ungated.
	b := h.store(h.submission(2,
		call("call_1", "stub", `{}`),
		call("call_2", "echo", `{}`),
		call("call_3", "later_long", `{}`),
		call("call_4", "echo", `{}`)))
	h.gate(b, 0)
	h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	h.gate(b, 1)
	h.waitCall(b, 1, "executing", isPhase(contracts.PhaseExecuting))
	h.gate(b, 2)
	rec := h.waitCall(b, 2, "parked", isPhase(contracts.PhaseAwaiting))
	corr := rec.Phase.Wait.CorrelationID
	tk := h.waitTicket(corr)
	h.quiet()

	h.cancelRun("cancel-1", testRunID)
	for i := 1; i < 4; i++ {
		rec := h.waitCall(b, i, "sealed", isPhase(contracts.PhaseIndeterminate))
		if rec.Phase.Reason != "cancelled" {
			t.Errorf("call %d reason %q", i, rec.Phase.Reason)
		}
	}
	h.quiet()
	if _, ok := h.ticket(corr); ok {
		t.Error("ticket survived the cancellation")
	}
	h.cancelRun("cancel-2", testRunID) // redelivery with another id
	h.fireTimer("late-timer", corr, tickets.TimerDue)
	h.resume("late-resume", allow(tk))
	if a := h.waitAnswer("late-resume"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeNotWaiting) {
		t.Errorf("late approval answered %+v", a)
	}
	h.quiet()

	if rec := h.mustCall(b, 0); rec.Phase.Kind != contracts.PhaseCompleted {
		t.Errorf("completed call became %s", rec.Phase.Kind)
	}
	if _, ok := h.call(doneRec, 0); ok {
		t.Error("the published batch was touched")
	}
	if _, ok := h.ticket(corr); ok {
		t.Error("ticket survived the cancellation")
	}
	if rec := h.mustCall(b, 2); rec.Phase.Kind != contracts.PhaseIndeterminate {
		t.Errorf("late timer moved the cancelled call to %s", rec.Phase.Kind)
	}
	outs := map[string]int{}
	for _, m := range h.outputs() {
		o := decodeAs[contracts.CallOutput](t, m)
		outs[o.CallID]++
		if o.CallID != "call_1" && o.Outcome != contracts.OutcomeIndeterminate {
			t.Errorf("output %+v", o)
		}
		// A sealed call's output must dispatch nothing: the batcher reads it the moment
		// it is written, while the calls after it may not be sealed yet.
		if o.CallID != "call_1" && !o.Parallel {
			t.Errorf("the sealed call %s's output would advance sequential dispatch: %+v", o.CallID, o)
		}
	}
	for _, id := range []string{"call_1", "call_2", "call_3", "call_4"} {
		if outs[id] != 1 {
			t.Errorf("%s has %d outputs, want 1 (%v)", id, outs[id], outs)
		}
	}
	if n := len(h.execRequests()); n != 1 {
		t.Errorf("%d executor requests, want call_2's only", n)
	}
	// The end is announced once (the second cancel's copy has the same id), after it was
	// recorded: the event carries the run record's end.
	ended := h.runEnded(testRunID)
	run, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(testRunID))
	if err != nil {
		t.Fatal(err)
	}
	if len(ended) != 1 || ended[0].RunID != testRunID || ended[0].Reason != contracts.RunEndCancelled ||
		run.Ended == nil || !ended[0].EndedAt.Equal(run.EndedAt) {
		t.Errorf("run.ended events %+v, run record end %+v at %s", ended, run.Ended, run.EndedAt)
	}
}

// TestExhaustedGateInputsSealTheCall: the exhaustion hooks of the gate's two work
// consumers make the call the failed revision asked for Indeterminate, with a reason
// naming the stage, and that sealing revision is its output: the recorded batch's call 0,
// and the call after a failed output.
func TestExhaustedGateInputsSealTheCall(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	svc, err := newService(DepsOf(h.Env))
	if err != nil {
		t.Fatal(err)
	}
	b := h.store(h.submission(1, call("call_1", "echo", `{}`), call("call_2", "echo", `{}`)))
	recorded := recordedDelivery(t, h.Env.Names, b)
	for range 2 { // idempotent
		if err := svc.recordedExhausted(h.Ctx, recorded, errInjected); err != nil {
			t.Fatal(err)
		}
	}
	first := h.mustCall(b, 0)
	if first.Phase.Kind != contracts.PhaseIndeterminate || first.Phase.Reason != exhaustedRecorded {
		t.Errorf("call_1 %+v", first.Phase)
	}
	if _, ok := h.call(b, 1); ok {
		t.Error("exhausting the recorded batch touched call_2")
	}
	output := outputDelivery(t, h.Env.Names, b, 0, first)
	for range 2 {
		if err := svc.outputExhausted(h.Ctx, output, errInjected); err != nil {
			t.Fatal(err)
		}
	}
	if rec := h.mustCall(b, 1); rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != exhaustedOutput {
		t.Errorf("call_2 %+v", rec.Phase)
	}
	natstest.WaitFor(t, waitLong, func() bool { return len(h.outputs()) == 2 }, "the sealed calls' outputs")
}

// TestOutputBeforeItsBatchIsVisibleIsRetried: in a cluster a read may be answered by a
// replica that has not yet applied the batch's write, so an output whose batch the gate
// cannot find is retried (a transient error), not dead-lettered — the next delivery finds
// the record and gates the next call. Only when every delivery found no record does the
// exhaustion hook let it be dead-lettered, with nothing to seal.
func TestOutputBeforeItsBatchIsVisibleIsRetried(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	svc, err := newService(DepsOf(h.Env))
	if err != nil {
		t.Fatal(err)
	}
	sub := h.submission(1, call("call_1", "forbidden", `{}`), call("call_2", "echo", `{}`))
	unseen := &contracts.BatchRecord{Submission: sub}
	for _, c := range sub.Calls {
		unseen.Pinned = append(unseen.Pinned, h.Env.Config.Pin(c.ToolID))
	}
	done := newCallRecord(unseen, 0)
	if err := done.CompleteImmediate(contracts.ErrorOutput("call_1", "blocked: no"), h.Env.Now()); err != nil {
		t.Fatal(err)
	}
	d := outputDelivery(t, h.Env.Names, unseen, 0, done)
	err = svc.env.Handle(ServiceName, svc.handleOutput)(h.Ctx, d)
	var rej *contracts.Rejection
	if err == nil || bus.IsPermanent(err) || errors.As(err, &rej) {
		t.Fatalf("output of a batch not visible yet: %v, want a transient error", err)
	}
	if !errors.Is(err, pipeline.ErrBatchNotFound) {
		t.Errorf("error %v does not match pipeline.ErrBatchNotFound", err)
	}
	if err := svc.outputExhausted(h.Ctx, d, err); err != nil {
		t.Errorf("exhaustion of an output whose batch never appeared: %v, want nothing to seal", err)
	}

	b := h.store(sub)
	d.NumDelivered = 2
	if err := svc.env.Handle(ServiceName, svc.handleOutput)(h.Ctx, d); err != nil {
		t.Fatalf("redelivery once the record is visible: %v", err)
	}
	if rec := h.mustCall(b, 1); rec.Phase.Kind != contracts.PhaseExecuting {
		t.Errorf("call_2 is %s after the redelivery, want executing", rec.Phase.Kind)
	}
}

// TestACallStoppedByItsRunsCancelHandsNothingOn forces the interleaving where an executor
// stops call_1's body for the run's cancellation and commits call_1 Indeterminate
// ("cancelled") before the gate has handled that cancellation. The terminal revision is
// sequential, so it reaches the gate's dispatch; the gate must not hand call_2 over (a
// cancelled run runs no next call) but seal it cancelled too. The cancellation that
// follows then finds both calls terminal, and only call_1 ever had an executor request.
func TestACallStoppedByItsRunsCancelHandsNothingOn(t *testing.T) {
	h := newHarness(t)
	b := h.store(h.submission(1, call("call_1", "echo", `{}`), call("call_2", "echo", `{}`)))
	h.gate(b, 0)
	h.waitCall(b, 0, "handed over", isPhase(contracts.PhaseExecuting))

	// The executor: entered, then stopped by the run's cancellation before the gate's seal.
	if _, _, err := h.Env.Calls.Update(h.Ctx, callKey(b, 0), func(cur *contracts.CallRecord, exists bool) error {
		if !exists {
			return errors.New("call_1 has no record")
		}
		if err := cur.Enter(7, h.Env.Now()); err != nil {
			return err
		}
		return cur.MarkIndeterminate(cancelledReason, h.Env.Now())
	}); err != nil {
		t.Fatal(err)
	}
	rec := h.waitCall(b, 1, "gated or sealed", func(contracts.CallRecord) bool { return true })
	if rec.Phase.Kind != contracts.PhaseIndeterminate {
		t.Fatalf("call_2 is %s after call_1 was stopped by its run's cancellation, want never handed over (Indeterminate %q)", rec.Phase.Kind, cancelledReason)
	}
	if rec.Phase.Reason != cancelledReason || rec.Decision != nil || rec.Input != nil {
		t.Errorf("call_2 reason %q decision %+v input %s: want sealed %q, never decided or handed over", rec.Phase.Reason, rec.Decision, rec.Input, cancelledReason)
	}

	h.cancelRun("cancel-1", testRunID)
	natstest.WaitFor(t, waitLong, func() bool { return len(h.runEnded(testRunID)) > 0 }, "the run's end to be announced")
	h.quiet()
	for i := range 2 {
		if rec := h.mustCall(b, i); rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Phase.Reason != cancelledReason {
			t.Errorf("call %d is %s %q, want Indeterminate %q", i, rec.Phase.Kind, rec.Phase.Reason, cancelledReason)
		}
	}
	if n := len(h.execRequests()); n != 1 {
		t.Errorf("%d executor requests, want call_1's only", n)
	}
	if ended := h.runEnded(testRunID); len(ended) != 1 {
		t.Errorf("run.ended events %+v, want one", ended)
	}
}
