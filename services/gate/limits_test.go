package gate

import (
	"errors"
	"fmt"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

func intp(n int) *int { return &n }

// withLimits starts a gate whose host policy has limits (and the tools costs), after the
// harness parsed the test configuration.
func (h *harness) withLimits(costs map[string]float64, limits ...contracts.LimitConfig) {
	h.T.Helper()
	h.Env.Config.Policy.Limits = limits
	for id, c := range costs {
		found := false
		for i := range h.Env.Config.Tools {
			if h.Env.Config.Tools[i].ID == id {
				h.Env.Config.Tools[i].Cost, found = &c, true
			}
		}
		if !found {
			h.T.Fatalf("no tool %s", id)
		}
	}
	h.StartReplica()
}

// decided gates call 0 of a fresh one-call batch of run at step and waits for its
// decision to be recorded.
func (h *harness) decided(run string, step int64, tool string) contracts.CallRecord {
	h.T.Helper()
	sub := h.submission(step, call("c1", tool, `{"text":"hi"}`))
	sub.RunID = run
	b := h.store(sub)
	h.gate(b, 0)
	return h.waitCall(b, 0, "decided", func(r contracts.CallRecord) bool {
		return r.Phase.Kind != contracts.PhaseRequested && r.Decision != nil
	})
}

func wantBlocked(t *testing.T, rec contracts.CallRecord, limit, reason string) {
	t.Helper()
	if rec.Decision == nil || rec.Decision.Kind != contracts.GateBlock || rec.Decision.Limit != limit ||
		!strings.HasPrefix(rec.Decision.Reason, reason+": limit "+limit) {
		t.Fatalf("decision %+v, want a block by limit %s with reason %s", rec.Decision, limit, reason)
	}
	if rec.Phase.Kind != contracts.PhaseCompleted || rec.Phase.Output == nil || !strings.Contains(rec.Phase.Output.Text(), "blocked: "+reason) {
		t.Fatalf("call %+v, want completed with the model-visible reason %s", rec.Phase, reason)
	}
}

func wantRuns(t *testing.T, rec contracts.CallRecord) {
	t.Helper()
	if rec.Decision == nil || rec.Decision.Kind != contracts.GateAllow || rec.Phase.Kind != contracts.PhaseExecuting {
		t.Fatalf("call %+v decided %+v, want allowed and executing", rec.Phase, rec.Decision)
	}
}

// TestCountLimitBlocksPastNPerRun: a count of 2 per run lets the first two echo calls of a
// run run and blocks the third with count_exceeded, naming the limit in the decision and
// its audit record; another run has its own count, and a tool the limit does not match is
// not counted.
func TestCountLimitBlocksPastNPerRun(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "echo-per-run", Tools: []string{"echo"}, Key: "run", Count: intp(2)})

	wantRuns(t, h.decided(testRunID, 1, "echo"))
	wantRuns(t, h.decided(testRunID, 2, "counter"))
	wantRuns(t, h.decided(testRunID, 3, "echo"))
	wantBlocked(t, h.decided(testRunID, 4, "echo"), "echo-per-run", contracts.ReasonCountExceeded)
	wantRuns(t, h.decided("run-b", 1, "echo"))

	if e := h.ledger("echo-per-run", testRunID); e.Used != 2 || len(e.Held) != 2 {
		t.Fatalf("run-1's ledger %+v, want the two calls that ran", e)
	}
	var limited []contracts.AuditRecord
	natstest.WaitFor(t, waitLong, func() bool {
		limited = limited[:0]
		for _, a := range h.audits() {
			if a.Limit != "" {
				limited = append(limited, a)
			}
		}
		return len(limited) == 1
	}, "one audit record naming the limit")
	if a := limited[0]; a.RunID != testRunID || a.Decision != contracts.AuditDecisionDeny || a.Limit != "echo-per-run" {
		t.Fatalf("audit %+v, want run-1's deny by echo-per-run", a)
	}
}

