package gate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// TestGateOutcomes drives one gate input per row through the running gate and checks the
// committed call record, the ticket, and every message the gate published for the call.
func TestGateOutcomes(t *testing.T) {
	h := newHarness(t)
	policy := func(rules ...contracts.PolicyRule) func(*contracts.BatchSubmission) {
		return func(s *contracts.BatchSubmission) {
			s.Policy = &contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorAllow, Rules: rules}
		}
	}
	rule := func(pattern string, b contracts.PolicyBehavior) contracts.PolicyRule {
		return contracts.PolicyRule{Pattern: pattern, Behavior: b}
	}
	rows := []struct {
		name string
		tool string
		args string
		mod  func(*contracts.BatchSubmission)
		pin  func(*contracts.PinnedCall)

		target contracts.ToolExecutionTarget // executor request expected on this target
		text   string                        // Completed with this text (prefix)
		park   contracts.ToolWaitKind        // parked on this wait
		audit  string                        // audit decision, "" for none
		disp   contracts.ToolDisposition
		// deadline is the approval deadline of a permission ticket after its opening, 0 for none.
		deadline time.Duration
	}{
		{name: "allow runs on brain", tool: "echo", args: `{"text":"hi"}`,
			target: contracts.TargetBrain, audit: "allow", disp: contracts.DispositionExecuted},
		{name: "allow runs a sandbox tool on sandbox", tool: "wc", args: `{"text":"a b"}`,
			target: contracts.TargetSandbox, audit: "allow", disp: contracts.DispositionExecuted},
		{name: "a target inside the arguments changes nothing", tool: "echo", args: `{"text":"hi","target":"sandbox"}`,
			target: contracts.TargetBrain, audit: "allow", disp: contracts.DispositionExecuted},
		{name: "a target in the submission's tool list changes nothing", tool: "echo", args: `{"target":"sandbox","tool":"wc"}`,
			mod:    func(s *contracts.BatchSubmission) { s.Agent.Tools = append(s.Agent.Tools, "sandbox") },
			target: contracts.TargetBrain, audit: "allow", disp: contracts.DispositionExecuted},
		{name: "host deny blocks", tool: "forbidden", args: `{}`,
			text: "blocked: tool forbidden denied by policy", audit: "deny", disp: contracts.DispositionExecuted},
		{name: "host set_result answers without an executor", tool: "stub", args: `{}`,
			text: "stubbed: in maintenance", audit: "set_result", disp: contracts.DispositionExecuted},
		{name: "host ask parks on a permission ticket", tool: "ask_me", args: `{"x":1}`,
			park: contracts.WaitToolPermission, audit: "ask", disp: contracts.DispositionPendingBuiltin},
		{name: "host schedule parks on a scheduled ticket", tool: "later_long", args: `{}`,
			park: contracts.WaitScheduledAction, audit: "schedule", disp: contracts.DispositionPendingBuiltin},
		{name: "client-executed tool parks without a gate", tool: "client_pick", args: `{}`,
			park: contracts.WaitExternalResult, disp: contracts.DispositionPendingClient},
		{name: "unregistered tool is unknown", tool: "nosuch", args: `{}`,
			text: "unknown tool: nosuch", disp: contracts.DispositionExecuted},
		{name: "invisible tool is unknown", tool: "echo", args: `{}`,
			mod:  func(s *contracts.BatchSubmission) { s.Agent.Tools = []string{"wc"} },
			text: "unknown tool: echo", disp: contracts.DispositionExecuted},
		{name: "invisible tool the host asks for is unknown, not parked", tool: "ask_me", args: `{}`,
			mod:  func(s *contracts.BatchSubmission) { s.Agent.Tools = []string{"wc"} },
			text: "unknown tool: ask_me", disp: contracts.DispositionExecuted},
		{name: "invisible client tool is unknown", tool: "client_pick", args: `{}`,
			mod:  func(s *contracts.BatchSubmission) { s.Agent.Tools = []string{"wc"} },
			text: "unknown tool: client_pick", disp: contracts.DispositionExecuted},
		{name: "narrowing deny_all blocks", tool: "echo", args: `{}`,
			mod:  func(s *contracts.BatchSubmission) { s.Narrowing = contracts.NarrowingDenyAll },
			text: "blocked: " + contracts.DenyAllReason, audit: "deny", disp: contracts.DispositionExecuted},
		{name: "run policy deny narrows a host allow", tool: "echo", args: `{}`,
			mod:  policy(rule("echo", contracts.BehaviorDeny)),
			text: "blocked: tool echo denied by policy", audit: "deny", disp: contracts.DispositionExecuted},
		{name: "run policy ask narrows a host allow", tool: "echo", args: `{}`,
			mod:  policy(rule("echo", contracts.BehaviorAsk)),
			park: contracts.WaitToolPermission, audit: "ask", disp: contracts.DispositionPendingBuiltin},
		{name: "run policy allow never widens a host deny", tool: "forbidden", args: `{}`,
			mod:  policy(rule("forbidden", contracts.BehaviorAllow)),
			text: "blocked: tool forbidden denied by policy", audit: "deny", disp: contracts.DispositionExecuted},
		{name: "run policy ask never widens a host deny", tool: "forbidden", args: `{}`,
			mod:  policy(rule("forbidden", contracts.BehaviorAsk)),
			text: "blocked: tool forbidden denied by policy", audit: "deny", disp: contracts.DispositionExecuted},
		{name: "run policy allow never skips a host ask", tool: "ask_me", args: `{}`,
			mod:  policy(rule("ask_me", contracts.BehaviorAllow)),
			park: contracts.WaitToolPermission, audit: "ask", disp: contracts.DispositionPendingBuiltin},
		{name: "run policy schedule never turns a host ask into a run without a human", tool: "ask_me", args: `{}`,
			mod:  policy(contracts.PolicyRule{Pattern: "ask_me", Behavior: contracts.BehaviorSchedule, Delay: contracts.Duration(time.Second)}),
			park: contracts.WaitToolPermission, audit: "ask", disp: contracts.DispositionPendingBuiltin},
		{name: "run policy schedule never shortens the host's delay", tool: "later_long", args: `{}`,
			mod:  policy(contracts.PolicyRule{Pattern: "later_long", Behavior: contracts.BehaviorSchedule, Delay: contracts.Duration(time.Second)}),
			park: contracts.WaitScheduledAction, audit: "schedule", disp: contracts.DispositionPendingBuiltin},
		{name: "run policy ask never lengthens the host's approval timeout", tool: "ask_long", args: `{}`,
			mod:  policy(contracts.PolicyRule{Pattern: "ask_long", Behavior: contracts.BehaviorAsk, Timeout: contracts.Duration(876000 * time.Hour)}),
			park: contracts.WaitToolPermission, audit: "ask", disp: contracts.DispositionPendingBuiltin,
			deadline: time.Hour},
		{name: "run policy ask narrows a host schedule", tool: "later_long", args: `{}`,
			mod:  policy(rule("later_long", contracts.BehaviorAsk)),
			park: contracts.WaitToolPermission, audit: "ask", disp: contracts.DispositionPendingBuiltin},
		{name: "run policy that does not compile blocks with the compile error", tool: "echo", args: `{"text":"x"}`,
			mod:  policy(rule(`echo(text =~ "x")`, contracts.BehaviorAllow)),
			text: "blocked: invalid run policy: permission policy: rules[0].pattern", audit: "deny", disp: contracts.DispositionExecuted},
		{name: "pinned policy the capability does not support fails before entry", tool: "counter", args: `{}`,
			pin: func(p *contracts.PinnedCall) {
				p.Policy = contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 3}
			},
			text: "tool execution failed: unsupported recovery mode", audit: "allow", disp: contracts.DispositionExecuted},
		{name: "a pin without a trusted target fails closed", tool: "echo", args: `{"target":"brain"}`,
			pin:  func(p *contracts.PinnedCall) { p.Target = "" },
			text: "tool execution failed: tool echo has no trusted execution target", audit: "allow", disp: contracts.DispositionExecuted},
	}
	for n, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h.T = t
			callID := fmt.Sprintf("call_%d", n)
			sub := h.submission(int64(100+n), call(callID, row.tool, row.args))
			if row.mod != nil {
				row.mod(&sub)
			}
			var b *contracts.BatchRecord
			if row.pin != nil {
				b = h.storeWith(sub, row.pin)
			} else {
				b = h.store(sub)
			}
			h.gate(b, 0)
			rec := h.waitCall(b, 0, "decided", func(r contracts.CallRecord) bool { return r.Phase.Kind != contracts.PhaseRequested })
			h.quiet()

			execs := byCall(t, h.execRequests(), callID)
			outs := byCall(t, h.outputs(), callID)
			switch {
			case row.target != "":
				if rec.Phase.Kind != contracts.PhaseExecuting || rec.Phase.Attempt != 1 || rec.Entered {
					t.Fatalf("phase = %+v entered=%v, want Executing{1} not entered", rec.Phase, rec.Entered)
				}
				if len(execs) != 1 {
					t.Fatalf("%d executor requests, want 1", len(execs))
				}
				if want := h.Env.Names.CallRecordSubject(contracts.CallKey(row.target, testRunID, b.Submission.Step, callID)); execs[0].Subject != want {
					t.Errorf("executor request on %s, want %s", execs[0].Subject, want)
				}
				req := decodeAs[contracts.ExecRequest](t, execs[0])
				if req.Target != row.target || req.Attempt != 1 || req.Parallel || req.Index != 0 || req.ToolID != row.tool {
					t.Errorf("executor request %+v", req)
				}
				if len(outs) != 0 {
					t.Errorf("%d call outputs for an executing call", len(outs))
				}
			case row.text != "":
				if rec.Phase.Kind != contracts.PhaseCompleted || !strings.HasPrefix(outputText(rec), row.text) {
					t.Fatalf("phase %s output %q, want Completed with %q", rec.Phase.Kind, outputText(rec), row.text)
				}
				if rec.Phase.Output.CallID != callID {
					t.Errorf("output call id %q", rec.Phase.Output.CallID)
				}
				if len(execs) != 0 || len(outs) != 1 {
					t.Fatalf("%d executor requests and %d outputs, want 0 and 1", len(execs), len(outs))
				}
				if o := decodeAs[contracts.CallOutput](t, outs[0]); o.Outcome != contracts.OutcomeCompleted || o.Parallel {
					t.Errorf("call output %+v", o)
				}
			case row.park != "":
				if rec.Phase.Kind != contracts.PhaseAwaiting || rec.Phase.Wait.Kind != row.park {
					t.Fatalf("phase %+v, want Awaiting %s", rec.Phase, row.park)
				}
				if len(execs) != 0 || len(outs) != 0 {
					t.Fatalf("parked call published %d executor requests and %d outputs", len(execs), len(outs))
				}
				corr := rec.Phase.Wait.CorrelationID
				tk, ok := h.ticket(corr)
				if !ok {
					t.Fatalf("no ticket %s", corr)
				}
				reason, _ := contracts.ReasonForWaitKind(row.park)
				if tk.Reason != reason || tk.CallID != callID || tk.ToolID != row.tool || tk.RunID != testRunID ||
					tk.ThreadID != "thread-1" || tk.SnapshotID != "snap-1" || tk.BatchID != sub.BatchID() {
					t.Errorf("ticket %+v", tk)
				}
				if want := contracts.CorrelationID(reason, testRunID, sub.Step, callID); corr != want {
					t.Errorf("correlation %q, want %q", corr, want)
				}
				if row.park == contracts.WaitScheduledAction && (tk.DueAt == nil || tk.DueAt.Sub(tk.OpenedAt) != time.Hour) {
					t.Errorf("scheduled ticket due_at %v opened %v, want opened+1h", tk.DueAt, tk.OpenedAt)
				}
				if row.park == contracts.WaitToolPermission {
					if got := tk.Deadline; (row.deadline == 0) != (got == nil) || got != nil && got.Sub(tk.OpenedAt) != row.deadline {
						t.Errorf("permission ticket deadline %v opened %v, want opened+%v", got, tk.OpenedAt, row.deadline)
					}
				}
				if count(h.opened(), func(o contracts.ResumeTicket) bool { return o.CorrelationID == corr }) != 1 {
					t.Errorf("ticket.opened not published once")
				}
				facts := h.factsOf(callID)
				if count(facts, func(f contracts.AgentFact) bool {
					return f.Type == contracts.EventAwaiting && f.PendingToolUseID == callID
				}) != 1 {
					t.Errorf("facts %+v lack one awaiting fact", facts)
				}
			}
			var wantAudit []string
			if row.audit != "" {
				wantAudit = []string{row.audit}
			}
			if got := h.auditsOf(callID); !equalStrings(got, wantAudit) {
				t.Errorf("audit %v, want %v", got, wantAudit)
			}
			if row.audit != "" && (rec.Decision == nil || rec.Decision.AuditLabel() != row.audit) {
				t.Errorf("recorded decision %+v, want %s", rec.Decision, row.audit)
			}
			calls := count(h.factsOf(callID), func(f contracts.AgentFact) bool {
				return f.Type == contracts.EventToolCall && f.Disposition == row.disp && f.Name == row.tool
			})
			if calls != 1 {
				t.Errorf("facts %+v: want one tool_call with disposition %s", h.factsOf(callID), row.disp)
			}
			// The tool_call fact is live: the call record and the audit record hold what
			// it says, so the call's path stores nothing for it.
			if stored := count(h.storedFacts(), func(f contracts.AgentFact) bool {
				return f.Type == contracts.EventToolCall && f.ID == callID
			}); stored != 0 {
				t.Errorf("%d tool_call facts of %s stored on the events subject, want them live only", stored, callID)
			}
		})
	}
}

