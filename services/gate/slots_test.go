package gate

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// finish ends call i of b as its executor would: entered, then completed with "ok".
func (h *harness) finish(b *contracts.BatchRecord, i int) { h.finishCosting(b, i, nil) }

// execRequestsOf counts the executor requests of the calls of bs.
func (h *harness) execRequestsOf(bs ...*contracts.BatchRecord) int {
	n := 0
	for _, b := range bs {
		n += len(servicetest.ExecRequests(h.T, h.Ctx, h.JS, h.Env.Names, b.Submission.RunID))
	}
	return n
}

// gateEchoRuns gates n one-call echo batches of runs run-0 … run-{n-1}, one after the
// other (each waits until its call entered execution), so a queue's order is the test's.
func (h *harness) gateEchoRuns(n int) []*contracts.BatchRecord {
	h.T.Helper()
	var bs []*contracts.BatchRecord
	for i := range n {
		sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
		sub.RunID = fmt.Sprintf("run-%d", i)
		b := h.store(sub)
		h.gate(b, 0)
		h.waitCall(b, 0, "entered execution", func(r contracts.CallRecord) bool { return r.Phase.Kind == contracts.PhaseExecuting })
		bs = append(bs, b)
	}
	return bs
}

func handedOver(r contracts.CallRecord) bool {
	return r.ExecutingUnentered() && r.Input != nil && r.SlotWait == ""
}

func waitsFor(limit string) func(contracts.CallRecord) bool {
	return func(r contracts.CallRecord) bool {
		return r.ExecutingUnentered() && r.Input == nil && r.SlotWait == limit
	}
}

func waitingOps(e contracts.LimitLedgerEntry) []string {
	var ops []string
	for _, w := range e.Waiting {
		ops = append(ops, w.Op)
	}
	return ops
}

// TestConcurrencyLimitQueuesAndHandsSlotsOn: a global concurrency of 2 on echo hands the
// first two calls to their executor and holds the next two back, in order, Executing
// without their input (no executor request). Each call that ends gives its slot to the
// first waiter, whose record is then handed over; a waiter cancelled while waiting leaves
// the queue; a tool the limit does not match never waits.
func TestConcurrencyLimitQueuesAndHandsSlotsOn(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "at-once", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal, Concurrency: intp(2)})

	bs := h.gateEchoRuns(5)
	for n, b := range bs {
		if n < 2 {
			h.waitCall(b, 0, "handed over", handedOver)
		} else {
			h.waitCall(b, 0, "waiting for a slot", waitsFor("at-once"))
		}
	}
	e := h.ledger("at-once", "")
	if e.Used != 2 || len(e.Held) != 2 || !slices.Equal(waitingOps(e), []string{op(bs[2], 0), op(bs[3], 0), op(bs[4], 0)}) {
		t.Fatalf("ledger %+v, want calls 0 and 1 holding, 2, 3, 4 waiting in order", e)
	}
	// Only the calls holding a slot reached an executor.
	natstest.WaitFor(t, waitLong, func() bool { return h.execRequestsOf(bs...) == 2 }, "two executor requests")

	// A tool the limit does not match is not held back.
	other := h.submission(1, call("c1", "counter", `{"name":"x"}`))
	other.RunID = "run-other"
	ob := h.store(other)
	h.gate(ob, 0)
	h.waitCall(ob, 0, "counter handed over", handedOver)

	// The waiter at the head of the queue is cancelled: it leaves the queue.
	h.cancelCall(h.uniq("cancel"), bs[2], 0, "not needed")
	h.waitCall(bs[2], 0, "cancelled", isPhase(contracts.PhaseCompleted))
	natstest.WaitFor(t, waitLong, func() bool {
		return slices.Equal(waitingOps(h.ledger("at-once", "")), []string{op(bs[3], 0), op(bs[4], 0)})
	}, "the cancelled waiter out of the queue")

	// Call 0 ends: its slot goes to call 3 (the first still waiting), which is handed over.
	h.finish(bs[0], 0)
	h.waitCall(bs[3], 0, "handed over after call 0 ended", handedOver)
	if r := h.mustCall(bs[4], 0); !waitsFor("at-once")(r) {
		t.Fatalf("call 4 %+v, want it still waiting", r)
	}
	h.finish(bs[1], 0)
	h.waitCall(bs[4], 0, "handed over after call 1 ended", handedOver)
	h.finish(bs[3], 0)
	h.finish(bs[4], 0)
	natstest.WaitFor(t, waitLong, func() bool {
		e := h.ledger("at-once", "")
		return e.Used == 0 && len(e.Held) == 0 && len(e.Waiting) == 0 && len(e.Handed) == 0
	}, "every slot given back, no waiter, no hand-off left")
	natstest.WaitFor(t, waitLong, func() bool { return h.execRequestsOf(bs...) == 4 }, "one executor request per call that ran")
}

// handOffAfterFailedReleases runs a gate (with delivery, on top of the harness's) under a
// global concurrency of 1 on echo, parks a second echo call behind a first, makes the
// release of the first call's slot fail failures times after it passed the slot on in the
// ledger and before it handed the waiter's call over, ends the first call and waits for
// the waiter to be handed over by the release that finally succeeds.
func handOffAfterFailedReleases(t *testing.T, failures int, delivery ...bus.DeliveryOption) (*harness, []*contracts.BatchRecord) {
	h := newHarness(t, servicetest.Stopped())
	h.Env.Config.Policy.Limits = []contracts.LimitConfig{{Name: "one", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal, Concurrency: intp(1)}}
	h.StartReplica(delivery...)
	bs := h.gateEchoRuns(2)
	h.waitCall(bs[1], 0, "waiting", waitsFor("one"))
	h.FailAt(FaultAfterSlotHandOff, op(bs[0], 0), failures, nil)
	h.finish(bs[0], 0)
	h.waitCall(bs[1], 0, fmt.Sprintf("handed over by the release after %d failed", failures), handedOver)
	if h.Injected() != failures {
		t.Fatalf("fault fired %d times, want %d", h.Injected(), failures)
	}
	return h, bs
}