// TestRateLimitBlocksPastNPerWindow: a rate of 2 per hour, global, blocks the third call of
// the window with rate_limited, across runs.
func TestRateLimitBlocksPastNPerWindow(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "echo-rate", Tools: []string{"echo"}, Key: "global",
		Rate: &contracts.RateLimitConfig{N: 2, Window: "1h"}})
	h.inMidHour()

	wantRuns(t, h.decided("run-a", 1, "echo"))
	wantRuns(t, h.decided("run-b", 1, "echo"))
	wantBlocked(t, h.decided("run-c", 1, "echo"), "echo-rate", contracts.ReasonRateLimited)
}

// TestBudgetBlocksAndAsks: echo costs 2 against a budget of 5 per run that blocks: two
// calls run, the third is blocked with budget_exhausted. counter costs 3 against a budget
// of 5 that asks: the first runs, the second asks, and its approval runs it.
func TestBudgetBlocksAndAsks(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(map[string]float64{"echo": 2, "counter": 3},
		contracts.LimitConfig{Name: "echo-budget", Tools: []string{"echo"}, Key: "run", Budget: &contracts.BudgetLimitConfig{Amount: 5}},
		contracts.LimitConfig{Name: "counter-budget", Tools: []string{"counter"}, Key: "run", Over: contracts.LimitOverAsk,
			Budget: &contracts.BudgetLimitConfig{Amount: 5}},
	)

	wantRuns(t, h.decided("run-a", 1, "echo"))
	wantRuns(t, h.decided("run-a", 2, "echo"))
	wantBlocked(t, h.decided("run-a", 3, "echo"), "echo-budget", contracts.ReasonBudgetExhausted)

	wantRuns(t, h.decided("run-a", 4, "counter"))
	asked := h.decided("run-a", 5, "counter")
	if asked.Decision.Kind != contracts.GateRequireConfirmation || asked.Decision.Limit != "counter-budget" ||
		asked.Phase.Kind != contracts.PhaseAwaiting {
		t.Fatalf("over the asking budget: %+v decided %+v, want an ask naming counter-budget", asked.Phase, asked.Decision)
	}
	tk := h.waitTicket(asked.Decision.CorrelationID)
	h.resume(h.uniq("approve"), allow(tk))
	b, err := h.Env.Batch(h.Ctx, "run-a", 5)
	if err != nil {
		t.Fatal(err)
	}
	h.waitCall(b, 0, "executing after the approval", isPhase(contracts.PhaseExecuting))
	if e := h.ledger("counter-budget", "run-a"); e.Used != 6 {
		t.Fatalf("counter budget used %v, want 6: the approved overrun is charged", e.Used)
	}
}

// TestRedeliveredDecisionIsNotCountedTwice: a crash after the count's ledger write, before
// the decision is recorded, redelivers the request; the redelivery finds its operation
// holding a share and counts nothing again, so a count of 1 still lets the call run (it
// would block it, as over the limit, if the share were counted twice).
func TestRedeliveredDecisionIsNotCountedTwice(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "once", Tools: []string{"echo"}, Key: "run", Count: intp(1)})
	sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
	b := h.store(sub)
	h.FailAt(FaultAfterLimitReserve, op(b, 0), 2, nil)
	h.gate(b, 0)
	wantRuns(t, h.waitCall(b, 0, "decided", isPhase(contracts.PhaseExecuting)))
	if n := h.Injected(); n != 2 {
		t.Fatalf("%d faults fired, want 2", n)
	}
	if e := h.ledger("once", testRunID); e.Used != 1 || len(e.Held) != 1 {
		t.Fatalf("ledger %+v, want the one call counted once", e)
	}
}

