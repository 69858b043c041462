package gate

import (
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// TestGateRedeliveryAtEachPhase writes the call record as a crash at each phase
// would leave it, then delivers the gate input again (twice, with different message
// ids, so the stream does not deduplicate): the gate never decides again and publishes
// exactly what the committed phase implies, once.
func TestGateRedeliveryAtEachPhase(t *testing.T) {
	h := newHarness(t)
	allowed := &contracts.GateOutcome{Kind: contracts.GateAllow}
	rows := []struct {
		name string
		tool string
		// state writes the record a crash left; nil leaves the call without a record.
		state func(b *contracts.BatchRecord, rec *contracts.CallRecord)

		phase   contracts.PhaseKind
		execs   int
		outputs int
		opened  int
		audit   []string
	}{
		{name: "no record yet", tool: "echo",
			phase: contracts.PhaseExecuting, execs: 1, audit: []string{"allow"}},
		{name: "no record yet, ask", tool: "ask_me",
			phase: contracts.PhaseAwaiting, opened: 1, audit: []string{"ask"}},
		{name: "decision recorded by a probe", tool: "echo",
			state: func(b *contracts.BatchRecord, rec *contracts.CallRecord) {
				must(rec.Probe(allowed, "", h.Env.Now()))
			},
			phase: contracts.PhaseExecuting, execs: 1, audit: nil},
		{name: "executing, executor not entered", tool: "echo",
			state: func(b *contracts.BatchRecord, rec *contracts.CallRecord) {
				must(rec.Decide(allowed, "", h.Env.Now()))
				must(rec.Dispatch(h.Env.Now()))
				must(rec.CarryInput([]byte(`{}`)))
			},
			phase: contracts.PhaseExecuting, execs: 1, audit: []string{"allow"}},
		{name: "executing, executor entered", tool: "echo",
			state: func(b *contracts.BatchRecord, rec *contracts.CallRecord) {
				must(rec.Decide(allowed, "", h.Env.Now()))
				must(rec.Dispatch(h.Env.Now()))
				must(rec.CarryInput([]byte(`{}`)))
				must(rec.Enter(7, h.Env.Now()))
			},
			phase: contracts.PhaseExecuting, execs: 0, audit: []string{"allow"}},
		{name: "completed", tool: "forbidden",
			state: func(b *contracts.BatchRecord, rec *contracts.CallRecord) {
				must(rec.Decide(&contracts.GateOutcome{Kind: contracts.GateBlock, Reason: "no"}, "", h.Env.Now()))
				must(rec.CompleteImmediate(contracts.ErrorOutput(rec.CallID, "blocked: no"), h.Env.Now()))
			},
			phase: contracts.PhaseCompleted, outputs: 1, audit: []string{"deny"}},
		{name: "awaiting, ticket not yet created", tool: "ask_me",
			state: func(b *contracts.BatchRecord, rec *contracts.CallRecord) {
				corr := contracts.CorrelationID(contracts.ReasonPermission, testRunID, b.Submission.Step, rec.CallID)
				must(rec.Decide(&contracts.GateOutcome{Kind: contracts.GateRequireConfirmation, CorrelationID: corr}, "", h.Env.Now()))
				must(rec.Park(contracts.WaitToolPermission, corr, h.Env.Now()))
			},
			phase: contracts.PhaseAwaiting, opened: 1, audit: []string{"ask"}},
	}
	for n, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			h.T = t
			callID := fmt.Sprintf("call_%d", n)
			b := h.store(h.submission(int64(10+n), call(callID, row.tool, `{}`)))
			if row.state != nil {
				rec := newCallRecord(b, 0)
				row.state(b, &rec)
				if _, err := h.Env.Calls.Create(h.Ctx, callKey(b, 0), rec); err != nil {
					t.Fatal(err)
				}
			}
			h.gate(b, 0)
			h.gate(b, 0)
			h.waitCall(b, 0, string(row.phase), isPhase(row.phase))
			h.quiet()
			h.gate(b, 0)
			h.quiet()

			if got := len(byCall(t, h.execRequests(), callID)); got != row.execs {
				t.Errorf("%d executor requests, want %d", got, row.execs)
			}
			if got := len(byCall(t, h.outputs(), callID)); got != row.outputs {
				t.Errorf("%d outputs, want %d", got, row.outputs)
			}
			if got := count(h.opened(), func(tk contracts.ResumeTicket) bool { return tk.CallID == callID }); got != row.opened {
				t.Errorf("%d tickets opened, want %d", got, row.opened)
			}
			if got := h.auditsOf(callID); !equalStrings(got, row.audit) {
				t.Errorf("audit %v, want %v", got, row.audit)
			}
			if row.opened > 0 {
				rec := h.mustCall(b, 0)
				if _, ok := h.ticket(rec.Phase.Wait.CorrelationID); !ok {
					t.Error("ticket missing after redelivery")
				}
			}
		})
	}
}

