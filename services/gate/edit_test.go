package gate

import (
	"encoding/json"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// approveAs is an allow of t by actor that edits the arguments to args ("" keeps them).
func approveAs(t contracts.ResumeTicket, actor, args string) contracts.ResumeCommand {
	cmd := allow(t)
	cmd.Actor = actor
	if args != "" {
		cmd.Result.Permission.Arguments = json.RawMessage(args)
	}
	return cmd
}

// TestApproveWithEditedArguments: an edit that does not fit the tool's schema is refused
// invalid_arguments and consumes nothing; a valid edit runs the tool with the new
// arguments and the record, the audit record, the resolution and a tool_call fact keep
// both arguments and the actor; a redelivery of the command applies nothing again, even
// if its body were different.
func TestApproveWithEditedArguments(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_e", "edit_me", `{"path":"/tmp/a"}`)

	for n, bad := range []string{`{"path":1}`, `{"path":"/tmp/b","extra":true}`, `["/tmp/b"]`, `"x"`} {
		id := h.uniq("resume-bad")
		h.resume(id, approveAs(tk, "alice", bad))
		a := h.waitAnswer(id)
		if a.kind != "rejected" || a.res.Code != string(contracts.ResumeInvalidArguments) {
			t.Fatalf("edit %d %s: answer %+v, want rejected invalid_arguments", n, bad, a)
		}
		if _, ok := h.ticket(tk.CorrelationID); !ok {
			t.Fatalf("edit %d %s consumed the ticket", n, bad)
		}
		if rec := h.mustCall(b, 0); rec.Phase.Kind != contracts.PhaseAwaiting || rec.ResolvedBy != "" {
			t.Fatalf("edit %d %s moved the call: %+v", n, bad, rec)
		}
	}

	const edited = `{"path":"/tmp/b"}`
	h.resume("resume-edit", approveAs(tk, "alice", edited))
	if a := h.waitAnswer("resume-edit"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved || a.res.Actor != "alice" {
		t.Fatalf("answer %+v, want resolved approved by alice", a)
	}
	rec := h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting))
	if string(rec.EditedArguments) != edited || rec.ResolvedActor != "alice" {
		t.Fatalf("record keeps edit %s by %q, want %s by alice", rec.EditedArguments, rec.ResolvedActor, edited)
	}
	h.quiet()
	execs := h.execRequests()
	if len(execs) != 1 {
		t.Fatalf("%d executor requests, want 1", len(execs))
	}
	if req := decodeAs[contracts.ExecRequest](t, execs[0]); string(req.Arguments) != edited {
		t.Fatalf("the executor is asked to run %s, want the edit %s", req.Arguments, edited)
	}
	var approved *contracts.AuditRecord
	for _, a := range h.audits() {
		if a.CallID == "call_e" && a.Decision == contracts.AuditDecisionApproved {
			approved = &a
		}
	}
	if approved == nil || approved.Actor != "alice" || string(approved.Arguments) != edited || string(approved.ProposedArguments) != `{"path":"/tmp/a"}` {
		t.Fatalf("approved audit %+v, want actor alice with both arguments", approved)
	}
	var editFact *contracts.AgentFact
	for _, f := range h.factsOf("call_e") {
		if f.Type == contracts.EventToolCall && f.ProposedInput != nil {
			editFact = &f
		}
	}
	if editFact == nil || string(editFact.Input) != edited || string(editFact.ProposedInput) != `{"path":"/tmp/a"}` {
		t.Fatalf("edited tool_call fact %+v, want input %s and the proposed input", editFact, edited)
	}

	// A redelivery of the very command (another body cannot come under the same id, but
	// even if it did) re-publishes what the record says, and changes nothing.
	eff, err := h.Svc.tickets.Resume(h.Ctx, "resume-edit", approveAs(tk, "mallory", `{"path":"/tmp/c"}`), true)
	if err == nil {
		err = h.Env.Apply(h.Ctx, ServiceName, eff)
	}
	if err != nil {
		t.Fatal(err)
	}
	h.quiet()
	if got := h.mustCall(b, 0); string(got.EditedArguments) != edited || got.ResolvedActor != "alice" {
		t.Fatalf("the redelivery rewrote the record: edit %s by %q", got.EditedArguments, got.ResolvedActor)
	}
	if n := len(h.execRequests()); n != 1 {
		t.Fatalf("%d executor requests after the redelivery, want 1", n)
	}
	if got := h.auditsOf("call_e"); len(got) != 2 || got[0] != contracts.AuditDecisionAsk || got[1] != contracts.AuditDecisionApproved {
		t.Fatalf("audits %v, want ask then approved, once each", got)
	}
}

