package gate

import (
	"encoding/json"
	"fmt"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// park gates call 0 of a one-call batch of tool at step and waits for its ticket.
func (h *harness) park(step int64, callID, tool, args string) (*contracts.BatchRecord, contracts.ResumeTicket) {
	h.T.Helper()
	b := h.store(h.submission(step, call(callID, tool, args)))
	h.gate(b, 0)
	rec := h.waitCall(b, 0, "parked", isPhase(contracts.PhaseAwaiting))
	return b, h.waitTicket(rec.Phase.Wait.CorrelationID)
}

// TestResumeRejectionMatrix sends one command per refusal code against committed tickets:
// each is answered on the rejected subject with its code and the command's ce-id, the
// ticket stays exactly as it was, and the call stays parked.
func TestResumeRejectionMatrix(t *testing.T) {
	h := newHarness(t)
	permB, perm := h.park(1, "call_p", "ask_long", `{"x":1}`)
	clientB, client := h.park(2, "call_c", "client_pick", `{}`)

	// A ticket stored under another key than its own correlation id: only a corrupted or
	// forged ticket can make the looked-up ticket name another correlation.
	forgedKey := contracts.CorrelationID(contracts.ReasonPermission, testRunID, 1, "call_forged")
	if _, err := h.Env.Tickets.Create(h.Ctx, forgedKey, perm); err != nil {
		t.Fatal(err)
	}
	withID := func(cmd contracts.ResumeCommand, f func(*contracts.ResumeCommand)) contracts.ResumeCommand {
		f(&cmd)
		return cmd
	}
	out := func(callID string) *contracts.ToolOutput {
		o := contracts.TextOutput(callID, "picked")
		return &o
	}
	rows := []struct {
		name string
		cmd  contracts.ResumeCommand
		code contracts.ResumeErrorCode
	}{
		{"no ticket", withID(allow(perm), func(c *contracts.ResumeCommand) {
			c.CorrelationID = contracts.CorrelationID(contracts.ReasonPermission, testRunID, 1, "call_nope")
		}), contracts.ResumeNotWaiting},
		{"ticket names another correlation", withID(allow(perm), func(c *contracts.ResumeCommand) { c.CorrelationID = forgedKey }),
			contracts.ResumeCorrelationMismatch},
		{"other run", withID(allow(perm), func(c *contracts.ResumeCommand) { c.RunID = "run-2" }), contracts.ResumeRunMismatch},
		{"other thread", withID(allow(perm), func(c *contracts.ResumeCommand) { c.ThreadID = "thread-2" }), contracts.ResumeThreadMismatch},
		{"other snapshot", withID(allow(perm), func(c *contracts.ResumeCommand) { c.SnapshotID = "snap-2" }), contracts.ResumeSnapshotMismatch},
		{"tool result for a permission ticket", contracts.ResumeCommandFromTicket(perm, contracts.ResumeResult{ToolResult: out("call_p")}),
			contracts.ResumeResultKindMismatch},
		{"permission for a client ticket", allow(client), contracts.ResumeResultKindMismatch},
		{"tool result for another call", contracts.ResumeCommandFromTicket(client, contracts.ResumeResult{ToolResult: out("call_other")}),
			contracts.ResumeToolCallMismatch},
	}
	for n, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h.T = t
			id := fmt.Sprintf("resume-%d", n)
			h.resume(id, row.cmd)
			a := h.waitAnswer(id)
			if a.kind != "rejected" || a.res.Code != string(row.code) || a.res.CorrelationID != row.cmd.CorrelationID {
				t.Fatalf("answer %+v, want rejected %s", a, row.code)
			}
			for _, tk := range []contracts.ResumeTicket{perm, client} {
				got, ok := h.ticket(tk.CorrelationID)
				if !ok || !reflect.DeepEqual(normalizeTicket(got), normalizeTicket(tk)) {
					t.Errorf("ticket %s changed: %+v", tk.CorrelationID, got)
				}
			}
			if h.mustCall(permB, 0).Phase.Kind != contracts.PhaseAwaiting || h.mustCall(clientB, 0).Phase.Kind != contracts.PhaseAwaiting {
				t.Errorf("a rejected resume moved a call")
			}
		})
	}

	t.Run("undecodable command is answered with the decoder's code and dead-lettered", func(t *testing.T) {
		h.T = t
		bad := allow(perm)
		bad.Result.ToolResult = out("call_p") // both results
		h.resume("resume-bad", bad)
		a := h.waitAnswer("resume-bad")
		if a.kind != "rejected" || a.res.Code != string(contracts.RejectInvalidField) {
			t.Fatalf("answer %+v, want rejected invalid_field", a)
		}
		natstest.WaitFor(t, waitLong, func() bool {
			return len(h.Messages(h.Env.Names.DeadLetterStream(), h.Env.Names.DeadLetterSubject(contracts.ConsumerGateResume))) == 1
		}, "dead letter")
		if _, ok := h.ticket(perm.CorrelationID); !ok {
			t.Error("ticket gone after an undecodable command")
		}
	})
	h.T = t
	if n := len(h.execRequests()) + len(h.outputs()); n != 0 {
		t.Errorf("rejected resumes published %d work messages", n)
	}
}