// TestConcurrencyHandOffSurvivesACrash: the gate dies after a release passed the slot to
// the waiter in the ledger and before it handed the waiter's call over; the redelivered
// release finds the hand-off recorded and hands the call over.
func TestConcurrencyHandOffSurvivesACrash(t *testing.T) {
	h, bs := handOffAfterFailedReleases(t, 1)
	if e := h.ledger("one", ""); len(e.Held) != 1 || e.Held[op(bs[1], 0)] != 1 || e.Handed[op(bs[0], 0)].Op != op(bs[1], 0) {
		t.Fatalf("ledger %+v, want call 1 holding the slot call 0 handed it", e)
	}
}

// TestConcurrencyReleaseOutlastsTheDeliveryLimit: a slot's release is retried for ever,
// whatever the gate's delivery limit. The gate exhausts its messages after 2 deliveries;
// the release of the first call's slot fails on 4, and its waiter is still handed over
// when the fifth succeeds — a release given up would strand the waiter for good.
func TestConcurrencyReleaseOutlastsTheDeliveryLimit(t *testing.T) {
	handOffAfterFailedReleases(t, 4, bus.WithDelivery(2, 5*time.Millisecond))
}

// TestConcurrencyLimitAfterApproval: a slot is taken when an approved call is handed over,
// not while a human decides. Two ask_me calls under a concurrency of 1 both park; the
// first approval hands its call over; the second approval resolves its ticket (audited,
// ticket gone) and its call waits for the slot, which the first call's end hands it.
func TestConcurrencyLimitAfterApproval(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "one-ask", Tools: []string{"ask_me"}, Key: contracts.LimitKeyGlobal, Concurrency: intp(1)})
	var bs []*contracts.BatchRecord
	var tickets []contracts.ResumeTicket
	for n := range 2 {
		sub := h.submission(1, call("c1", "ask_me", `{}`))
		sub.RunID = fmt.Sprintf("run-%d", n)
		b := h.store(sub)
		h.gate(b, 0)
		rec := h.waitCall(b, 0, "parked", isPhase(contracts.PhaseAwaiting))
		tickets = append(tickets, h.waitTicket(rec.Phase.Wait.CorrelationID))
		bs = append(bs, b)
	}
	if e, ok := h.ledgerEntry("one-ask", ""); ok && (len(e.Held) != 0 || len(e.Waiting) != 0) {
		t.Fatalf("ledger %+v while both calls wait for a human, want no slot taken", e)
	}
	h.resume(h.uniq("approve-0"), allow(tickets[0]))
	h.waitCall(bs[0], 0, "first approved call handed over", handedOver)
	h.resume(h.uniq("approve-1"), allow(tickets[1]))
	h.waitCall(bs[1], 0, "second approved call waiting for the slot", waitsFor("one-ask"))
	if _, ok := h.ticket(tickets[1].CorrelationID); ok {
		t.Fatal("the second ticket is still open: its approval should have resolved it before the wait")
	}
	h.finish(bs[0], 0)
	h.waitCall(bs[1], 0, "second call handed over", handedOver)
}

// finishCosting ends call i of b as its executor would, reporting cost (nil: none), and
// returns the revision of its terminal record.
func (h *harness) finishCosting(b *contracts.BatchRecord, i int, cost *float64) uint64 {
	h.T.Helper()
	_, rev, err := h.Env.Calls.Update(h.Ctx, callKey(b, i), func(cur *contracts.CallRecord, exists bool) error {
		if !exists || cur.Input == nil {
			return fmt.Errorf("call %d of %s is not handed over", i, b.Submission.BatchID())
		}
		if !cur.Entered {
			if err := cur.Enter(1, h.Env.Now()); err != nil {
				return err
			}
		}
		if err := cur.Complete(contracts.TextOutput(cur.CallID, "ok"), h.Env.Now()); err != nil {
			return err
		}
		return cur.ChargeCost(cost)
	})
	if err != nil {
		h.T.Fatal(err)
	}
	return rev
}

// TestBudgetSettlesToTheReportedCost: echo reserves its configured cost of 2 against a
// budget of 10 per run; a call whose tool reports what it cost has its share set to that
// once it ends (7, then 0.5), one that reports nothing keeps the reservation, and the next
// decision sees what was spent: the fourth call (7 + 0.5 + 2 + 2 > 10) is blocked.
func TestBudgetSettlesToTheReportedCost(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(map[string]float64{"echo": 2},
		contracts.LimitConfig{Name: "spend", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Budget: &contracts.BudgetLimitConfig{Amount: 10}})
	costs := []*float64{ptr(7.0), ptr(0.5), nil}
	wantUsed := []float64{7, 7.5, 9.5}
	for n, cost := range costs {
		b := h.store(h.submission(int64(n+1), call("c1", "echo", `{"text":"hi"}`)))
		h.gate(b, 0)
		h.waitCall(b, 0, "handed over", handedOver)
		h.finishCosting(b, 0, cost)
		natstest.WaitFor(t, waitLong, func() bool { return h.ledger("spend", testRunID).Used == wantUsed[n] },
			fmt.Sprintf("budget used %v after call %d", wantUsed[n], n))
	}
	wantBlocked(t, h.decided(testRunID, 4, "echo"), "spend", contracts.ReasonBudgetExhausted)
}

func ptr[T any](v T) *T { return &v }
