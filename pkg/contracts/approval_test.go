package contracts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestArgumentsDigestIsCanonical: arguments equal as JSON have one digest whatever their
// spelling; any change of value gives another.
func TestArgumentsDigestIsCanonical(t *testing.T) {
	a := ArgumentsDigest(json.RawMessage(`{"b":[1,2],"a":"x"}`))
	if b := ArgumentsDigest(json.RawMessage(" {\n \"a\" : \"x\", \"b\": [1, 2]}")); a != b {
		t.Fatalf("same value, other spelling: %s and %s", a, b)
	}
	if !strings.HasPrefix(a, DigestPrefix) || len(a) != len(DigestPrefix)+64 {
		t.Fatalf("digest %q is not sha256:{64 hex}", a)
	}
	for _, other := range []string{`{"b":[2,1],"a":"x"}`, `{"b":[1,2],"a":"y"}`, `{"b":[1,2]}`, `not json`} {
		if ArgumentsDigest(json.RawMessage(other)) == a {
			t.Errorf("%s has the digest of another value", other)
		}
	}
}

// TestPolicyDigestNamesThePolicies: a rule change, or a run policy, changes the digest.
func TestPolicyDigestNamesThePolicies(t *testing.T) {
	host := PolicyConfig{Rules: []PolicyRule{{Pattern: "x", Behavior: BehaviorAsk}}}
	d := PolicyDigest(host, nil)
	if d != PolicyDigest(host, nil) {
		t.Fatal("not deterministic")
	}
	changed := PolicyConfig{Rules: []PolicyRule{{Pattern: "x", Behavior: BehaviorAsk, Approvals: 2}}}
	if PolicyDigest(changed, nil) == d || PolicyDigest(host, &host) == d {
		t.Fatal("another policy has the same digest")
	}
}

// TestApprovalsRuleCompiles: approvals belong to ask rules, 1 to MaxApprovals; the verdict
// carries them, and narrowing keeps the larger number.
func TestApprovalsRuleCompiles(t *testing.T) {
	for _, bad := range []PolicyRule{
		{Pattern: "x", Behavior: BehaviorAllow, Approvals: 2},
		{Pattern: "x", Behavior: BehaviorSchedule, Delay: Duration(1e9), Approvals: 2},
		{Pattern: "x", Behavior: BehaviorAsk, Approvals: -1},
		{Pattern: "x", Behavior: BehaviorAsk, Approvals: MaxApprovals + 1},
	} {
		_, err := CompilePolicy(PolicyConfig{Rules: []PolicyRule{bad}})
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Field != "rules[0].approvals" {
			t.Errorf("rule %+v: error %v, want a PolicyError on rules[0].approvals", bad, err)
		}
	}
	p, err := CompilePolicy(PolicyConfig{Rules: []PolicyRule{{Pattern: "x", Behavior: BehaviorAsk, Approvals: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	o := p.Evaluate(ToolCall{CallID: "c", ToolID: "x", Arguments: json.RawMessage(`{}`)}, "corr").IntoGateOutcome()
	if o.Kind != GateRequireConfirmation || o.Approvals != 3 {
		t.Fatalf("outcome %+v, want require_confirmation with 3 approvals", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("outcome with approvals: %v", err)
	}
	run := GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "corr", Approvals: 5}
	if n := NarrowGateOutcome(o, run).Approvals; n != 5 {
		t.Errorf("narrowed approvals %d, want the larger, 5", n)
	}
	if n := NarrowGateOutcome(run, o).Approvals; n != 5 {
		t.Errorf("narrowed approvals %d (operands swapped), want 5", n)
	}
	if err := (GateOutcome{Kind: GateAllow, Approvals: 2}).Validate(); !errors.Is(err, ErrInvalidGateOutcome) {
		t.Errorf("an allow carrying approvals: %v, want ErrInvalidGateOutcome", err)
	}
}

// TestResumeDigestBinding: an allow naming the ticket's digest (or none, this release) is
// accepted, another digest is digest_mismatch; a deny is never refused for its digest;
// ResumeCommandFromTicket names the ticket's digest on an allow.
func TestResumeDigestBinding(t *testing.T) {
	tk := rtTicket(ReasonPermission)
	tk.ArgumentsDigest = ArgumentsDigest(tk.Arguments)
	cmd := ResumeCommandFromTicket(tk, rtAllow())
	if cmd.Result.Permission.ArgumentsDigest != tk.ArgumentsDigest {
		t.Fatalf("command names digest %q, want the ticket's", cmd.Result.Permission.ArgumentsDigest)
	}
	rtWantCode(t, ValidateResume(&tk, cmd, rtNow), "", "the ticket's digest")
	cmd.Result.Permission.ArgumentsDigest = ""
	rtWantCode(t, ValidateResume(&tk, cmd, rtNow), "", "no digest (compatibility)")
	cmd.Result.Permission.ArgumentsDigest = ArgumentsDigest(json.RawMessage(`{"x":1}`))
	err := ValidateResume(&tk, cmd, rtNow)
	if !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("stale digest: %v, want digest_mismatch", err)
	}
	old := tk
	old.ArgumentsDigest = "" // a ticket opened before tickets carried the digest
	rtWantCode(t, ValidateResume(&old, ResumeCommandFromTicket(tk, rtAllow()), rtNow), "", "a ticket without a recorded digest")
	d := ResumeCommandFromTicket(tk, rtDeny("no"))
	if d.Result.Permission.ArgumentsDigest != "" {
		t.Fatal("a deny was given a digest")
	}
	d.Result.Permission.ArgumentsDigest = "sha256:stale"
	rtWantCode(t, ValidateResume(&tk, d, rtNow), "", "a deny naming a stale digest")
}

// TestResumeDuplicateApprover: on a ticket that needs several approvals, an allow by an
// actor already recorded — whatever case, spaces or claim after "as" — is
// duplicate_approver; another actor, or a deny by the same one, is accepted.
func TestResumeDuplicateApprover(t *testing.T) {
	tk := rtTicket(ReasonPermission)
	tk.ApprovalsRequired = 2
	tk.Approvals = []TicketApproval{{Actor: "alice", ResumeID: "r1", At: rtNow}}
	for _, actor := range []string{"alice", " ALICE ", "alice as bob"} {
		cmd := ResumeCommandFromTicket(tk, rtAllow())
		cmd.Actor = actor
		if err := ValidateResume(&tk, cmd, rtNow); !errors.Is(err, ErrDuplicateApprover) {
			t.Errorf("actor %q: %v, want duplicate_approver", actor, err)
		}
	}
	cmd := ResumeCommandFromTicket(tk, rtAllow())
	cmd.Actor = "bob"
	rtWantCode(t, ValidateResume(&tk, cmd, rtNow), "", "another actor")
	d := ResumeCommandFromTicket(tk, rtDeny("no"))
	d.Actor = "alice"
	rtWantCode(t, ValidateResume(&tk, d, rtNow), "", "a deny by an approver")
	single := rtTicket(ReasonPermission)
	single.Approvals = tk.Approvals
	cmd.Actor = "alice"
	rtWantCode(t, ValidateResume(&single, cmd, rtNow), "", "a ticket that needs one approval")
}
