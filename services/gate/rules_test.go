package gate

import (
	"github.com/awaken-dev/awaken/internal/servicetest"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestSandboxToolWhileSandboxDisabledIsNonRecoverable: with the sandbox executor disabled,
// a sandbox tool's capability is non_recoverable (no sandbox executor
// wired), so its replay_safe pin is unsupported and the call completes with that error
// before any executor is entered — instead of being dispatched as replayable.
func TestSandboxToolWhileSandboxDisabledIsNonRecoverable(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.Env.Config.Executors.Sandbox.Enabled = false
	h.StartReplica()

	b := h.store(h.submission(1, call("call_wc", "wc", `{"text":"a b"}`)))
	h.gate(b, 0)
	rec := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	if got := outputText(rec); !strings.Contains(got, "unsupported recovery mode") || !strings.Contains(got, string(contracts.CapabilityNonRecoverable)) {
		t.Fatalf("output %q, want the replay_safe pin refused against non_recoverable", got)
	}
	h.quiet()
	if n := len(h.execRequests()); n != 0 {
		t.Fatalf("%d executor requests, want none: the sandbox capability is non_recoverable", n)
	}
}

// TestCancelledRunIsEnded: a cancellation ends the run on its run record (so the batcher
// refuses its later batches with run_cancelled), also for a run with no open batch.
func TestCancelledRunIsEnded(t *testing.T) {
	h := newHarness(t)
	const run = "run-cancel-ends"
	h.cancelRun(h.uniq("cancel"), run)
	var rec contracts.RunRecord
	natstest.WaitFor(t, waitLong, func() bool {
		r, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(run))
		rec = r
		return err == nil && r.Ended != nil
	}, "the run record ended")
	if rec.Ended.Reason != contracts.RunEndCancelled {
		t.Fatalf("run ended %+v, want cancelled", rec.Ended)
	}
	if rej := rec.RejectionForNewBatch(2); rej == nil || rej.Code != contracts.RejectRunCancelled {
		t.Errorf("a later batch is refused with %v, want run_cancelled", rej)
	}
}

// TestScheduleOfAnActionKindTheRunMayNotPerformEndsTheRunCapabilityBound: a schedule rule
// naming an action kind the run's snapshot does not permit ends the run with
// capability_bound — no ticket, no execution, every call of the batch sealed, the run
// record ended — while the same rule for a run that may perform the kind parks as usual.
func TestScheduleOfAnActionKindTheRunMayNotPerformEndsTheRunCapabilityBound(t *testing.T) {
	h := newHarness(t)
	schedule := &contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorAllow, Rules: []contracts.PolicyRule{{
		Pattern: "echo", Behavior: contracts.BehaviorSchedule, Delay: contracts.Duration(time.Hour), ActionKind: "email"}}}

	sub := h.submission(1, call("c_email", "echo", `{"text":"hi"}`), call("c_next", "counter", `{}`))
	sub.RunID = "run-bound"
	sub.Policy = schedule
	b := h.store(sub)
	h.gate(b, 0)
	for i := range sub.Calls {
		rec := h.waitCall(b, i, "sealed", isPhase(contracts.PhaseIndeterminate))
		if !strings.HasPrefix(rec.Phase.Reason, "capability_bound: ") || !strings.Contains(rec.Phase.Reason, `"email"`) {
			t.Errorf("call %d reason %q, want capability_bound naming the action kind", i, rec.Phase.Reason)
		}
	}
	natstest.WaitFor(t, waitLong, func() bool {
		r, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(sub.RunID))
		return err == nil && r.Ended != nil && r.Ended.Reason == contracts.RunEndCapabilityBound
	}, "the run ended capability_bound")
	if _, ok := h.ticket(contracts.CorrelationID(contracts.ReasonScheduledAction, sub.RunID, 1, "c_email")); ok {
		t.Error("a ticket was opened for a call whose action kind the run may not perform")
	}
	h.quiet()
	if n := len(h.execRequests()); n != 0 {
		t.Errorf("%d executor requests, want none", n)
	}
	if ended := h.runEnded(sub.RunID); len(ended) != 1 || ended[0].Reason != contracts.RunEndCapabilityBound {
		t.Errorf("run.ended events %+v, want one capability_bound", ended)
	}

	permitted := h.submission(1, call("c_ok", "echo", `{"text":"hi"}`))
	permitted.RunID = "run-permitted"
	permitted.Policy = schedule
	permitted.Agent.ActionKinds = []string{"email"}
	pb := h.store(permitted)
	h.gate(pb, 0)
	if rec := h.waitCall(pb, 0, "parked", isPhase(contracts.PhaseAwaiting)); rec.Phase.Wait.Kind != contracts.WaitScheduledAction {
		t.Errorf("permitted action kind: %+v, want parked on a scheduled action", rec.Phase)
	}
}