// TestShadowLimitChangesNothingButTheAudit: a shadow count of 1 lets every call run, and
// the audit record of the call over it says the limit would have denied it.
func TestShadowLimitChangesNothingButTheAudit(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "shadow-once", Tools: []string{"echo"}, Key: "run", Count: intp(1), Shadow: true})
	wantRuns(t, h.decided(testRunID, 1, "echo"))
	over := h.decided(testRunID, 2, "echo")
	wantRuns(t, over)
	want := []contracts.ShadowFinding{{Policy: contracts.ShadowPolicyHost, Rule: "limit:shadow-once", Index: 0,
		Would: contracts.AuditDecisionDeny, Reason: "count_exceeded: limit shadow-once allows 1 calls per run", Limit: "shadow-once"}}
	if len(over.Decision.Shadow) != 1 || over.Decision.Shadow[0] != want[0] {
		t.Fatalf("findings %+v, want %+v", over.Decision.Shadow, want)
	}
	var audits []contracts.AuditRecord
	natstest.WaitFor(t, waitLong, func() bool { audits = h.audits(); return len(audits) == 2 }, "two audit records")
	for _, a := range audits {
		if a.Decision != contracts.AuditDecisionAllow || a.Limit != "" {
			t.Errorf("audit %+v: a shadow limit changes no decision", a)
		}
	}
}

// TestAShareIsGivenBackWhenTheCallNeverRan: a count of 1 per run on ask_me counts the
// first call at its ask; its denial ends it without running, so the ledger gives its share
// back (once, although a crash after the release redelivers its terminal record) and the
// run's next ask_me call asks instead of being blocked.
func TestAShareIsGivenBackWhenTheCallNeverRan(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "one-ask", Tools: []string{"ask_me"}, Key: "run", Count: intp(1)})
	first := h.decided(testRunID, 1, "ask_me")
	if first.Decision.Kind != contracts.GateRequireConfirmation {
		t.Fatalf("first ask_me decided %+v, want ask", first.Decision)
	}
	b1, err := h.Env.Batch(h.Ctx, testRunID, 1)
	if err != nil {
		t.Fatal(err)
	}
	h.FailAt(FaultAfterLimitRelease, op(b1, 0), 1, nil)
	h.resume(h.uniq("deny"), deny(h.waitTicket(first.Decision.CorrelationID), "no"))
	h.waitCall(b1, 0, "completed by the denial", isPhase(contracts.PhaseCompleted))
	natstest.WaitFor(t, waitLong, func() bool { return h.Injected() == 1 }, "the crash after the release")
	h.waitSharesGivenBack("one-ask", testRunID, "the denied call's share given back")

	second := h.decided(testRunID, 2, "ask_me")
	if second.Decision.Kind != contracts.GateRequireConfirmation {
		t.Fatalf("second ask_me decided %+v, want ask: the denied call's share was given back", second.Decision)
	}
	if e := h.ledger("one-ask", testRunID); e.Used != 1 || len(e.Held) != 1 {
		t.Fatalf("ledger %+v, want the second call alone", e)
	}
}

// TestGlobalCountHeldAcrossReplicasUnderLoad: two gate replicas decide 40 one-call
// batches of 40 runs at once against a global count of 7: exactly 7 calls are allowed,
// the other 33 are blocked with count_exceeded, and the ledger holds exactly the 7.
func TestGlobalCountHeldAcrossReplicasUnderLoad(t *testing.T) {
	const runs, max = 40, 7
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "global-seven", Tools: []string{"echo"}, Key: "global", Count: intp(max)})
	h.StartReplica() // a second replica on the same durables
	var batches []*contracts.BatchRecord
	for r := range runs {
		sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
		sub.RunID = fmt.Sprintf("load-%02d", r)
		batches = append(batches, h.store(sub))
	}
	for _, b := range batches {
		h.gate(b, 0)
	}
	allowed, blocked := 0, 0
	for _, b := range batches {
		rec := h.waitCall(b, 0, "decided", func(r contracts.CallRecord) bool {
			return r.Phase.Kind != contracts.PhaseRequested && r.Decision != nil
		})
		switch {
		case rec.Decision.Kind == contracts.GateAllow:
			allowed++
		case rec.Decision.Limit == "global-seven" && strings.HasPrefix(rec.Decision.Reason, contracts.ReasonCountExceeded):
			blocked++
		default:
			t.Fatalf("%s decided %+v", b.Submission.RunID, rec.Decision)
		}
	}
	if allowed != max || blocked != runs-max {
		t.Fatalf("%d allowed and %d blocked, want %d and %d", allowed, blocked, max, runs-max)
	}
	if e := h.ledger("global-seven", ""); e.Used != max || len(e.Held) != max {
		t.Fatalf("ledger %+v, want exactly the %d allowed calls", e, max)
	}
}