// TestCrashAtEachStepThenRedelivery arms the fault hook to fail a handler once after its
// commit or after its publishes — as a crash there would — and lets the bus redeliver the
// input: the outcome is the same as without the crash, and every output is published once.
func TestCrashAtEachStepThenRedelivery(t *testing.T) {
	type scenario struct {
		// run sets the scene, arms the fault through arm, triggers the input and waits
		// for the outcome; check asserts on the quiet system.
		run   func(h *harness, arm func(op string)) *contracts.BatchRecord
		check func(t *testing.T, h *harness, b *contracts.BatchRecord)
	}
	oneExec := func(t *testing.T, h *harness, b *contracts.BatchRecord) {
		if n := len(h.execRequests()); n != 1 {
			t.Errorf("%d executor requests, want 1", n)
		}
	}
	oneOutput := func(t *testing.T, h *harness) {
		if n := len(h.outputs()); n != 1 {
			t.Errorf("%d outputs, want 1", n)
		}
	}
	auditIs := func(t *testing.T, h *harness, want ...string) {
		if got := h.auditsOf("call_1"); !equalStrings(got, want) {
			t.Errorf("audit %v, want %v", got, want)
		}
	}
	// gateOne stores a batch of one call of tool, crashes at its gate input, and waits
	// until the redelivery has brought the call to phase (what waits for).
	gateOne := func(tool, what string, phase contracts.PhaseKind) func(h *harness, arm func(string)) *contracts.BatchRecord {
		return func(h *harness, arm func(string)) *contracts.BatchRecord {
			b := h.store(h.submission(1, call("call_1", tool, `{}`)))
			arm(op(b, 0))
			h.gate(b, 0)
			h.waitCall(b, 0, what, isPhase(phase))
			return b
		}
	}
	// resumeOne parks a call of tool on its ticket, lets late pass on the clock, crashes at
	// the resume resumeID approving it, and waits until the redelivery has brought the call
	// to phase (what waits for) and answered the resume.
	resumeOne := func(tool, resumeID string, late time.Duration, what string, phase contracts.PhaseKind) func(h *harness, arm func(string)) *contracts.BatchRecord {
		return func(h *harness, arm func(string)) *contracts.BatchRecord {
			b, tk := h.park(1, "call_1", tool, `{}`)
			h.quiet()
			if late > 0 {
				h.Advance(late)
			}
			arm(op(b, 0))
			h.resume(resumeID, allow(tk))
			h.waitCall(b, 0, what, isPhase(phase))
			h.waitAnswer(resumeID)
			return b
		}
	}
	scenarios := map[string]scenario{
		"gate input, allow": {
			run: gateOne("echo", "executing", contracts.PhaseExecuting),
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				oneExec(t, h, b)
				auditIs(t, h, "allow")
			},
		},
		"gate input, ask": {
			run: gateOne("ask_me", "parked", contracts.PhaseAwaiting),
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				rec := h.mustCall(b, 0)
				if _, ok := h.ticket(rec.Phase.Wait.CorrelationID); !ok {
					t.Error("no ticket after redelivery")
				}
				if n := len(h.opened()); n != 1 {
					t.Errorf("%d ticket.opened, want 1", n)
				}
				auditIs(t, h, "ask")
			},
		},
		"probe": {
			run: func(h *harness, arm func(string)) *contracts.BatchRecord {
				b := h.storeDelegates("a", "b")
				arm(pipeline.ProbeID(b.Submission.BatchID()))
				h.probe(b)
				h.waitCall(b, 1, "executing", isPhase(contracts.PhaseExecuting))
				return b
			},
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				if n := len(h.execRequests()); n != 2 {
					t.Errorf("%d executor requests, want 2", n)
				}
				if n := len(h.audits()); n != 2 {
					t.Errorf("%d audit records, want 2", n)
				}
			},
		},
		"resume, approve": {
			run: resumeOne("ask_me", "resume-1", 0, "executing", contracts.PhaseExecuting),
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				oneExec(t, h, b)
				auditIs(t, h, "ask", "approved")
				if n := count(h.answers(), func(a answer) bool { return a.res.ResumeID == "resume-1" }); n != 1 {
					t.Errorf("%d answers to the resume, want 1 (%+v)", n, h.answers())
				}
				if a := h.waitAnswer("resume-1"); a.kind != "resolved" {
					t.Errorf("the redelivered resume was answered %+v", a)
				}
			},
		},
		"deadline timer": {
			run: func(h *harness, arm func(string)) *contracts.BatchRecord {
				b, _ := h.park(1, "call_1", "ask_timeout", `{}`)
				arm(op(b, 0))
				h.waitCall(b, 0, "expired", isPhase(contracts.PhaseCompleted))
				return b
			},
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				oneOutput(t, h)
				auditIs(t, h, "ask", "expired")
				if n := count(h.answers(), func(a answer) bool { return a.kind == "resolved" }); n != 1 {
					t.Errorf("%d resolutions, want 1", n)
				}
			},
		},
		"resume past the deadline": {
			run: resumeOne("ask_long", "late", 2*time.Hour, "expired", contracts.PhaseCompleted),
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				oneOutput(t, h)
				auditIs(t, h, "ask", "expired")
				if n := count(h.answers(), func(a answer) bool { return a.kind == "resolved" && a.res.Code == tickets.ResolvedExpired }); n != 1 {
					t.Errorf("%d expiries, want 1", n)
				}
				if a := h.waitAnswer("late"); a.kind != "rejected" || a.res.Code != string(contracts.ResumeExpired) {
					t.Errorf("late resume answered %+v, want expired", a)
				}
			},
		},
		"cancel": {
			run: func(h *harness, arm func(string)) *contracts.BatchRecord {
				b, _ := h.park(1, "call_1", "later_long", `{}`)
				h.quiet()
				arm(b.Submission.BatchID())
				h.cancelRun("cancel-1", testRunID)
				h.waitCall(b, 0, "sealed", isPhase(contracts.PhaseIndeterminate))
				return b
			},
			check: func(t *testing.T, h *harness, b *contracts.BatchRecord) {
				oneOutput(t, h)
				if _, ok := h.ticket(contracts.CorrelationID(contracts.ReasonScheduledAction, testRunID, 1, "call_1")); ok {
					t.Error("ticket survived")
				}
			},
		},
	}
	for name, sc := range scenarios {
		for _, point := range []pipeline.FaultPoint{pipeline.FaultAfterCommit, pipeline.FaultAfterPublish} {
			t.Run(name+"/"+string(point), func(t *testing.T) {
				h := newHarness(t)
				b := sc.run(h, func(op string) { h.FailAt(point, op, 1, nil) })
				h.quiet()
				if h.Injected() != 1 {
					t.Fatalf("the fault at %s never fired", point)
				}
				sc.check(t, h, b)
			})
		}
	}
}

// must panics on a transition a test's setup expects to be legal.
func must(err error) {
	if err != nil {
		panic(err)
	}
}
