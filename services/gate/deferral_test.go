package gate

import (
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// TestARateLimitDeferralCannotBeApprovedEarly: a call a waiting rate limit deferred to the
// next window is parked on a scheduled_action ticket; an approval of that ticket would run
// it at once, inside the full window, so the gate refuses it deferred_by_limit — on the
// public subject (a platform's claimed actor) and on the api's (an authenticated approver)
// alike — and the call stays parked, its ticket due at the window's start, nothing run. A
// denial is accepted (it only keeps the call from running). A schedule no limit deferred
// may still be approved before it is due.
func TestARateLimitDeferralCannotBeApprovedEarly(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "hourly", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal,
		Rate: &contracts.RateLimitConfig{N: 1, Window: "1h"}, Over: contracts.LimitOverWait})
	base := h.inMidHour()

	wantRuns(t, h.decided("run-a", 1, "echo"))
	sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
	sub.RunID = "run-b"
	b := h.store(sub)
	h.gate(b, 0)
	rec := h.waitCall(b, 0, "decided", func(r contracts.CallRecord) bool { return r.Decision != nil })
	if d := rec.Decision; d.Kind != contracts.GateSchedule || d.Until == nil || !d.Until.Equal(base.Add(time.Hour)) {
		t.Fatalf("decision %+v, want a schedule until %s", d, base.Add(time.Hour))
	}
	tk := h.waitTicket(rec.Decision.CorrelationID)

	platform := allow(tk)
	platform.Actor = "platform"
	h.resume("approve-claimed", platform)
	h.resumeOnAPISubject("approve-api", approveAs(tk, "alice", ""))
	for _, id := range []string{"approve-claimed", "approve-api"} {
		if a := h.waitAnswer(id); a.kind != "rejected" || a.res.Code != string(contracts.ResumeDeferredByLimit) {
			t.Fatalf("early approval %s answered %s %s (%s), want rejected %s", id, a.kind, a.res.Code, a.res.Message, contracts.ResumeDeferredByLimit)
		}
	}
	h.quiet()
	got := h.mustCall(b, 0)
	if got.Phase.Kind != contracts.PhaseAwaiting || got.ResolvedBy != "" {
		t.Fatalf("call after the refused approvals %+v (resolved by %q), want it still parked", got.Phase, got.ResolvedBy)
	}
	if left, ok := h.ticket(tk.CorrelationID); !ok || left.DueAt == nil || !left.DueAt.Equal(base.Add(time.Hour)) {
		t.Fatalf("ticket after the refused approvals %+v (open %v), want it open and due at %s", left, ok, base.Add(time.Hour))
	}

	h.resumeOnAPISubject("deny-api", deny(tk, "not today"))
	if a := h.waitAnswer("deny-api"); a.kind != "resolved" || a.res.Code != tickets.ResolvedDenied {
		t.Fatalf("denial answered %s %s (%s), want resolved %s", a.kind, a.res.Code, a.res.Message, tickets.ResolvedDenied)
	}

	// later_long is scheduled by the policy alone (no limit matches it): approvable early.
	sched := h.decided("run-c", 1, "later_long")
	stk := h.waitTicket(sched.Decision.CorrelationID)
	h.resumeOnAPISubject("approve-schedule", approveAs(stk, "alice", ""))
	if a := h.waitAnswer("approve-schedule"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved {
		t.Fatalf("early approval of a policy schedule answered %s %s (%s), want resolved %s", a.kind, a.res.Code, a.res.Message, tickets.ResolvedApproved)
	}
}