// TestAShareReservedBeforeACancellationIsGivenBack: the gate reserves a call's share and
// dies before recording the decision (again and again), the run is cancelled, and the
// cancellation seals the call without a decision; the sealed record still gives the share
// back.
func TestAShareReservedBeforeACancellationIsGivenBack(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	// A global key: a run-keyed one is deleted with the cancelled run, which would leave
	// nothing to show the give-back on.
	h.withLimits(nil, contracts.LimitConfig{Name: "sealed", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal, Count: intp(5)})
	b := h.store(h.submission(1, call("c1", "echo", `{"text":"hi"}`)))
	h.FailAt(FaultAfterLimitReserve, op(b, 0), 1000, nil)
	h.gate(b, 0)
	natstest.WaitFor(t, waitLong, func() bool { return h.Injected() >= 1 }, "the share reserved, the decision not recorded")
	if e := h.ledger("sealed", ""); e.Used != 1 {
		t.Fatalf("ledger %+v, want the reserved share", e)
	}
	h.cancelRun("cancel-sealed", testRunID)
	rec := h.waitCall(b, 0, "sealed", isPhase(contracts.PhaseIndeterminate))
	if rec.Decision != nil {
		t.Fatalf("sealed call carries decision %+v", rec.Decision)
	}
	h.waitSharesGivenBack("sealed", "", "the sealed call's share given back")
}