// normalizeTicket drops the monotonic clock reading so a decoded ticket compares equal.
func normalizeTicket(t contracts.ResumeTicket) contracts.ResumeTicket {
	t.OpenedAt = t.OpenedAt.Round(0).UTC()
	return t
}

// TestApprovalCommitsBeforeTheExecutorRequest watches the audit subject and the call
// record's subject on one channel of a second connection, which preserves the order the
// server stored them in: the approved audit record must come before the executor request
// (the record's revision that hands the call over), which must be Executing{1}, not
// entered, resolved by the command and carrying the arguments that run. A second resume
// then gets not_waiting.
func TestApprovalCommitsBeforeTheExecutorRequest(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_1", "ask_me", `{"x":1}`)

	nc2, _ := h.Server.Conn(t)
	ch := make(chan *nats.Msg, 64)
	for _, subj := range []string{h.Env.Names.AuditSubject(testRunID), h.Env.Names.CallRecordSubject(contracts.CallKeyOf(b, 0))} {
		sub, err := nc2.ChanSubscribe(subj, ch)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc2.Flush(); err != nil {
		t.Fatal(err)
	}

	h.resume("resume-1", allow(tk))
	approvedFirst := false
	var rec contracts.CallRecord
	for done := false; !done; {
		select {
		case m := <-ch:
			switch m.Header.Get("ce-type") {
			case contracts.TypeAudit:
				var a contracts.AuditRecord
				if err := json.Unmarshal(m.Data, &a); err != nil {
					t.Fatal(err)
				}
				approvedFirst = approvedFirst || a.Decision == contracts.AuditDecisionApproved
			case contracts.TypeExecRequest:
				if err := json.Unmarshal(m.Data, &rec); err != nil {
					t.Fatal(err)
				}
				done = true
			}
		case <-time.After(waitLong):
			t.Fatal("no executor request after approval")
		}
	}
	if !approvedFirst {
		t.Error("the executor request was stored before the approved audit record")
	}
	if rec.Phase.Kind != contracts.PhaseExecuting || rec.Phase.Attempt != 1 || rec.Entered || rec.ResolvedBy != "resume-1" ||
		string(rec.Input) != `{"x":1}` {
		t.Errorf("the executor request is %+v entered=%v resolved_by=%q input=%s", rec.Phase, rec.Entered, rec.ResolvedBy, rec.Input)
	}
	if a := h.waitAnswer("resume-1"); a.kind != "resolved" || a.res.Code != tickets.ResolvedApproved {
		t.Errorf("answer %+v", a)
	}
	if _, ok := h.ticket(tk.CorrelationID); ok {
		t.Error("ticket still exists after approval")
	}

	h.resume("resume-2", allow(tk))
	if a := h.waitAnswer("resume-2"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeNotWaiting) {
		t.Errorf("second resume answered %+v, want not_waiting", a)
	}
	h.quiet()
	if got := h.auditsOf("call_1"); !equalStrings(got, []string{"ask", "approved"}) {
		t.Errorf("audit %v", got)
	}
	if n := len(h.execRequests()); n != 1 {
		t.Errorf("%d executor requests, want 1", n)
	}
}

// TestDenyCompletesBlocked: a deny completes the call "blocked: {reason}" (or "blocked:
// denied" without one), audits denied, publishes the output and never an executor request.
func TestDenyCompletesBlocked(t *testing.T) {
	for _, row := range []struct{ name, reason, want string }{
		{"with a reason", "not today", "blocked: not today"},
		{"without a reason", "", "blocked: denied"},
	} {
		t.Run(row.name, func(t *testing.T) {
			h := newHarness(t)
			b, tk := h.park(1, "call_1", "ask_me", `{}`)
			h.resume("resume-1", deny(tk, row.reason))
			if a := h.waitAnswer("resume-1"); a.kind != "resolved" || a.res.Code != tickets.ResolvedDenied {
				t.Fatalf("answer %+v", a)
			}
			rec := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
			if outputText(rec) != row.want || !rec.Phase.Output.IsError {
				t.Errorf("output %+v, want error %q", rec.Phase.Output, row.want)
			}
			h.quiet()
			if got := h.auditsOf("call_1"); !equalStrings(got, []string{"ask", "denied"}) {
				t.Errorf("audit %v", got)
			}
			if n := len(h.execRequests()); n != 0 {
				t.Errorf("%d executor requests after a deny", n)
			}
			if outs := h.outputs(); len(outs) != 1 || decodeAs[contracts.CallOutput](t, outs[0]).Outcome != contracts.OutcomeCompleted {
				t.Errorf("outputs %v", outs)
			}
		})
	}
}

// TestClientToolResult: the client's result for the parked call completes it as given; no
// audit record (no permission was decided).
func TestClientToolResult(t *testing.T) {
	h := newHarness(t)
	b, tk := h.park(1, "call_1", "client_pick", `{"options":[1,2]}`)
	out := contracts.TextOutput("call_1", "picked 2")
	h.resume("resume-1", contracts.ResumeCommandFromTicket(tk, contracts.ResumeResult{ToolResult: &out}))
	if a := h.waitAnswer("resume-1"); a.kind != "resolved" || a.res.Code != tickets.ResolvedCompleted {
		t.Fatalf("answer %+v", a)
	}
	rec := h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	if !rec.Phase.Output.Equal(out) {
		t.Errorf("output %+v, want %+v", rec.Phase.Output, out)
	}
	h.quiet()
	if got := h.auditsOf("call_1"); len(got) != 0 {
		t.Errorf("audit %v for a client-executed call", got)
	}
	if len(h.outputs()) != 1 || len(h.execRequests()) != 0 {
		t.Errorf("outputs %d executor requests %d, want 1 and 0", len(h.outputs()), len(h.execRequests()))
	}
}

// TestConcurrentApproveAndDeny: many approvals and denials of one ticket race across two
// gate replicas; exactly one resolves it and every other is answered not_waiting.
func TestConcurrentApproveAndDeny(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.StartReplica(bus.WithWorkers(8))
	h.StartReplica(bus.WithWorkers(8)) // a second replica on the same consumers
	b, tk := h.park(1, "call_1", "ask_me", `{}`)

	const n = 24
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := allow(tk)
			if i%2 == 1 {
				cmd = deny(tk, "no")
			}
			ev := fmt.Sprintf("race-%d", i)
			h.resume(ev, cmd)
		})
	}
	wg.Wait()
	var answers []answer
	natstest.WaitFor(t, waitLong, func() bool {
		answers = answers[:0]
		for _, a := range h.answers() {
			if len(a.res.ResumeID) > 5 && a.res.ResumeID[:5] == "race-" {
				answers = append(answers, a)
			}
		}
		return len(answers) == n
	}, "an answer to every command")
	var winner answer
	resolved := 0
	for _, a := range answers {
		switch {
		case a.kind == "resolved":
			resolved++
			winner = a
		case a.res.Code != string(contracts.ResumeNotWaiting):
			t.Errorf("loser answered %+v, want not_waiting", a)
		}
	}
	if resolved != 1 {
		t.Fatalf("%d commands resolved the ticket, want exactly 1", resolved)
	}
	h.quiet()
	rec := h.mustCall(b, 0)
	if rec.ResolvedBy != winner.res.ResumeID {
		t.Errorf("resolved_by %q, winner %q", rec.ResolvedBy, winner.res.ResumeID)
	}
	switch winner.res.Code {
	case tickets.ResolvedApproved:
		if rec.Phase.Kind != contracts.PhaseExecuting || len(h.execRequests()) != 1 || len(h.outputs()) != 0 {
			t.Errorf("approval won but phase %s, %d executor requests, %d outputs", rec.Phase.Kind, len(h.execRequests()), len(h.outputs()))
		}
	case tickets.ResolvedDenied:
		if rec.Phase.Kind != contracts.PhaseCompleted || len(h.execRequests()) != 0 || len(h.outputs()) != 1 {
			t.Errorf("denial won but phase %s, %d executor requests, %d outputs", rec.Phase.Kind, len(h.execRequests()), len(h.outputs()))
		}
	default:
		t.Errorf("winner code %q", winner.res.Code)
	}
	if got := h.auditsOf("call_1"); len(got) != 2 {
		t.Errorf("audit %v, want ask and one resolution", got)
	}
}

