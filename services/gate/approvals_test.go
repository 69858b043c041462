package gate

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// unboundAllow is an approval of t that names no arguments digest, as a client of the
// previous release sends it.
func unboundAllow(t contracts.ResumeTicket, actor string) contracts.ResumeCommand {
	cmd := approveAs(t, actor, "")
	cmd.Result.Permission.ArgumentsDigest = ""
	return cmd
}

// withDigest is an approval of t by actor that names digest.
func withDigest(t contracts.ResumeTicket, actor, digest string) contracts.ResumeCommand {
	cmd := approveAs(t, actor, "")
	cmd.Result.Permission.ArgumentsDigest = digest
	return cmd
}

// auditOf is the audit record of callID with decision, or nil.
func (h *harness) auditOf(callID, decision string) *contracts.AuditRecord {
	for _, a := range h.audits() {
		if a.CallID == callID && a.Decision == decision {
			return &a
		}
	}
	return nil
}

// actors lists who approved, in order.
func actors(as []contracts.TicketApproval) []string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, a.Actor)
	}
	return out
}

// TestTicketBindsArgumentsDigest: the ticket carries the digest of the
// call's canonical arguments and of the policies that asked; an approval naming another
// digest is refused digest_mismatch and changes nothing; one naming the ticket's runs the
// call, and an edit's digest is audited beside the proposed one's. An approval naming no
// digest is accepted this release and audited unbound; a deny is never refused for its
// digest.
func TestTicketBindsArgumentsDigest(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_e", "edit_me", `{ "path" : "/tmp/a" }`)

	if want := contracts.ArgumentsDigest(json.RawMessage(`{"path":"/tmp/a"}`)); tk.ArgumentsDigest != want {
		t.Fatalf("ticket digest %q, want %q (the canonical arguments')", tk.ArgumentsDigest, want)
	}
	if want := contracts.PolicyDigest(h.Env.Config.Policy, nil); tk.PolicyDigest != want || tk.PolicyDigest == "" {
		t.Fatalf("ticket policy digest %q, want %q", tk.PolicyDigest, want)
	}

	stale := contracts.ArgumentsDigest(json.RawMessage(`{"path":"/tmp/other"}`))
	h.resume("resume-stale", withDigest(tk, "alice", stale))
	if a := h.waitAnswer("resume-stale"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeDigestMismatch) {
		t.Fatalf("stale digest answered %+v, want rejected digest_mismatch", a)
	}
	h.quiet()
	if now, ok := h.ticket(tk.CorrelationID); !ok || now.ArgumentsDigest != tk.ArgumentsDigest || len(now.Approvals) != 0 {
		t.Fatalf("ticket after a refused digest: %+v (present %v), want it unchanged", now, ok)
	}
	if rec := h.mustCall(b, 0); rec.Phase.Kind != contracts.PhaseAwaiting || rec.ResolvedBy != "" {
		t.Fatalf("call after a refused digest: %+v, want it still awaiting", rec.Phase)
	}

	edit := withDigest(tk, "alice", tk.ArgumentsDigest)
	edit.Result.Permission.Arguments = json.RawMessage(`{"path":"/tmp/b"}`)
	h.resume("resume-bound", edit)
	if a := h.waitAnswer("resume-bound"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved {
		t.Fatalf("bound approval answered %+v, want approved", a)
	}
	h.quiet()
	a := h.auditOf("call_e", contracts.AuditDecisionApproved)
	if a == nil {
		t.Fatal("no approved audit record")
	}
	if want := contracts.ArgumentsDigest(json.RawMessage(`{"path":"/tmp/b"}`)); a.ArgumentsDigest != want {
		t.Errorf("audit arguments_digest %q, want the edit's %q", a.ArgumentsDigest, want)
	}
	if a.ProposedArgumentsDigest != tk.ArgumentsDigest || a.PolicyDigest != tk.PolicyDigest || a.Unbound {
		t.Errorf("audit %+v, want proposed digest %q, policy digest %q, bound", a, tk.ArgumentsDigest, tk.PolicyDigest)
	}

	_, tu := h.park(2, "call_u", "ask_me", `{"x":1}`)
	h.resume("resume-unbound", unboundAllow(tu, "alice"))
	if a := h.waitAnswer("resume-unbound"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved {
		t.Fatalf("approval without a digest answered %+v, want approved (compatibility)", a)
	}
	_, td := h.park(3, "call_d", "ask_me", `{}`)
	d := deny(td, "no")
	d.Result.Permission.ArgumentsDigest = stale
	h.resume("resume-deny", d)
	if a := h.waitAnswer("resume-deny"); a.kind != "resolved" || a.res.Code != tickets.ResolvedDenied {
		t.Fatalf("deny naming a stale digest answered %+v, want denied", a)
	}
	h.quiet()
	if a := h.auditOf("call_u", contracts.AuditDecisionApproved); a == nil || !a.Unbound || a.ArgumentsDigest != tu.ArgumentsDigest || a.ProposedArgumentsDigest != "" {
		t.Errorf("unbound approval audited %+v, want unbound with the proposed digest and no proposed_arguments_digest", a)
	}
}

// firstOfTwoApprovals approves tk, a ticket that needs two approvals and has none, as who
// on the api's resume subject ("resume-" + who), and fails the test unless the gate
// answers that it recorded that one approval of two, by who.
func (h *harness) firstOfTwoApprovals(tk contracts.ResumeTicket, who string) {
	h.T.Helper()
	id := "resume-" + who
	h.resumeOnAPISubject(id, approveAs(tk, who, ""))
	a := h.waitAnswer(id)
	if a.kind != "resolved" || a.res.Code != tickets.ResolvedApprovalRecorded || a.res.Approvals != 1 || a.res.ApprovalsRequired != 2 || a.res.Actor != who {
		h.T.Fatalf("first approval answered %+v, want approval_recorded 1 of 2 by %s", a, who)
	}
}

// TestSeveralApprovers: a rule with approvals: 2 resolves its ticket
// only at the second distinct approval. The first is recorded on the ticket and answered
// approval_recorded; the same actor again (also behind another claimed name) is refused
// duplicate_approver, a claimed actor approver_not_authenticated, an edit
// edit_needs_single_approval — each leaving the ticket as it was. The second approval
// runs the call once, the resolution and the audit name both approvers, and a redelivery
// of the first approval counts nothing.
func TestSeveralApprovers(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_2", "two_keys", `{"amount":10}`)
	if tk.ApprovalsRequired != 2 || len(tk.Approvals) != 0 {
		t.Fatalf("ticket requires %d approvals with %d recorded, want 2 and none", tk.ApprovalsRequired, len(tk.Approvals))
	}

	h.firstOfTwoApprovals(tk, "alice")
	after1 := h.waitTicket(tk.CorrelationID)
	if got := actors(after1.Approvals); len(got) != 1 || got[0] != "alice" {
		t.Fatalf("ticket approvals %v, want [alice]", got)
	}
	if rec := h.mustCall(b, 0); rec.Phase.Kind != contracts.PhaseAwaiting {
		t.Fatalf("call after one of two approvals is %s, want awaiting", rec.Phase.Kind)
	}

	editCmd := approveAs(tk, "erin", `{"amount":1}`)
	for _, tt := range []struct {
		id      string
		cmd     contracts.ResumeCommand
		claimed bool
		code    contracts.ResumeErrorCode
	}{
		{"resume-alice-again", approveAs(tk, "alice", ""), false, contracts.ResumeDuplicateApprover},
		{"resume-alice-as-bob", approveAs(tk, "Alice as bob", ""), false, contracts.ResumeDuplicateApprover},
		{"resume-claimed", approveAs(tk, "carol", ""), true, contracts.ResumeApproverNotAuthenticated},
		{"resume-edit", editCmd, false, contracts.ResumeEditNeedsSingleApproval},
	} {
		if tt.claimed {
			h.resume(tt.id, tt.cmd)
		} else {
			h.resumeOnAPISubject(tt.id, tt.cmd)
		}
		if a := h.waitAnswer(tt.id); a.kind != "rejected" || a.res.Code != string(tt.code) {
			t.Errorf("%s answered %+v, want rejected %s", tt.id, a, tt.code)
		}
	}
	h.quiet()
	if now, _ := h.ticket(tk.CorrelationID); len(now.Approvals) != 1 || now.Approvals[0] != after1.Approvals[0] {
		t.Fatalf("ticket approvals after the refusals: %+v, want alice's alone", now.Approvals)
	}

	h.resumeOnAPISubject("resume-bob", approveAs(tk, "bob", ""))
	if a := h.waitAnswer("resume-bob"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved || a.res.Approvals != 2 || a.res.ApprovalsRequired != 2 {
		t.Fatalf("second approval answered %+v, want approved with 2 of 2", a)
	}
	rec := h.waitCall(b, 0, "approved", isPhase(contracts.PhaseExecuting))
	if got := actors(rec.Approvals); rec.ResolvedActor != "bob" || len(got) != 2 || got[0] != "alice" || got[1] != "bob" {
		t.Fatalf("call resolved by %q with approvals %v, want bob with [alice bob]", rec.ResolvedActor, got)
	}
	h.quiet()
	if _, ok := h.ticket(tk.CorrelationID); ok {
		t.Fatal("ticket still open after the second approval")
	}

	// The first approval delivered again: it is answered as before and counts nothing.
	ev, err := cloudevent.NewEvent("resume-alice", "awaken/test", contracts.TypeTicketResume, approveAs(tk, "alice", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Env.Handle(ServiceName, h.Svc.tickets.HandleResume)(h.Ctx, bus.Delivery{Event: ev, Subject: h.Env.Names.TicketResumeAPISubject()}); err != nil {
		t.Fatalf("redelivered first approval: %v", err)
	}
	h.quiet()
	if n := len(h.execRequests()); n != 1 {
		t.Errorf("%d executor requests, want 1", n)
	}
	audit := h.auditOf("call_2", contracts.AuditDecisionApproved)
	if audit == nil || audit.Actor != "bob" || len(audit.Approvals) != 2 || audit.Approvals[0].Actor != "alice" {
		t.Fatalf("approved audit %+v, want bob's with alice's and bob's approvals", audit)
	}
	if n := count(h.audits(), func(a contracts.AuditRecord) bool {
		return a.CallID == "call_2" && a.Decision == contracts.AuditDecisionApproved
	}); n != 1 {
		t.Errorf("%d approved audit records, want 1", n)
	}
}

// TestOneDenialVetoes: a denial after an approval of a ticket that needs two resolves it
// denied at once — also from a claimed actor — and the audit keeps the approval so far.
func TestOneDenialVetoes(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_v", "two_keys", `{}`)
	h.firstOfTwoApprovals(tk, "alice")
	veto := deny(tk, "too much")
	veto.Actor = "dave"
	h.resume("resume-veto", veto)
	if a := h.waitAnswer("resume-veto"); a.kind != "resolved" || a.res.Code != tickets.ResolvedDenied || a.res.Approvals != 1 {
		t.Fatalf("veto answered %+v, want denied with 1 approval recorded", a)
	}
	rec := h.waitCall(b, 0, "denied", isPhase(contracts.PhaseCompleted))
	if outputText(rec) != "blocked: too much" {
		t.Fatalf("output %q", outputText(rec))
	}
	h.quiet()
	if a := h.auditOf("call_v", contracts.AuditDecisionDenied); a == nil || a.Actor != "dave" || len(a.Approvals) != 1 {
		t.Fatalf("denied audit %+v, want dave's with alice's approval", a)
	}
	h.resumeOnAPISubject("resume-bob", approveAs(tk, "bob", ""))
	if a := h.waitAnswer("resume-bob"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeNotWaiting) {
		t.Fatalf("approval after the veto answered %+v, want not_waiting", a)
	}
}

// TestConcurrentApprovalsCountOnceEach: with two gate replicas, the approvals of a ticket
// that needs three, sent at once, are counted once each (the ticket is updated by
// compare-and-swap): exactly one approves the call, the others are approval_recorded,
// and the call runs once.
func TestConcurrentApprovalsCountOnceEach(t *testing.T) {
	h := newHarness(t)
	h.StartReplica()
	const rounds = 3
	for r := range rounds {
		b, tk := h.park(int64(r+1), fmt.Sprintf("call_%d", r), "three_keys", `{}`)
		ids := []string{}
		var wg sync.WaitGroup
		for _, who := range []string{"alice", "bob", "carol"} {
			id := fmt.Sprintf("resume-%d-%s", r, who)
			ids = append(ids, id)
			wg.Go(func() { h.resumeOnAPISubject(id, approveAs(tk, who, "")) })
		}
		wg.Wait()
		approved, recorded := 0, map[int]bool{}
		for _, id := range ids {
			switch a := h.waitAnswer(id); {
			case a.kind == "resolved" && a.res.Code == tickets.ResolvedApproved:
				approved++
			case a.kind == "resolved" && a.res.Code == tickets.ResolvedApprovalRecorded:
				recorded[a.res.Approvals] = true
			default:
				t.Errorf("round %d: %s answered %+v", r, id, a)
			}
		}
		if approved != 1 || !recorded[1] || !recorded[2] {
			t.Fatalf("round %d: %d approved, recorded counts %v; want one approved and approvals 1 and 2 recorded", r, approved, recorded)
		}
		rec := h.waitCall(b, 0, "approved", isPhase(contracts.PhaseExecuting))
		if len(rec.Approvals) != 3 {
			t.Fatalf("round %d: call resolved with approvals %v, want three", r, actors(rec.Approvals))
		}
	}
	h.quiet()
	if n := len(h.execRequests()); n != rounds {
		t.Errorf("%d executor requests, want %d", n, rounds)
	}
}

// TestExpiryWithApprovalsSoFar: a ticket that needs two approvals and has one when its
// deadline passes ends as an expiry by the timer — blocked, audited expired with the
// approval so far — never as a human decision.
func TestExpiryWithApprovalsSoFar(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_x", "two_keys_timeout", `{}`)
	h.firstOfTwoApprovals(tk, "alice")
	rec := h.waitCall(b, 0, "expired", isPhase(contracts.PhaseCompleted))
	if outputText(rec) != "blocked: "+tickets.ApprovalTimedOut || rec.ResolvedActor != contracts.ActorTimer {
		t.Fatalf("expired call: output %q resolved by %q", outputText(rec), rec.ResolvedActor)
	}
	natstest.WaitFor(t, waitLong, func() bool { return h.auditOf("call_x", contracts.AuditDecisionExpired) != nil }, "expired audit")
	a := h.auditOf("call_x", contracts.AuditDecisionExpired)
	if a.Actor != contracts.ActorTimer || len(a.Approvals) != 1 || a.Approvals[0].Actor != "alice" {
		t.Fatalf("expired audit %+v, want the timer's with alice's approval", a)
	}
	if h.auditOf("call_x", contracts.AuditDecisionApproved) != nil || h.auditOf("call_x", contracts.AuditDecisionDenied) != nil {
		t.Fatal("an expiry was audited as a human decision")
	}
}