// TestRateLimitWaitDefersToTheNextWindow: a global rate of 1 per hour with over: wait runs
// the first call and schedules the next ones, each to the first later window with room —
// the second to the next hour, the third to the one after — naming the limit, with the
// ticket due at the window's start. A redelivered decision finds the same window and counts
// nothing twice; the due timer hands the deferred call over.
func TestRateLimitWaitDefersToTheNextWindow(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "hourly", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal,
		Rate: &contracts.RateLimitConfig{N: 1, Window: "1h"}, Over: contracts.LimitOverWait})
	base := h.inMidHour()

	gated := func(run string) (*contracts.BatchRecord, contracts.CallRecord) {
		sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
		sub.RunID = run
		b := h.store(sub)
		h.gate(b, 0)
		return b, h.waitCall(b, 0, "decided", func(r contracts.CallRecord) bool {
			return r.Phase.Kind != contracts.PhaseRequested && r.Decision != nil
		})
	}
	a, ra := gated("run-a")
	wantRuns(t, ra)
	b, rb := gated("run-b")
	c, rc := gated("run-c")
	for n, tc := range []struct {
		b   *contracts.BatchRecord
		rec contracts.CallRecord
	}{{b, rb}, {c, rc}} {
		want := base.Add(time.Duration(n+1) * time.Hour)
		d := tc.rec.Decision
		if d.Kind != contracts.GateSchedule || d.Limit != "hourly" || d.Until == nil || !d.Until.Equal(want) ||
			!strings.HasPrefix(d.Reason, contracts.ReasonRateLimited+": limit hourly") {
			t.Fatalf("call of %s decided %+v, want a schedule by hourly until %s", tc.b.Submission.RunID, d, want)
		}
		if tc.rec.Phase.Kind != contracts.PhaseAwaiting || tc.rec.Phase.Wait.Kind != contracts.WaitScheduledAction {
			t.Fatalf("call of %s is %+v, want it parked on its schedule", tc.b.Submission.RunID, tc.rec.Phase)
		}
		tk := h.waitTicket(d.CorrelationID)
		if tk.DueAt == nil || !tk.DueAt.Equal(want) {
			t.Fatalf("ticket due %v, want %s", tk.DueAt, want)
		}
		if e := h.windowLedger("hourly", "", want); e.Used != 1 || e.Held[op(tc.b, 0)] != 1 {
			t.Fatalf("window %s holds %+v, want the deferred call", want, e)
		}
		if got := h.windowLedger("hourly", "", base).Deferred[op(tc.b, 0)]; got != want.Unix() {
			t.Fatalf("deferral pointer %d, want %d", got, want.Unix())
		}
	}
	// A redelivery of b's decision — by then its own window might have room: it goes to
	// the window it went to, once.
	h.gate(b, 0)
	h.quiet()
	if rec := h.mustCall(b, 0); !rec.Decision.Until.Equal(base.Add(time.Hour)) {
		t.Fatalf("redelivered decision %+v", rec.Decision)
	}
	for n := 0; n <= 2; n++ {
		w := base.Add(time.Duration(n) * time.Hour)
		if e := h.windowLedger("hourly", "", w); e.Used != 1 || len(e.Held) != 1 {
			t.Fatalf("window %s holds %+v, want one call", w, e)
		}
	}
	// The gate dies after a deferral's ledger writes and before the decision's: the
	// redelivered decision follows the pointer to the same window and counts once.
	subD := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
	subD.RunID = "run-d"
	d := h.store(subD)
	h.FailAt(FaultAfterLimitReserve, op(d, 0), 2, nil)
	h.gate(d, 0)
	rd := h.waitCall(d, 0, "decided after the crashes", func(r contracts.CallRecord) bool { return r.Decision != nil })
	if h.Injected() != 2 {
		t.Fatalf("fault fired %d times, want 2", h.Injected())
	}
	if want := base.Add(3 * time.Hour); rd.Decision.Until == nil || !rd.Decision.Until.Equal(want) {
		t.Fatalf("decision after the crashes %+v, want until %s", rd.Decision, want)
	}
	if e := h.windowLedger("hourly", "", base.Add(3*time.Hour)); e.Used != 1 || len(e.Held) != 1 {
		t.Fatalf("window +3h holds %+v, want run-d's call once", e)
	}
	if e, ok := h.windowEntry("hourly", "", base.Add(4*time.Hour)); ok && len(e.Held) > 0 {
		t.Fatalf("window +4h holds %+v: a redelivery counted the call again", e)
	}
	// Its own window gets room (run-a's share given back, as for a call that never ran):
	// deciding run-d's call again still finds the window it was deferred to, by the pointer,
	// and takes nothing in its own.
	lim := h.Svc.limits.WaitingRate(d.Submission.Calls[0])
	if err := h.Svc.limits.Release(h.Ctx, contracts.LimitLedgerKey("hourly", "", base), op(a, 0)); err != nil {
		t.Fatal(err)
	}
	until, blocked, err := h.Svc.limits.ReserveAhead(h.Ctx, lim, d, op(d, 0))
	if err != nil || blocked || !until.Equal(base.Add(3*time.Hour)) {
		t.Fatalf("decided again: until %s, blocked %v, %v; want the window it was deferred to", until, blocked, err)
	}
	if e := h.windowLedger("hourly", "", base); len(e.Held) != 0 {
		t.Fatalf("own window holds %+v, want nothing: the call was deferred", e)
	}
	// The due timer hands b's call over.
	h.fireTimer(h.uniq("due"), rb.Decision.CorrelationID, tickets.TimerDue)
	h.waitCall(b, 0, "handed over when due", func(r contracts.CallRecord) bool { return r.ExecutingUnentered() && r.Input != nil })
}