// TestApprovalDeadline: an approval timeout completes the call "blocked: approval timed
// out" at its deadline (timer), and a resume that comes later is refused; a resume that
// arrives past the deadline before the timer is refused expired and expires the call.
func TestApprovalDeadline(t *testing.T) {
	t.Run("timer", func(t *testing.T) {
		h := newHarness(t)
		b, tk := h.park(1, "call_1", "ask_timeout", `{}`)
		if tk.Deadline == nil || tk.Deadline.Sub(tk.OpenedAt) != time.Second {
			t.Fatalf("ticket deadline %v opened %v, want opened+1s", tk.Deadline, tk.OpenedAt)
		}
		rec := h.waitCall(b, 0, "expired", isPhase(contracts.PhaseCompleted))
		if outputText(rec) != "blocked: approval timed out" {
			t.Errorf("output %q", outputText(rec))
		}
		if at, _ := rec.MarkTime(contracts.StageResumed); at.Before(*tk.Deadline) {
			t.Errorf("expired at %s, before the deadline %s", at, tk.Deadline)
		}
		h.quiet()
		if _, ok := h.ticket(tk.CorrelationID); ok {
			t.Error("ticket survived its deadline")
		}
		if got := h.auditsOf("call_1"); !equalStrings(got, []string{"ask", "expired"}) {
			t.Errorf("audit %v", got)
		}
		if count(h.answers(), func(a answer) bool { return a.kind == "resolved" && a.res.Code == tickets.ResolvedExpired }) != 1 {
			t.Errorf("answers %+v: want one expired resolution", h.answers())
		}
		h.resume("late", allow(tk))
		if a := h.waitAnswer("late"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeExpired) {
			t.Errorf("late resume answered %+v, want expired", a)
		}
		if len(h.execRequests()) != 0 || len(h.outputs()) != 1 {
			t.Errorf("%d executor requests, %d outputs", len(h.execRequests()), len(h.outputs()))
		}
	})
	t.Run("resume past the deadline", func(t *testing.T) {
		h := newHarness(t)
		b, tk := h.park(1, "call_1", "ask_long", `{}`)
		h.Advance(2 * time.Hour)
		h.resume("late", allow(tk))
		if a := h.waitAnswer("late"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeExpired) {
			t.Fatalf("answer %+v, want expired", a)
		}
		rec := h.waitCall(b, 0, "expired", isPhase(contracts.PhaseCompleted))
		if outputText(rec) != "blocked: approval timed out" {
			t.Errorf("output %q", outputText(rec))
		}
		h.resume("later", deny(tk, ""))
		if a := h.waitAnswer("later"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeExpired) {
			t.Errorf("second late resume answered %+v, want expired", a)
		}
		h.quiet()
		if got := h.auditsOf("call_1"); !equalStrings(got, []string{"ask", "expired"}) {
			t.Errorf("audit %v", got)
		}
		if len(h.execRequests()) != 0 || len(h.outputs()) != 1 {
			t.Errorf("%d executor requests, %d outputs", len(h.execRequests()), len(h.outputs()))
		}
	})
}

