package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestUpgrade_finishesABatchLeftOpenBeforeTheRunRecordHeldIt stores open batches as the
// versions before the run record held the open batch left them — the run record claiming
// the step without holding the batch, the open batch record in the batches bucket, call
// records under keys without the executor target, written without a format stamp, the
// work messages gone with the work stream — then runs this version's setup and services
// and waits for each batch's results. A sequential batch has at most one call in flight:
// calls before it completed, calls after it without a record. So each batch leaves one
// call in one state: completed by the earlier version (its output kept, its body not run
// again, the next call run), handed to its executor but not entered (run once), entered
// and unfinished under a replay-safe policy (run again) and under never_replay
// (Indeterminate). Each run then takes its next step.
func TestUpgrade_finishesABatchLeftOpenBeforeTheRunRecordHeldIt(t *testing.T) {
	h := newHarness(t)
	ctx := ctxFor(t, 3*time.Minute)
	tools := []string{"echo", "counter"}
	echo := func(id, text string) contracts.ToolCall { return call(id, "echo", map[string]any{"text": text}) }
	counter := func(id string) contracts.ToolCall {
		return call(id, "counter", map[string]any{"name": "migrated-" + id})
	}
	// The pins of this version's batcher for the two tools (the earlier versions pinned
	// them alike): a batch of another run, run to its end, read from its run record or
	// the archive (the publisher archives it after the results).
	h.mustRun(batch("template", 1, tools, echo("c0", "t"), counter("c1")))
	tmpl, err := h.stack.Env.FreshBatch(ctx, "template", 1)
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]contracts.PinnedCall{"echo": tmpl.Pinned[0], "counter": tmpl.Pinned[1]}
	h.stack.StopCleanly()

	_, js := h.srv.Conn(t)
	names := h.cfg.Names()
	put := func(bucket, key string, v any) {
		t.Helper()
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v) // as the earlier versions wrote: no format field
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC()
	// open stores run's open batch of calls, whose call i has gone through state(rec)
	// (the calls before it completed, those after it without a record).
	open := func(run string, calls []contracts.ToolCall, inFlight int, state func(*contracts.CallRecord)) {
		t.Helper()
		sub := batch(run, 1, tools, calls...)
		old := contracts.BatchRecord{Submission: sub, Hash: sub.Hash(), Phase: contracts.BatchPhaseOpen, CreatedAt: now}
		for _, c := range calls {
			old.Pinned = append(old.Pinned, pins[c.ToolID])
		}
		put(names.RunsBucket(), contracts.RunKey(run), map[string]any{"run_id": run, "active_step": 1})
		put(names.BatchesBucket(), contracts.BatchKey(run, 1), old)
		for i, c := range calls[:inFlight+1] {
			rec := contracts.NewCallRecord(i, c, old.Pinned[i].Policy)
			must(t, rec.Decide(&contracts.GateOutcome{Kind: contracts.GateAllow}, "", now))
			must(t, rec.Dispatch(now))
			if i < inFlight {
				must(t, rec.Enter(uint64(100+i), now))
				must(t, rec.Complete(contracts.TextOutput(c.CallID, "completed by the earlier version"), now))
			} else {
				state(&rec)
			}
			put(names.CallsBucket(), contracts.OperationKey(run, 1, c.CallID), rec)
		}
	}
	completed := func(rec *contracts.CallRecord) {
		must(t, rec.Enter(200, now))
		must(t, rec.Complete(contracts.TextOutput(rec.CallID, "completed by the earlier version"), now))
	}
	handedOver := func(*contracts.CallRecord) {}
	entered := func(rec *contracts.CallRecord) { must(t, rec.Enter(300, now)) }
	indeterminate := contracts.IndeterminatePrefix + pipeline.ReasonInterruptedByUpgrade
	cases := []struct {
		run      string
		calls    []contracts.ToolCall
		inFlight int
		state    func(*contracts.CallRecord)
		want     []string
		ran      []int // body runs under this version, by call
	}{
		{"old-completed", []contracts.ToolCall{echo("c0", "zero"), echo("c1", "one")}, 0, completed,
			[]string{"completed by the earlier version", "one"}, []int{0, 1}},
		{"old-handed-over", []contracts.ToolCall{echo("c0", "zero"), echo("c1", "one"), echo("c2", "two")}, 1, handedOver,
			[]string{"completed by the earlier version", "one", "two"}, []int{0, 1, 1}},
		{"old-entered-replayable", []contracts.ToolCall{echo("c0", "zero"), echo("c1", "one")}, 0, entered,
			[]string{"zero", "one"}, []int{1, 1}},
		{"old-entered-never-replay", []contracts.ToolCall{echo("c0", "zero"), counter("c1"), echo("c2", "two")}, 1, entered,
			[]string{"completed by the earlier version", indeterminate, "two"}, []int{0, 0, 1}},
	}
	for _, c := range cases {
		open(c.run, c.calls, c.inFlight, c.state)
	}

	if err := servicerun.Setup(ctx, js, h.cfg, stacktest.Logger(t)); err != nil {
		t.Fatalf("setup: %v", err)
	}
	h.stack.StartAgain(ctx)

	for _, c := range cases {
		res, err := h.client.Await(ctxFor(t, 60*time.Second), c.run, 1)
		if err != nil {
			t.Errorf("%s: the batch left open by the earlier version is not finished: %v", c.run, err)
			continue
		}
		got := make([]string, len(res.Results))
		for i, r := range res.Results {
			got[i] = r.Output.Text()
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: results %q, want %q", c.run, got, c.want)
		}
		for i, call := range c.calls {
			if n := h.ledger(c.run, 1, call.CallID); n != c.ran[i] {
				t.Errorf("%s: body of %s ran %d times under this version, want %d", c.run, call.CallID, n, c.ran[i])
			}
			if _, _, err := h.stack.Env.Calls.Get(ctx, contracts.OperationKey(c.run, 1, call.CallID)); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("%s: call record %s under the earlier versions' key: %v, want it gone", c.run, call.CallID, err)
			}
		}
		if err := waitFor(ctx, func() (bool, string) {
			a, _, err := h.stack.Env.Batches.Get(ctx, contracts.BatchKey(c.run, 1))
			return err == nil && a.Phase == contracts.BatchPhasePublished, "archive: " + string(a.Phase) + " " + errString(err)
		}); err != nil {
			t.Errorf("%s: %v", c.run, err)
		}
		h.mustRun(batch(c.run, 2, tools, echo("c0", "next")))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// waitFor polls cond every 50 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() (bool, string)) error {
	last := ""
	for {
		ok, what := cond()
		if ok {
			return nil
		}
		last = what
		select {
		case <-ctx.Done():
			return errors.New("condition not met: " + last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
