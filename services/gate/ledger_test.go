package gate

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// finishSettled ends call i of b as its executor would, reporting cost (nil: none), and
// waits until the gate's gate-limits consumer has handled its terminal record.
func (h *harness) finishSettled(b *contracts.BatchRecord, i int, cost *float64) {
	h.T.Helper()
	rev := h.finishCosting(b, i, cost)
	h.WaitSettled(h.Env.Names.CallRecordsStream(), contracts.ConsumerGateLimits, rev)
}

// ledgerBytes is the size of the stored ledger value of limit for value in window w (zero:
// no window).
func (h *harness) ledgerBytes(limit, value string, w time.Time) int {
	h.T.Helper()
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.LimitsBucket())
	if err != nil {
		h.T.Fatal(err)
	}
	e, err := kv.Get(h.Ctx, contracts.LimitLedgerKey(limit, value, w))
	if err != nil {
		h.T.Fatalf("ledger %s/%s at %s: %v", limit, value, w, err)
	}
	return len(e.Value())
}

// ledgerKeyGone reports whether the ledger has no key for limit, value and window w.
func (h *harness) ledgerKeyGone(limit, value string, w time.Time) bool {
	h.T.Helper()
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.LimitsBucket())
	if err != nil {
		h.T.Fatal(err)
	}
	_, err = kv.Get(h.Ctx, contracts.LimitLedgerKey(limit, value, w))
	return errors.Is(err, jetstream.ErrKeyNotFound)
}

// TestBudgetLedgerHoldsOnlyTheCallsInFlight: thirty echo calls with long ids, one after the
// other, each run and ended, against one global budget. Every ended call's share folds into
// used, so the ledger value holds no more operations than the calls still in flight (the
// last one, which no later write has folded yet) and stays the same size from the second
// call to the thirtieth: what each decision reads and rewrites does not grow with history.
func TestBudgetLedgerHoldsOnlyTheCallsInFlight(t *testing.T) {
	const calls = 30
	long := strings.Repeat("0123456789abcdef", 4)
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(map[string]float64{"echo": 1},
		contracts.LimitConfig{Name: "spend", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal, Budget: &contracts.BudgetLimitConfig{Amount: 1e6}})
	sizes := make([]int, calls)
	for n := range calls {
		sub := h.submission(1, call(fmt.Sprintf("call_%s_%03d", long, n), "echo", `{"text":"hi"}`))
		sub.RunID = fmt.Sprintf("run-%s-%03d", long[:36], n)
		b := h.store(sub)
		h.gate(b, 0)
		h.waitCall(b, 0, "handed over", handedOver)
		h.finishSettled(b, 0, nil)
		sizes[n] = h.ledgerBytes("spend", "", time.Time{})
	}
	e := h.ledger("spend", "")
	t.Logf("after %d ended calls: used %v, %d operations held, value %d bytes (after the second call: %d)",
		calls, e.Used, len(e.Held), sizes[calls-1], sizes[1])
	if e.Used != calls {
		t.Fatalf("used %v, want %d: every call that ran stays spent", e.Used, calls)
	}
	if len(e.Held) > 1 {
		t.Errorf("%d operations held after %d calls that all ended, want at most 1 (the last, not folded by a later write yet)", len(e.Held), calls)
	}
	if sizes[calls-1] > sizes[1]+8 {
		t.Errorf("ledger value %d bytes after call %d, %d after call 2: it grows with every call", sizes[calls-1], calls, sizes[1])
	}
}

// TestSettledShareFoldsOnceWhenTheRecordIsRedelivered: a call whose tool reported a cost of
// 7 (reserved at 2) ends; the gate settles and folds its share, then crashes before it
// acknowledges the terminal record. The redelivered record finds the operation no longer
// held and changes nothing: 7 is spent once, and the entry holds no operation.
func TestSettledShareFoldsOnceWhenTheRecordIsRedelivered(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(map[string]float64{"echo": 2},
		contracts.LimitConfig{Name: "spend", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Budget: &contracts.BudgetLimitConfig{Amount: 100}})
	b := h.store(h.submission(1, call("c1", "echo", `{"text":"hi"}`)))
	h.gate(b, 0)
	h.waitCall(b, 0, "handed over", handedOver)
	h.FailAt(FaultAfterLimitSettle, op(b, 0), 1, nil)
	h.finishSettled(b, 0, ptr(7.0))
	if n := h.Injected(); n != 1 {
		t.Fatalf("%d faults fired, want 1 (the crash after the settlement)", n)
	}
	if n := h.HitCount(FaultAfterLimitSettle, op(b, 0)); n != 1 {
		t.Fatalf("the settlement was written %d times, want once", n)
	}
	if e := h.ledger("spend", testRunID); e.Used != 7 || len(e.Held) != 0 {
		t.Fatalf("ledger %+v, want 7 spent once and nothing held", e)
	}
}

// TestPassedWindowKeyIsDeleted: a rate of 5 an hour counts a call in the window of its
// batch; two hours later (the harness clock moved on) the next call opens its own window,
// and the passed window's key is deleted, not kept for ever.
func TestPassedWindowKeyIsDeleted(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "hourly", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal,
		Rate: &contracts.RateLimitConfig{N: 5, Window: "1h"}})
	gated := func(run string) time.Time {
		sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
		sub.RunID = run
		b := h.storeAt(sub, h.Env.Now())
		h.gate(b, 0)
		h.waitCall(b, 0, "handed over", handedOver)
		h.finishSettled(b, 0, nil)
		return b.CreatedAt.Truncate(time.Hour).UTC()
	}
	first := gated("run-a")
	if e := h.windowLedger("hourly", "", first); e.Used != 1 {
		t.Fatalf("first window %+v, want the call counted", e)
	}
	h.Advance(2 * time.Hour)
	later := gated("run-b")
	if e := h.windowLedger("hourly", "", later); e.Used != 1 {
		t.Fatalf("later window %+v, want its own call counted", e)
	}
	natstest.WaitFor(t, waitLong, func() bool { return h.ledgerKeyGone("hourly", "", first) },
		fmt.Sprintf("the key of the window at %s, passed, deleted", first.Format(time.RFC3339)))
}

