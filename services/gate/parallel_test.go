package gate

import (
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// storeDeclared stores step 1 of one call per tool (call_1, call_2, …).
func (h *harness) storeDeclared(tools ...string) *contracts.BatchRecord {
	h.T.Helper()
	calls := make([]contracts.ToolCall, len(tools))
	for i, tool := range tools {
		calls[i] = call(fmt.Sprintf("call_%d", i+1), tool, `{"n":`+fmt.Sprint(i)+`}`)
	}
	return h.store(h.submission(1, calls...))
}

// noneExecuting checks, from inside the gate's handler at a fault point, that no call of
// b has been handed to an executor yet.
func (h *harness) noneExecuting(t *testing.T, b *contracts.BatchRecord, when string) {
	for i := range b.Submission.Calls {
		rec, _, err := h.Env.Calls.Get(h.Ctx, callKey(b, i))
		if err == nil && rec.Phase.Kind != contracts.PhaseRequested {
			t.Errorf("%s: call %d is %s before every decision of its batch is recorded", when, i, rec.Phase.Kind)
		}
	}
}

// decidedBeforeAnyEntry checks, from the call records' timelines, that every call of b was
// decided no later than the first entry of any call into execution.
func decidedBeforeAnyEntry(t *testing.T, recs []contracts.CallRecord) {
	t.Helper()
	var lastDecided, firstEntered time.Time
	for i, rec := range recs {
		d, ok := rec.MarkTime(contracts.StageDecided)
		if !ok {
			t.Fatalf("call %d: no decision on its timeline %+v", i, rec.Timeline)
		}
		if d.After(lastDecided) {
			lastDecided = d
		}
		if e, ok := rec.MarkTime(contracts.StageExecuting); ok && (firstEntered.IsZero() || e.Before(firstEntered)) {
			firstEntered = e
		}
	}
	if !firstEntered.IsZero() && firstEntered.Before(lastDecided) {
		t.Errorf("a call entered execution at %s, before the last decision at %s", firstEntered, lastDecided)
	}
}

// TestDeclaredParallelDecidesEveryCallBeforeAnyEnters: a batch whose three calls all
// declare parallel is decided call by call, no call entering execution before the last
// decision is recorded; then all three enter at once, each request marked Parallel, each
// decision audited once.
func TestDeclaredParallelDecidesEveryCallBeforeAnyEnters(t *testing.T) {
	h := newHarness(t)
	b := h.storeDeclared("par", "par", "par")
	if !b.ParallelDeclared || !b.Parallel {
		t.Fatal("batch should be declared parallel")
	}
	for i := range 3 {
		h.OnFault(FaultAfterParallelDecision, op(b, i), func(int) {
			h.noneExecuting(t, b, fmt.Sprintf("after the decision of call %d", i))
		})
	}
	h.recordAgain(b)
	recs := make([]contracts.CallRecord, 3)
	for i := range 3 {
		recs[i] = h.waitCall(b, i, "executing", isPhase(contracts.PhaseExecuting))
	}
	h.quiet()
	for i := range 3 {
		if n := h.HitCount(FaultAfterParallelDecision, op(b, i)); n != 1 {
			t.Errorf("call %d decided %d times, want once", i, n)
		}
		if !recs[i].Parallel || recs[i].Input == nil {
			t.Errorf("call %d: parallel %v input %s, want handed over outside the sequence", i, recs[i].Parallel, recs[i].Input)
		}
	}
	decidedBeforeAnyEntry(t, recs)
	execs := h.execRequests()
	if len(execs) != 3 {
		t.Fatalf("%d executor requests, want 3", len(execs))
	}
	for _, m := range execs {
		if req := decodeAs[contracts.ExecRequest](t, m); !req.Parallel {
			t.Errorf("executor request %+v not marked parallel", req)
		}
	}
	for _, id := range []string{"call_1", "call_2", "call_3"} {
		if got := h.auditsOf(id); !equalStrings(got, []string{"allow"}) {
			t.Errorf("%s audit %v, want [allow]", id, got)
		}
	}
}

// TestDeclaredParallelAskParksOneAndRunsTheOthers: an ask among declared-parallel calls
// parks that call with its ticket before any allowed call enters execution; the others
// run without waiting for it, a denied one completes, and the approval hands the parked
// call over on its own, gating nothing else.
func TestDeclaredParallelAskParksOneAndRunsTheOthers(t *testing.T) {
	h := newHarness(t)
	b := h.storeDeclared("par", "par_ask", "par_block", "par")
	h.recordAgain(b)
	e0 := h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	e3 := h.waitCall(b, 3, "executing", isPhase(contracts.PhaseExecuting))
	parked := h.waitCall(b, 1, "parked", isPhase(contracts.PhaseAwaiting))
	blocked := h.waitCall(b, 2, "blocked", isPhase(contracts.PhaseCompleted))
	if outputText(blocked) == "" || !blocked.Parallel {
		t.Errorf("call_3: output %q parallel %v, want blocked outside the sequence", outputText(blocked), blocked.Parallel)
	}
	decidedBeforeAnyEntry(t, []contracts.CallRecord{e0, parked, blocked, e3})
	// The ask was applied (parked) before either allowed call entered.
	awaitAt, _ := parked.MarkTime(contracts.StageAwaiting)
	for i, rec := range []contracts.CallRecord{e0, e3} {
		if at, _ := rec.MarkTime(contracts.StageExecuting); at.Before(awaitAt) {
			t.Errorf("allowed call %d entered at %s, before the ask parked at %s", i, at, awaitAt)
		}
	}
	tk := h.waitTicket(parked.Phase.Wait.CorrelationID)
	h.quiet()
	if n := len(h.execRequests()); n != 2 {
		t.Fatalf("%d executor requests before the approval, want 2", n)
	}
	h.resume("resume-par", allow(tk))
	if a := h.waitAnswer("resume-par"); a.kind != "resolved" {
		t.Fatalf("approval answered %+v", a)
	}
	rec := h.waitCall(b, 1, "handed over", func(r contracts.CallRecord) bool { return r.ExecutingUnentered() && r.Input != nil })
	if !rec.Parallel {
		t.Error("the approved call runs inside the sequence")
	}
	natstest.WaitFor(t, waitLong, func() bool { return len(h.execRequests()) == 3 }, "the approved call's executor request")
	h.quiet()
	if n := len(h.execRequests()); n != 3 {
		t.Errorf("%d executor requests, want 3", n)
	}
	want := map[string][]string{"call_1": {"allow"}, "call_2": {"ask", "approved"}, "call_3": {"deny"}, "call_4": {"allow"}}
	for id, w := range want {
		if got := h.auditsOf(id); !equalStrings(got, w) {
			t.Errorf("%s audit %v, want %v", id, got, w)
		}
	}
}

// TestDeclaredParallelCrashBetweenDecisionsNeverDecidesAgain: a crash after the second
// call's decision is recorded, before the third is decided, leaves no call handed over;
// the redelivered recording decides only the third and applies the recorded decisions —
// a recorded decision replaced by a block is applied as recorded, not made again.
func TestDeclaredParallelCrashBetweenDecisionsNeverDecidesAgain(t *testing.T) {
	h := newHarness(t)
	b := h.storeDeclared("par", "par", "par")
	h.FailAt(FaultAfterParallelDecision, op(b, 1), 1, func() {
		h.noneExecuting(t, b, "at the crash")
		// Replace the recorded Allow of call_2 by a Block: the chain would allow it again.
		rec, rev, err := h.Env.Calls.Get(h.Ctx, callKey(b, 1))
		if err != nil {
			t.Error(err)
			return
		}
		rec.Decision = &contracts.GateOutcome{Kind: contracts.GateBlock, Reason: "recorded before the crash"}
		if _, err := h.Env.Calls.UpdateAt(h.Ctx, callKey(b, 1), rec, rev); err != nil {
			t.Error(err)
		}
	})
	h.recordAgain(b)
	h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	h.waitCall(b, 2, "executing", isPhase(contracts.PhaseExecuting))
	rec := h.waitCall(b, 1, "completed", isPhase(contracts.PhaseCompleted))
	if got := outputText(rec); got != "blocked: recorded before the crash" {
		t.Errorf("call_2 output %q: its recorded decision was made again", got)
	}
	h.quiet()
	if n := h.Injected(); n != 1 {
		t.Fatalf("%d faults injected, want 1", n)
	}
	for i, want := range []int{1, 1, 1} {
		if n := h.HitCount(FaultAfterParallelDecision, op(b, i)); n != want {
			t.Errorf("call %d: decision recorded %d times, want %d", i, n, want)
		}
	}
	for i := range 3 {
		if n := count(h.mustCall(b, i).Timeline, func(m contracts.TimelineMark) bool { return m.Stage == contracts.StageDecided }); n != 1 {
			t.Errorf("call %d decided %d times on its timeline", i, n)
		}
	}
	if n := len(h.execRequests()); n != 2 {
		t.Errorf("%d executor requests, want 2", n)
	}
}

// TestMixedBatchWithAParallelCallStaysSequential: one call that does not declare parallel
// keeps the whole batch on the sequential path: only its first call is gated.
func TestMixedBatchWithAParallelCallStaysSequential(t *testing.T) {
	h := newHarness(t)
	b := h.storeDeclared("par", "echo", "par")
	if b.ParallelDeclared || b.Parallel {
		t.Fatal("a mixed batch is declared parallel")
	}
	h.recordAgain(b)
	rec := h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	h.quiet()
	if rec.Parallel {
		t.Error("call_1 of a sequential batch runs outside the sequence")
	}
	for i := 1; i < 3; i++ {
		if _, ok := h.call(b, i); ok {
			t.Errorf("call %d of a sequential batch gated before call 0 is terminal", i)
		}
	}
}

// TestDeclaredParallelCancelSealsEveryCall: cancelling the run of a declared-parallel
// batch with two parked calls and two handed over seals all four cancelled, clears both
// tickets, and answers a late approval not_waiting.
func TestDeclaredParallelCancelSealsEveryCall(t *testing.T) {
	h := newHarness(t)
	b := h.storeDeclared("par", "par_ask", "par_ask", "par")
	h.recordAgain(b)
	var corrs []string
	var tickets []contracts.ResumeTicket
	for _, i := range []int{1, 2} {
		rec := h.waitCall(b, i, "parked", isPhase(contracts.PhaseAwaiting))
		corrs = append(corrs, rec.Phase.Wait.CorrelationID)
		tickets = append(tickets, h.waitTicket(rec.Phase.Wait.CorrelationID))
	}
	h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	h.waitCall(b, 3, "executing", isPhase(contracts.PhaseExecuting))
	h.quiet()

	h.cancelRun("cancel-par", testRunID)
	for i := range 4 {
		if rec := h.waitCall(b, i, "sealed", isPhase(contracts.PhaseIndeterminate)); rec.Phase.Reason != "cancelled" {
			t.Errorf("call %d reason %q", i, rec.Phase.Reason)
		}
	}
	h.quiet()
	for _, corr := range corrs {
		if _, ok := h.ticket(corr); ok {
			t.Errorf("ticket %s survived the cancellation", corr)
		}
	}
	h.resume("late-par", allow(tickets[0]))
	if a := h.waitAnswer("late-par"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeNotWaiting) {
		t.Errorf("late approval answered %+v", a)
	}
}