// ledger reads the limits ledger entry of limit for value (no window).
func (h *harness) ledger(limit, value string) contracts.LimitLedgerEntry {
	h.T.Helper()
	return h.windowLedger(limit, value, time.Time{})
}

// windowLedger reads the ledger entry of limit for value in the window starting at w.
func (h *harness) windowLedger(limit, value string, w time.Time) contracts.LimitLedgerEntry {
	h.T.Helper()
	e, ok := h.windowEntry(limit, value, w)
	if !ok {
		h.T.Fatalf("no ledger entry %s/%s at %s", limit, value, w)
	}
	return e
}

// ledgerEntry reads the ledger entry of limit for value (no window), if there is one.
func (h *harness) ledgerEntry(limit, value string) (contracts.LimitLedgerEntry, bool) {
	h.T.Helper()
	return h.windowEntry(limit, value, time.Time{})
}

// readLedger reads the ledger entry of limit for value in the window starting at w.
func (h *harness) readLedger(limit, value string, w time.Time) (contracts.LimitLedgerEntry, error) {
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.LimitsBucket())
	if err != nil {
		return contracts.LimitLedgerEntry{}, err
	}
	e, _, err := state.NewStore[contracts.LimitLedgerEntry](kv).Get(h.Ctx, contracts.LimitLedgerKey(limit, value, w))
	return e, err
}

// waitSharesGivenBack waits until the ledger entry of limit for value (no window) holds
// no share, used or held: what says whose shares are awaited.
func (h *harness) waitSharesGivenBack(limit, value, what string) {
	h.T.Helper()
	natstest.WaitFor(h.T, waitLong, func() bool {
		e, err := h.readLedger(limit, value, time.Time{})
		return err == nil && e.Used == 0 && len(e.Held) == 0
	}, what)
}

// windowEntry reads the ledger entry of limit for value in the window starting at w, if
// there is one.
func (h *harness) windowEntry(limit, value string, w time.Time) (contracts.LimitLedgerEntry, bool) {
	h.T.Helper()
	e, err := h.readLedger(limit, value, w)
	if errors.Is(err, state.ErrNotFound) {
		return e, false
	}
	if err != nil {
		h.T.Fatalf("ledger %s/%s at %s: %v", limit, value, w, err)
	}
	return e, true
}

// TestDeferredCallOverAnAskingBudgetIsBlocked: a call a waiting rate defers to a later
// window is not put to a human by a budget with over: ask (an approval would run it
// before its window): it is blocked with budget_exhausted, and its rate share in the later
// window is given back.
func TestDeferredCallOverAnAskingBudgetIsBlocked(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(map[string]float64{"echo": 1},
		contracts.LimitConfig{Name: "hourly", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal,
			Rate: &contracts.RateLimitConfig{N: 1, Window: "1h"}, Over: contracts.LimitOverWait},
		contracts.LimitConfig{Name: "spend", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal, Over: contracts.LimitOverAsk,
			Budget: &contracts.BudgetLimitConfig{Amount: 1}})
	base := h.inMidHour()
	wantRuns(t, h.decided("run-a", 1, "echo"))
	rec := h.decided("run-b", 1, "echo")
	if e, ok := h.windowEntry("hourly", "", base); !ok || len(e.Held) != 1 {
		t.Fatalf("window %s holds %+v, want run-a's call", base, e)
	}
	wantBlocked(t, rec, "spend", contracts.ReasonBudgetExhausted)
	if e, ok := h.windowEntry("hourly", "", base.Add(time.Hour)); ok && len(e.Held) != 0 {
		t.Fatalf("the later window holds %+v, want the blocked call's share given back", e)
	}
	if e := h.ledger("spend", ""); e.Used != 1 || len(e.Held) != 1 {
		t.Fatalf("budget %+v, want only the first call", e)
	}
}