// TestEditedArgumentsGatedAgain: an approval whose edit matches a deny rule of the host
// policy denies the call as the policy says (blocked, audit deny with the approver and
// both arguments) and nothing runs; an approval without an edit runs as proposed and
// records its actor.
func TestEditedArgumentsGatedAgain(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_d", "edit_me", `{"path":"/tmp/a"}`)
	h.resume("resume-etc", approveAs(tk, "bob", `{"path":"/etc/passwd"}`))
	a := h.waitAnswer("resume-etc")
	if a.kind != "resolved" || a.res.Code != tickets.ResolvedDenied || a.res.Actor != "bob" {
		t.Fatalf("answer %+v, want resolved denied by bob", a)
	}
	rec := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	if got := outputText(rec); got != "blocked: tool edit_me denied by policy" {
		t.Fatalf("output %q, want the policy's block", got)
	}
	h.quiet()
	if n := len(h.execRequests()); n != 0 {
		t.Fatalf("%d executor requests for a blocked edit, want 0", n)
	}
	var deny *contracts.AuditRecord
	for _, au := range h.audits() {
		if au.CallID == "call_d" && au.Decision == contracts.AuditDecisionDeny {
			deny = &au
		}
	}
	if deny == nil || deny.Actor != "bob" || string(deny.Arguments) != `{"path":"/etc/passwd"}` || string(deny.ProposedArguments) != `{"path":"/tmp/a"}` {
		t.Fatalf("deny audit %+v, want bob's edit with both arguments", deny)
	}

	b2, tk2 := h.park(2, "call_p", "edit_me", `{"path":"/tmp/a"}`)
	h.resume("resume-plain", approveAs(tk2, "carol", `{ "path" : "/tmp/a" }`)) // equal JSON: no edit
	if a := h.waitAnswer("resume-plain"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved || a.res.Actor != "carol" {
		t.Fatalf("answer %+v, want approved by carol", a)
	}
	rec = h.waitCall(b2, 0, "executing", isPhase(contracts.PhaseExecuting))
	if rec.EditedArguments != nil || rec.ResolvedActor != "carol" {
		t.Fatalf("record %+v, want no edit, actor carol", rec)
	}
}

// TestEditedArgumentsFailClosed: for a brain tool whose only schema is the descriptor
// brain-exec published, an edit is refused invalid_arguments (the ticket stays open) while
// the descriptors are missing or do not decode strictly — as when a forged reply wiped the
// key — and checked against the schema once a readable descriptor is there.
func TestEditedArgumentsFailClosed(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_f", "ask_me", `{"n":1}`)
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.ToolsBucket())
	if err != nil {
		t.Fatal(err)
	}
	key := contracts.ToolDescriptorsKey(contracts.TargetBrain)
	refused := func(stage string) {
		t.Helper()
		id := h.uniq("resume-" + stage)
		h.resume(id, approveAs(tk, "alice", `{"n":2}`))
		a := h.waitAnswer(id)
		if a.kind != "rejected" || a.res.Code != string(contracts.ResumeInvalidArguments) {
			t.Fatalf("%s: answer %+v, want rejected invalid_arguments", stage, a)
		}
		if _, ok := h.ticket(tk.CorrelationID); !ok {
			t.Fatalf("%s: the refused edit consumed the ticket", stage)
		}
		t.Logf("%s: %s", stage, a.res.Message)
	}
	refused("no descriptors")
	// The catalog as a reply would have written it: an object, not the list.
	if _, err := kv.Put(h.Ctx, key, []byte(`{"tools":[{"id":"echo"}]}`)); err != nil {
		t.Fatal(err)
	}
	refused("descriptors unreadable")
	if _, err := kv.Put(h.Ctx, key, []byte(`[{"id":"echo","description":"","parameters":{"type":"object"}}] junk`)); err != nil {
		t.Fatal(err)
	}
	refused("trailing data")
	if _, err := kv.Put(h.Ctx, key, []byte(`[{"id":"echo","description":"","parameters":{"type":"object"}}]`)); err != nil {
		t.Fatal(err)
	}
	refused("no descriptor of the tool")
	if _, err := kv.Put(h.Ctx, key, []byte(`[{"id":"ask_me","description":"","parameters":{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}}]`)); err != nil {
		t.Fatal(err)
	}
	id := h.uniq("resume-bad-type")
	h.resume(id, approveAs(tk, "alice", `{"n":"x"}`))
	if a := h.waitAnswer(id); a.kind != "rejected" || a.res.Code != string(contracts.ResumeInvalidArguments) {
		t.Fatalf("edit against the schema: answer %+v, want rejected invalid_arguments", a)
	}
	h.resume("resume-ok", approveAs(tk, "alice", `{"n":2}`))
	if a := h.waitAnswer("resume-ok"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved {
		t.Fatalf("valid edit with a readable descriptor: answer %+v, want resolved approved", a)
	}
	if rec := h.waitCall(b, 0, "executing", isPhase(contracts.PhaseExecuting)); string(rec.EditedArguments) != `{"n":2}` {
		t.Fatalf("record keeps edit %s", rec.EditedArguments)
	}
}