// TestApprovedFixedResultToolNeverEntersAnExecutor: a run policy may ask before a tool the
// host answers with a fixed result; approving it completes the call with that result.
func TestApprovedFixedResultToolNeverEntersAnExecutor(t *testing.T) {
	h := newHarness(t)
	sub := h.submission(1, call("call_1", "stub", `{}`))
	sub.Policy = &contracts.PolicyConfig{DefaultBehavior: contracts.BehaviorAsk}
	b := h.store(sub)
	h.gate(b, 0)
	rec := h.waitCall(b, 0, "parked", isPhase(contracts.PhaseAwaiting))
	h.resume("resume-1", allow(h.waitTicket(rec.Phase.Wait.CorrelationID)))
	rec = h.waitCall(b, 0, "completed", isPhase(contracts.PhaseCompleted))
	if outputText(rec) != "stubbed: in maintenance" {
		t.Errorf("output %q", outputText(rec))
	}
	h.quiet()
	if len(h.execRequests()) != 0 || len(h.outputs()) != 1 {
		t.Errorf("%d executor requests, %d outputs, want 0 and 1", len(h.execRequests()), len(h.outputs()))
	}
	if got := h.auditsOf("call_1"); !equalStrings(got, []string{"ask", "approved"}) {
		t.Errorf("audit %v", got)
	}
}