// TestRunLedgerKeysGoWithTheRun: a count and a rate keyed by run hold keys of the run's
// value; when the run is cancelled (it takes no more batches) the gate deletes them, and
// another run's keys stay.
func TestRunLedgerKeysGoWithTheRun(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil,
		contracts.LimitConfig{Name: "per-run", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Count: intp(10)},
		contracts.LimitConfig{Name: "run-rate", Tools: []string{"echo"}, Key: contracts.LimitKeyRun,
			Rate: &contracts.RateLimitConfig{N: 10, Window: "1h"}})
	windows := map[string]time.Time{}
	for _, run := range []string{"run-ends", "run-stays"} {
		sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
		sub.RunID = run
		b := h.store(sub)
		h.gate(b, 0)
		h.waitCall(b, 0, "handed over", handedOver)
		h.finishSettled(b, 0, nil)
		windows[run] = b.CreatedAt.Truncate(time.Hour).UTC()
		if h.ledgerKeyGone("per-run", run, time.Time{}) || h.ledgerKeyGone("run-rate", run, windows[run]) {
			t.Fatalf("run %s: its ledger keys were not written", run)
		}
	}
	h.cancelRun(h.uniq("cancel"), "run-ends")
	natstest.WaitFor(t, waitLong, func() bool {
		return h.ledgerKeyGone("per-run", "run-ends", time.Time{}) && h.ledgerKeyGone("run-rate", "run-ends", windows["run-ends"])
	}, "the cancelled run's ledger keys deleted")
	if h.ledgerKeyGone("per-run", "run-stays", time.Time{}) || h.ledgerKeyGone("run-rate", "run-stays", windows["run-stays"]) {
		t.Fatal("the other run's ledger keys were deleted too")
	}
}

// TestWaitingRateWindowOutlivesItsDeferrals: the window of a rate with over: wait points at
// the later windows it deferred calls to (up to 16 ahead), so its key is kept while any of
// them may still run: two hours on, when a new window opens, it is still there; once the
// last window it could defer to has passed, a new window's opening deletes it (and keeps
// the younger window).
func TestWaitingRateWindowOutlivesItsDeferrals(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "hourly", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal,
		Rate: &contracts.RateLimitConfig{N: 5, Window: "1h"}, Over: contracts.LimitOverWait})
	gated := func(run string) time.Time {
		sub := h.submission(1, call("c1", "echo", `{"text":"hi"}`))
		sub.RunID = run
		b := h.storeAt(sub, h.Env.Now())
		h.gate(b, 0)
		h.waitCall(b, 0, "handed over", handedOver)
		h.finishSettled(b, 0, nil)
		return b.CreatedAt.Truncate(time.Hour).UTC()
	}
	first := gated("run-a")
	h.Advance(2 * time.Hour)
	second := gated("run-b")
	if h.ledgerKeyGone("hourly", "", first) {
		t.Fatalf("the window at %s was deleted two hours on, while calls it deferred may still run", first.Format(time.RFC3339))
	}
	// 18 hours after the first window: the 16 windows after it have passed, not those after
	// the second.
	h.Advance(time.Duration(contracts.MaxRateWaitWindows) * time.Hour)
	gated("run-c")
	natstest.WaitFor(t, waitLong, func() bool { return h.ledgerKeyGone("hourly", "", first) },
		"the first window, whose deferrals have all passed, deleted")
	if h.ledgerKeyGone("hourly", "", second) {
		t.Fatalf("the window at %s was deleted while a window it may defer to is still ahead", second.Format(time.RFC3339))
	}
}

// TestFirstDeliveryOfADecidedCallCountsNothing: a count of 10 per run counts two echo
// calls that ran and ended; the second's decision folded the first's share into used. A
// revision that asks for the first call again, delivered for the first time (as a
// consumer recreated from the stream's start would), finds the call decided — the gate
// reads the record before it reserves whenever a limit matches the call — and counts
// nothing: used stays 2. Without that read its reservation found no share held (folded)
// and counted the call a second time.
func TestFirstDeliveryOfADecidedCallCountsNothing(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.withLimits(nil, contracts.LimitConfig{Name: "per-run", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Count: intp(10)})
	var bs []*contracts.BatchRecord
	for step := int64(1); step <= 2; step++ {
		b := h.store(h.submission(step, call("c1", "echo", `{"text":"hi"}`)))
		h.gate(b, 0)
		h.waitCall(b, 0, "handed over", handedOver)
		h.finishSettled(b, 0, nil)
		bs = append(bs, b)
	}
	if e := h.ledger("per-run", testRunID); e.Used != 2 {
		t.Fatalf("ledger %+v, want the two calls counted", e)
	}
	h.WaitSettled(h.Env.Names.RunRecordsStream(), contracts.ConsumerGateBatches, h.recordAgain(bs[0]))
	if e := h.ledger("per-run", testRunID); e.Used != 2 {
		t.Fatalf("ledger %+v after the first call was asked for again, want it counted once (used 2)", e)
	}
}
