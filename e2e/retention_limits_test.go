package e2e_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ledgerRetentionHarness is the stack with the run retention shortened to r and four host
// limits on echo: a count of 2 and a rate per run, a count and a rate per step (the rates
// have a window, so their keys carry the window's start).
func ledgerRetentionHarness(t *testing.T, r time.Duration) *harness {
	cfg := exampleConfig(t)
	cfg.Retention = config.Retention{Runs: r.String()}
	two, five := 2, 5
	cfg.Policy.Limits = []contracts.LimitConfig{
		{Name: "echo-per-run", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Count: &two},
		{Name: "echo-run-rate", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Rate: &contracts.RateLimitConfig{N: 100, Window: "1h"}},
		{Name: "echo-per-step", Tools: []string{"echo"}, Key: contracts.LimitKeyStep, Count: &five},
		{Name: "echo-step-rate", Tools: []string{"echo"}, Key: contracts.LimitKeyStep, Rate: &contracts.RateLimitConfig{N: 100, Window: "1h"}},
	}
	return newHarness(t, withConfig(cfg))
}

// limitTraces counts what the limits ledger holds of the limits keyed by key for the key
// value of (run, step): every stored message on those keys, windows included (values and
// delete markers alike).
func (h *harness) limitTraces(key, run string, step int64) uint64 {
	h.tb.Helper()
	_, js := h.srv.Conn(h.tb)
	ctx := ctxFor(h.tb, 10*time.Second)
	bucket := h.cfg.Names().LimitsBucket()
	st, err := js.Stream(ctx, contracts.RecordStream(bucket))
	if err != nil {
		h.tb.Fatal(err)
	}
	sub := &contracts.BatchSubmission{RunID: run, Step: step}
	host, err := contracts.CompilePolicy(h.cfg.Policy)
	if err != nil {
		h.tb.Fatal(err)
	}
	var n uint64
	for _, lim := range host.Limits() {
		if lim.Key != key {
			continue
		}
		base := contracts.RecordSubject(bucket, contracts.LimitLedgerKey(lim.Name, lim.KeyValue(sub), time.Time{}))
		for _, filter := range []string{base, base + ".*"} {
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
			if err != nil {
				h.tb.Fatal(err)
			}
			for _, c := range info.State.Subjects {
				n += c
			}
		}
	}
	return n
}

// runRecordExists reads run's record from the server (whether or not the services run).
func (h *harness) runRecordExists(run string) bool {
	h.tb.Helper()
	_, js := h.srv.Conn(h.tb)
	ctx := ctxFor(h.tb, 10*time.Second)
	kv, err := js.KeyValue(ctx, h.cfg.Names().RunsBucket())
	if err != nil {
		h.tb.Fatal(err)
	}
	_, err = kv.Get(ctx, contracts.RunKey(run))
	switch {
	case err == nil:
		return true
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false
	}
	h.tb.Fatal(err)
	return false
}

// TestRetention_limitKeysGoWithTheirRunAndBatch: the limits ledger is bounded by the run
// retention R (docs/operations.md, "Data lifecycle"). A key of a limit keyed by step goes
// with its batch's records, R after the batch was published; a key of a limit keyed by
// run goes with the run record, 2R after the run's last batch finished, and never before:
// a run idle for longer than R still has its count, so its next batch is counted against
// the same limit (a count of 2 blocks the third call).
func TestRetention_limitKeysGoWithTheirRunAndBatch(t *testing.T) {
	h := ledgerRetentionHarness(t, 5*time.Second)
	const run = "ret-limits"
	h.mustRun(batch(run, 1, []string{"echo"}, call("a", "echo", map[string]any{"text": "one"})))
	if r, s := h.limitTraces(contracts.LimitKeyRun, run, 0), h.limitTraces(contracts.LimitKeyStep, run, 1); r == 0 || s == 0 {
		t.Fatalf("ledger of the run right after its batch: %d run-keyed and %d step-keyed messages, want both", r, s)
	}
	n := h.cfg.Names()

	// One retention later the batch's records are swept, and its step keys with them.
	natstest.WaitFor(t, 60*time.Second, func() bool {
		return h.runTraces(run)[n.CallsBucket()] == 0 && h.limitTraces(contracts.LimitKeyStep, run, 1) == 0
	}, "the call records and the step-keyed ledger keys of batch 1 gone")
	if r := h.limitTraces(contracts.LimitKeyRun, run, 0); r == 0 {
		t.Fatal("the run-keyed ledger keys went with the batch, want them kept with the run record")
	}
	if !h.runRecordExists(run) {
		t.Fatal("run record gone before the idle run's next batch: the machine was too slow for the retention")
	}

	// The idle run's next batch still counts against its limit: one more call fits.
	res := h.mustRun(batch(run, 2, []string{"echo"}, call("b", "echo", map[string]any{"text": "two"}),
		call("c", "echo", map[string]any{"text": "three"})))
	if got := strings.Join(texts(res), "|"); !strings.HasPrefix(got, "two|blocked: "+contracts.ReasonCountExceeded+": limit echo-per-run") {
		t.Fatalf("results of the idle run's next batch %q, want two then a count_exceeded block", got)
	}

	// The keys go with the run record and never before it: read the keys, then the record.
	natstest.WaitFor(t, 60*time.Second, func() bool {
		gone := h.limitTraces(contracts.LimitKeyRun, run, 0) == 0
		if gone && h.runRecordExists(run) {
			t.Fatal("the run-keyed ledger keys are gone while the run record exists")
		}
		return gone && h.limitTraces(contracts.LimitKeyStep, run, 2) == 0
	}, "the run-keyed ledger keys gone with the run record, and batch 2's step keys")
	h.waitGone(run)
}

// TestRetention_limitKeysOfARunThatExpiredWhileTheGateWasDown: the expiry marker of a run
// record is kept half the retention, so a gate that is down when a run record expires
// still removes the run's ledger keys when it comes back within that time. (A marker
// removed before the gate comes back is never delivered, and the keys stay for ever: the
// gate here stays down for 1.5 s past the expiry.)
func TestRetention_limitKeysOfARunThatExpiredWhileTheGateWasDown(t *testing.T) {
	const retention = 10 * time.Second // the marker is kept 5 s
	h := ledgerRetentionHarness(t, retention)
	const run = "ret-limits-down"
	h.mustRun(batch(run, 1, []string{"echo"}, call("a", "echo", map[string]any{"text": "one"})))
	h.stack.StopCleanly()
	var expiredAt time.Time
	natstest.WaitFor(t, 6*retention, func() bool {
		if expiredAt.IsZero() && !h.runRecordExists(run) {
			expiredAt = time.Now()
		}
		// Down past the expiry for longer than the server kept the marker before.
		return !expiredAt.IsZero() && time.Since(expiredAt) > 1500*time.Millisecond
	}, fmt.Sprintf("run record of %s expired for 1.5 s while the services are down", run))
	if r := h.limitTraces(contracts.LimitKeyRun, run, 0); r == 0 {
		t.Fatal("run-keyed ledger keys gone while the gate was down")
	}
	h.start()
	natstest.WaitFor(t, 30*time.Second, func() bool { return h.limitTraces(contracts.LimitKeyRun, run, 0) == 0 },
		"the run-keyed ledger keys of the run that expired while the gate was down removed")
}
