package gate

import (
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func (h *harness) cancelCall(id string, b *contracts.BatchRecord, i int, reason string) {
	h.publish(h.Env.Names.CallCancelSubject(), id, contracts.TypeCallCancel,
		contracts.CallCancel{OperationID: op(b, i), Actor: "ops:ana", Reason: reason})
}

// TestCallCancelByPhase: the gate applies a call cancel by where the call is. Executing
// and not entered (no executor here takes it) and Awaiting a schedule: Completed with
// "cancelled before start: {reason}" at once, the ticket cleared, the actor recorded.
// Requested (its batch has not reached it): the cancel is recorded as its decision and it
// ends the same way when the gate request comes. Entered: the record is left to its
// executor and a stop notice goes out on awaken.calls.stop. Terminal: unchanged.
func TestCallCancelByPhase(t *testing.T) {
	h := newHarness(t)
	b := h.store(h.submission(1,
		call("call_1", "stub", `{}`),
		call("call_2", "echo", `{}`),
		call("call_3", "later_long", `{}`),
		call("call_4", "echo", `{}`),
		call("call_5", "echo", `{}`)))
	h.gate(b, 0)
	done := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	h.gate(b, 1)
	h.waitCall(b, 1, "executing", isPhase(contracts.PhaseExecuting))
	h.gate(b, 2)
	corr := h.waitCall(b, 2, "parked", isPhase(contracts.PhaseAwaiting)).Phase.Wait.CorrelationID
	h.waitTicket(corr)
	// call_5 entered by an executor that is running its body.
	h.gate(b, 4)
	rec := h.waitCall(b, 4, "executing", isPhase(contracts.PhaseExecuting))
	rec.Entered, rec.EnteredBy = true, 42
	if _, err := h.Env.Calls.Put(h.Ctx, callKey(b, 4), rec); err != nil {
		t.Fatal(err)
	}
	stops, err := h.NC.SubscribeSync(h.Env.Names.CallStopSubject())
	if err != nil {
		t.Fatal(err)
	}
	h.quiet()

	// call_4 first, and its cancel seen recorded: the batch has not reached it. Cancelled
	// beside the others it could be reached first — call_3's cancel completes call_3, and
	// the gate's gate-outputs durable then moves the batch on to call_4, which is then
	// Executing and unentered (cancelled before start, a correct outcome of another case).
	h.cancelCall(h.uniq("cc"), b, 3, "not needed")
	h.waitCall(b, 3, "cancel recorded as its decision", func(rec contracts.CallRecord) bool {
		return rec.Cancel != nil && rec.Decision != nil && rec.Decision.Kind == contracts.GateSetResult
	})
	if rec := h.mustCall(b, 3); rec.Phase.Kind != contracts.PhaseRequested {
		t.Fatalf("call 3 left Requested before its batch reached it: %+v", rec.Phase)
	}
	for _, i := range []int{0, 1, 2, 4} {
		h.cancelCall(h.uniq("cc"), b, i, "not needed")
	}
	cancelled := func(rec contracts.CallRecord) bool {
		out, ok := rec.Output()
		return ok && rec.Phase.Kind == contracts.PhaseCompleted && out.IsError &&
			strings.HasPrefix(out.Text(), contracts.CancelledBeforeStartPrefix+"not needed")
	}
	for _, i := range []int{1, 2} {
		rec := h.waitCall(b, i, "cancelled before start", cancelled)
		if rec.Cancel == nil || rec.Cancel.Actor != "ops:ana" || rec.Cancel.Outcome != contracts.CancelBeforeStart {
			t.Errorf("call %d cancel mark = %+v", i, rec.Cancel)
		}
	}
	msg, err := stops.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("no stop notice for the entered call: %v", err)
	}
	ev, err := cloudevent.DecodeMsg(msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	if cc, err := contracts.DecodeCallCancel(ev.Data); err != nil || cc.OperationID != op(b, 4) {
		t.Fatalf("stop notice %+v (%v), want the entered call's", cc, err)
	}
	h.quiet()
	if _, ok := h.ticket(corr); ok {
		t.Error("the cancelled call's ticket survived")
	}
	if rec := h.mustCall(b, 0); rec.Cancel != nil || len(rec.Timeline) != len(done.Timeline) {
		t.Errorf("the terminal call changed: %+v", rec)
	}
	if rec := h.mustCall(b, 4); rec.Phase.Kind != contracts.PhaseExecuting || !rec.Entered {
		t.Errorf("the entered call was moved by the gate: %+v", rec.Phase)
	}
	// The batch reaches call_4 (call_3's cancel ended call_3, and gate-outputs may already
	// have moved on; the gate's dispatch of it again is the same outcome): the recorded
	// cancel completes it, its body never entered.
	h.gate(b, 3)
	h.waitCall(b, 3, "cancelled when reached", cancelled)
}
