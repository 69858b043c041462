package gate

import (
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// resumeOnAPISubject publishes cmd on the api's resume subject, as the api does.
func (h *harness) resumeOnAPISubject(id string, cmd contracts.ResumeCommand) {
	h.publish(h.Env.Names.TicketResumeAPISubject(), id, contracts.TypeTicketResume, cmd)
}

// lastAuditOf is the last audit record of callID (nil for none).
func (h *harness) lastAuditOf(callID string) *contracts.AuditRecord {
	var last *contracts.AuditRecord
	for _, rec := range h.audits() {
		if rec.CallID == callID {
			last = &rec
		}
	}
	return last
}

// TestClaimedActorIsRecordedAsClaimed: the actor of a
// command on the public resume subject is the publisher's claim — the call record, the
// audit record and ticket.resolved say so — while the same name on the api's subject
// (only the api user may publish there) is recorded as authenticated.
func TestClaimedActorIsRecordedAsClaimed(t *testing.T) {
	h := newHarness(t)
	bc, tc := h.park(1, "call_c", "ask_me", `{}`)
	ba, ta := h.park(2, "call_a", "ask_me", `{}`)

	h.resume("resume-claimed", approveAs(tc, "alice", ""))
	h.resumeOnAPISubject("resume-authenticated", approveAs(ta, "alice", ""))
	for _, tt := range []struct {
		resumeID, callID string
		b                *contracts.BatchRecord
		claimed          bool
	}{
		{"resume-claimed", "call_c", bc, true},
		{"resume-authenticated", "call_a", ba, false},
	} {
		a := h.waitAnswer(tt.resumeID)
		if a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved || a.res.Actor != "alice" || a.res.ActorClaimed != tt.claimed {
			t.Errorf("%s: answer %+v, want approved by alice, claimed %v", tt.resumeID, a, tt.claimed)
		}
		rec := h.waitCall(tt.b, 0, "resolved", func(r contracts.CallRecord) bool { return r.ResolvedBy == tt.resumeID })
		if rec.ResolvedActor != "alice" || rec.ResolvedActorClaimed != tt.claimed {
			t.Errorf("%s: record resolved by %q claimed %v, want alice claimed %v", tt.resumeID, rec.ResolvedActor, rec.ResolvedActorClaimed, tt.claimed)
		}
	}
	h.quiet()
	for callID, claimed := range map[string]bool{"call_c": true, "call_a": false} {
		last := h.lastAuditOf(callID)
		if last == nil || last.Decision != contracts.AuditDecisionApproved || last.Actor != "alice" || last.ActorClaimed != claimed {
			t.Errorf("%s: last audit %+v, want approved by alice, claimed %v", callID, last, claimed)
		}
	}
}

// TestClaimedReservedActorIsRefused: a command on the public subject may not claim an
// actor the doors or the gate record (timer, anonymous, api-token, nats…, claimed…, in
// any case, alone or as the first word): it is refused reserved_actor, the ticket stays
// open, the call record and the audit are untouched, and a later approval still
// succeeds. The api's subject records those names (its own doors') unrefused.
func TestClaimedReservedActorIsRefused(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_r", "ask_me", `{}`)
	revs := func() (call, ticket uint64) {
		t.Helper()
		_, call, err := h.Env.Calls.Get(h.Ctx, callKey(b, 0))
		if err != nil {
			t.Fatal(err)
		}
		_, ticket, err = h.Env.Tickets.Get(h.Ctx, tk.CorrelationID)
		if err != nil {
			t.Fatalf("the ticket: %v", err)
		}
		return call, ticket
	}
	callRev, ticketRev := revs()
	audits := len(h.auditsOf("call_r"))
	for n, actor := range []string{"timer", "Timer", " timer ", "timer (expired)", "anonymous", "api-token", "nats", "nats:admin",
		"NATS:admin as bob", "claimed", "claimed:alice"} {
		id := h.uniq("resume-reserved")
		h.resume(id, approveAs(tk, actor, ""))
		a := h.waitAnswer(id)
		if a.kind != "rejected" || a.res.Code != string(contracts.ResumeReservedActor) {
			t.Fatalf("%d: claimed actor %q: answer %+v, want rejected %s", n, actor, a, contracts.ResumeReservedActor)
		}
	}
	h.quiet()
	if c, tr := revs(); c != callRev || tr != ticketRev {
		t.Fatalf("the refused claims wrote the call record (revision %d, was %d) or the ticket (%d, was %d)", c, callRev, tr, ticketRev)
	}
	if rec := h.mustCall(b, 0); rec.Phase.Kind != contracts.PhaseAwaiting || rec.ResolvedBy != "" || rec.ResolvedActor != "" {
		t.Fatalf("the refused claims changed the call record: %+v", rec)
	}
	if got := len(h.auditsOf("call_r")); got != audits {
		t.Fatalf("%d audit records after the refused claims, want %d", got, audits)
	}
	// A name that only looks like one is a claim like any other.
	h.resume("resume-natural", approveAs(tk, "timothy", ""))
	if a := h.waitAnswer("resume-natural"); a.kind != "resolved" || a.res.Actor != "timothy" || !a.res.ActorClaimed {
		t.Fatalf("answer %+v, want approved by timothy, claimed", a)
	}

	// The api's own doors' names are recorded as the api sends them.
	b2, tk2 := h.park(2, "call_n", "ask_me", `{}`)
	h.resumeOnAPISubject("resume-nats", approveAs(tk2, "nats:admin", ""))
	if a := h.waitAnswer("resume-nats"); a.kind != "resolved" || a.res.Actor != "nats:admin" || a.res.ActorClaimed {
		t.Fatalf("answer %+v, want approved by nats:admin, authenticated", a)
	}
	if rec := h.mustCall(b2, 0); rec.ResolvedActor != "nats:admin" || rec.ResolvedActorClaimed {
		t.Fatalf("record resolved by %q claimed %v", rec.ResolvedActor, rec.ResolvedActorClaimed)
	}
}
