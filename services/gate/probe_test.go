package gate

import (
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestProbeAllAllowDispatchesEveryCallInParallel: a parallel-delegation batch whose every
// call is allowed enters all of them at once, each request marked Parallel, each call
// audited once, and each record written once (decision and entry together).
func TestProbeAllAllowDispatchesEveryCallInParallel(t *testing.T) {
	h := newHarness(t)
	b := h.storeDelegates("a", "b", "c")
	if !b.Parallel {
		t.Fatal("batch should qualify for the parallel branch")
	}
	writesBefore := h.callWrites()
	h.probe(b)
	for i := range 3 {
		h.waitCall(b, i, "executing", isPhase(contracts.PhaseExecuting))
	}
	h.probe(b) // a redelivered probe only re-publishes
	h.quiet()
	if n := h.callWrites() - writesBefore; n != 3 {
		t.Errorf("%d call record writes, want 3 (one per call)", n)
	}
	for i := range 3 {
		rec := h.mustCall(b, i)
		var stages []string
		for _, m := range rec.Timeline {
			stages = append(stages, m.Stage)
		}
		if !equalStrings(stages, []string{contracts.StageProbed, contracts.StageExecuting}) || rec.Decision == nil || !rec.Decision.IsAllow() {
			t.Errorf("call %d: timeline %v decision %+v, want probed, executing with Allow", i, stages, rec.Decision)
		}
	}

	execs := h.execRequests()
	if len(execs) != 3 {
		t.Fatalf("%d executor requests, want 3", len(execs))
	}
	for _, m := range execs {
		req := decodeAs[contracts.ExecRequest](t, m)
		if !req.Parallel || req.Attempt != 1 || req.Target != contracts.TargetBrain ||
			req.Policy.Mode != contracts.ModeDurableRequest {
			t.Errorf("executor request %+v", req)
		}
	}
	for _, id := range []string{"call_1", "call_2", "call_3"} {
		if got := h.auditsOf(id); !equalStrings(got, []string{"allow"}) {
			t.Errorf("%s audit %v, want [allow]", id, got)
		}
	}
	if n := len(h.outputs()); n != 0 {
		t.Errorf("%d call outputs for executing calls", n)
	}
}

// TestProbeFallsBackToSequentialReusingRecordedDecisions: one ask among the probe's
// decisions keeps every call out of parallel execution; the sequential path applies the
// decisions the probe recorded instead of deciding again, so every call is audited exactly
// once for its gate decision.
func TestProbeFallsBackToSequentialReusingRecordedDecisions(t *testing.T) {
	h := newHarness(t)
	b := h.storeDelegates("a", "risky", "c")
	h.probe(b)
	h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	h.quiet()

	for i, want := range []contracts.GateOutcomeKind{"", contracts.GateRequireConfirmation, contracts.GateAllow} {
		if i == 0 {
			continue
		}
		rec := h.mustCall(b, i)
		if rec.Phase.Kind != contracts.PhaseRequested || rec.Decision == nil || rec.Decision.Kind != want {
			t.Fatalf("call %d: phase %s decision %+v, want Requested with a recorded %s", i, rec.Phase.Kind, rec.Decision, want)
		}
	}
	execs := h.execRequests()
	if len(execs) != 1 || decodeAs[contracts.ExecRequest](t, execs[0]).Parallel {
		t.Fatalf("executor requests %v, want one sequential request for call_1", execs)
	}

	// Show that the recorded decision, not a fresh one, is what the sequential path
	// applies: replace call_3's recorded Allow by a Block; the chain would say allow.
	rec3, rev3, err := h.Env.Calls.Get(h.Ctx, callKey(b, 2))
	if err != nil {
		t.Fatal(err)
	}
	rec3.Decision = &contracts.GateOutcome{Kind: contracts.GateBlock, Reason: "recorded by the probe"}
	if _, err := h.Env.Calls.UpdateAt(h.Ctx, callKey(b, 2), rec3, rev3); err != nil {
		t.Fatal(err)
	}

	h.gate(b, 1) // the batcher, after call_1's output
	rec := h.waitCall(b, 1, "parked", isPhase(contracts.PhaseAwaiting))
	tk := h.waitTicket(rec.Phase.Wait.CorrelationID)
	h.resume("resume-1", allow(tk))
	if a := h.waitAnswer("resume-1"); a.kind != "resolved" {
		t.Fatalf("approval answered %+v", a)
	}
	h.gate(b, 2) // the batcher, after call_2's output
	rec = h.waitCall(b, 2, "completed", isPhase(contracts.PhaseCompleted))
	if outputText(rec) != "blocked: recorded by the probe" {
		t.Errorf("call_3 output %q: the recorded decision was not reused", outputText(rec))
	}
	h.quiet()

	want := map[string][]string{
		"call_1": {"allow"},
		"call_2": {"ask", "approved"},
		"call_3": {"allow"}, // the probe's record; the tampered block is applied, not audited again
	}
	for id, w := range want {
		if got := h.auditsOf(id); !equalStrings(got, w) {
			t.Errorf("%s audit %v, want %v", id, got, w)
		}
	}
	natstest.WaitFor(t, waitLong, func() bool { return len(h.execRequests()) == 2 }, "call_2's executor request")
}

// callWrites is how many writes the calls bucket ever stored (its stream's last sequence).
func (h *harness) callWrites() uint64 {
	h.T.Helper()
	st, err := h.JS.Stream(h.Ctx, "KV_"+h.Env.Names.CallsBucket())
	if err != nil {
		h.T.Fatal(err)
	}
	info, err := st.Info(h.Ctx)
	if err != nil {
		h.T.Fatal(err)
	}
	return info.State.LastSeq
}