// storeWith stores sub with its pin of call 0 changed by pin (a batch written by an older
// configuration).
func (h *harness) storeWith(sub contracts.BatchSubmission, pin func(*contracts.PinnedCall)) *contracts.BatchRecord {
	h.T.Helper()
	rec := contracts.BatchRecord{Submission: sub, Hash: sub.Hash(), Phase: contracts.BatchPhaseOpen}
	for _, c := range sub.Calls {
		rec.Pinned = append(rec.Pinned, h.Env.Config.Pin(c.ToolID))
	}
	pin(&rec.Pinned[0])
	h.accept(rec)
	return &rec
}

// callRef reads the call id of any work message.
type callRef struct {
	CallID string `json:"call_id"`
}

// byCall keeps the work messages (executor requests, call outputs) of callID.
func byCall(t *testing.T, ms []msg, callID string) []msg {
	t.Helper()
	var out []msg
	for _, m := range ms {
		if decodeAs[callRef](t, m).CallID == callID {
			out = append(out, m)
		}
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestScheduledCallRunsAtDueTimeWithoutAHuman parks a call on a 1 s schedule and waits for
// JetStream message scheduling to deliver its due timer: the call enters execution with no
// resume command, audited "schedule" then "scheduled", and its ticket is gone.
func TestScheduledCallRunsAtDueTimeWithoutAHuman(t *testing.T) {
	h := newHarness(t)
	b := h.store(h.submission(1, call("call_1", "later", `{"n":1}`)))
	h.gate(b, 0)
	rec := h.waitCall(b, 0, "parked", isPhase(contracts.PhaseAwaiting))
	corr := rec.Phase.Wait.CorrelationID
	tk := h.waitTicket(corr)
	if tk.DueAt == nil || tk.Reason != contracts.ReasonScheduledAction {
		t.Fatalf("ticket %+v, want a scheduled ticket with due_at", tk)
	}
	if d := tk.DueAt.Sub(tk.OpenedAt); d != time.Second {
		t.Errorf("due_at - opened_at = %s, want 1s", d)
	}

	rec = h.waitCall(b, 0, "executing after its due time", isPhase(contracts.PhaseExecuting))
	if rec.Phase.Attempt != 1 || rec.Entered || rec.ResolvedBy != tickets.TimerResolver(corr, tickets.TimerDue) {
		t.Errorf("record %+v", rec)
	}
	if at, _ := rec.MarkTime(contracts.StageResumed); at.Before(*tk.DueAt) {
		t.Errorf("scheduled call resumed at %s, before its due_at %s", at, tk.DueAt)
	}
	natstest.WaitFor(t, waitLong, func() bool { return len(byCall(t, h.execRequests(), "call_1")) == 1 }, "executor request")
	h.quiet()
	if _, ok := h.ticket(corr); ok {
		t.Errorf("ticket %s still exists after its due time", corr)
	}
	if got := h.auditsOf("call_1"); !equalStrings(got, []string{"schedule", tickets.AuditScheduled}) {
		t.Errorf("audit %v, want [schedule scheduled]", got)
	}
	if n := len(byCall(t, h.execRequests(), "call_1")); n != 1 {
		t.Errorf("%d executor requests, want 1", n)
	}
	resolved := count(h.answers(), func(a answer) bool {
		return a.kind == "resolved" && a.res.CorrelationID == corr && a.res.Code == tickets.ResolvedApproved
	})
	if resolved != 1 {
		t.Errorf("%d approved resolutions, want 1", resolved)
	}
}
