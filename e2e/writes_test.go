package e2e_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestWritesPerCall pins the durable writes (messages stored, per stream, read from the
// server's own counters) of sequential batches (a run's first, and its next), of a
// 10-call parallel-delegation batch and of a 10-call batch whose calls declare parallel:
// the hop list of docs/architecture.md ("Writes per call"). A write added to or removed
// from the path fails it; update the table, the document and the benchmark's floor
// (bench/cmd/awaken-bench/floor.go) together.
func TestWritesPerCall(t *testing.T) {
	// The body-run ledger (a test instrument, off by default) would add a counter write
	// per call.
	cfg := exampleConfig(t)
	cfg.Executors.BodyLedger = false
	h := newHarness(t, withConfig(cfg))
	// Warm up: the first batch creates nothing extra, but let every consumer be bound.
	h.mustRun(batch("writes-warm", 1, []string{"echo"}, call("c0", "echo", map[string]any{"text": "x"})))
	h.waitQuiet("writes-warm", 1)

	for _, tc := range []struct {
		name  string
		sub   contracts.BatchSubmission
		total uint64
		want  map[string]uint64
	}{
		{
			name: "sequential 1-call echo",
			sub:  batch("writes-seq", 1, []string{"echo"}, call("c0", "echo", map[string]any{"text": "x"})),
			// submission; runs: claim with the batch record (that revision is the gate's
			// work), finalize with the release; calls: gate create (decision and
			// Executing{1}: that revision is the executor request), executor Completed
			// (echo is replay_safe: no Entered write; that revision is the output
			// announcement); batches: the archive (published, after the results);
			// audit; results: the one results message. The tool_call and tool_result
			// facts are live (core NATS): nothing stored.
			total: 8,
			want: map[string]uint64{"AWAKEN_SUBMISSIONS": 1, "KV_AWAKEN_calls": 2,
				"KV_AWAKEN_batches": 1, "KV_AWAKEN_runs": 2, "AWAKEN_AUDIT": 1, "AWAKEN_RESULTS": 1},
		},
		{
			name: "the run's next 1-call echo batch",
			sub:  batch("writes-seq", 2, []string{"echo"}, call("c0", "echo", map[string]any{"text": "x"})),
			// as the run's first: the claim replaces step 1, finalized, in the run record
			// and finds it archived (its publisher archived it before this batch was
			// submitted), so its archive create is refused without a store; this batch's
			// archive is its own publisher's. The archive is one write per batch wherever
			// it is written: leaving a batch in the run record until the next claim
			// archives it moves the write onto that claim, it does not remove it.
			total: 8,
			want: map[string]uint64{"AWAKEN_SUBMISSIONS": 1, "KV_AWAKEN_calls": 2,
				"KV_AWAKEN_batches": 1, "KV_AWAKEN_runs": 2, "AWAKEN_AUDIT": 1, "AWAKEN_RESULTS": 1},
		},
		{
			name: "sequential 10-call echo",
			sub:  batch("writes-seq10", 1, []string{"echo"}, calls("echo", 10)...),
			// per call as above (call i's terminal revision is the gate's work for
			// call i+1); per batch: submission, the two run-record writes (claim with
			// the record, finalize with the release), the archive, the one results
			// message.
			total: 10*3 + 5,
			want: map[string]uint64{"AWAKEN_SUBMISSIONS": 1, "KV_AWAKEN_calls": 20,
				"KV_AWAKEN_batches": 1, "KV_AWAKEN_runs": 2, "AWAKEN_AUDIT": 10, "AWAKEN_RESULTS": 1},
		},
		{
			name: "parallel 10-call delegate",
			sub:  batch("writes-par", 1, []string{"delegate"}, calls("delegate", 10)...),
			// per call: call create (decision and Executing in one write: the executor
			// request), entered (delegate is durable_request), Completed (the output);
			// audit. Per batch: submission, the two run-record writes (the claim is the
			// probe's work), the archive, the one results message.
			total: 10*4 + 5,
			want: map[string]uint64{"AWAKEN_SUBMISSIONS": 1, "KV_AWAKEN_calls": 30,
				"KV_AWAKEN_batches": 1, "KV_AWAKEN_runs": 2, "AWAKEN_AUDIT": 10, "AWAKEN_RESULTS": 1},
		},
		{
			name: "declared parallel 10-call lookup",
			sub:  batch("writes-declared", 1, []string{"lookup"}, lookups(10)...),
			// per call: the decision (Requested with it, recorded before any call is
			// handed over), the entry (Executing with the input: the executor request),
			// entered (lookup is pinned never_replay), Completed (the output); audit.
			// Per batch as above.
			total: 10*5 + 5,
			want: map[string]uint64{"AWAKEN_SUBMISSIONS": 1, "KV_AWAKEN_calls": 40,
				"KV_AWAKEN_batches": 1, "KV_AWAKEN_runs": 2, "AWAKEN_AUDIT": 10, "AWAKEN_RESULTS": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, total := h.storedBy(tc.sub)
			t.Logf("%s: %d stored messages (%.1f per call): %s", tc.name, total,
				float64(total)/float64(len(tc.sub.Calls)), formatCounts(got))
			if total != tc.total || !maps.Equal(got, tc.want) {
				t.Errorf("stored messages: got %d %s, want %d %s", total, formatCounts(got), tc.total, formatCounts(tc.want))
			}
		})
	}
}

// storedBy runs sub to its end (every consumer settled) and returns the messages it
// stored per stream, and their total.
func (h *harness) storedBy(sub contracts.BatchSubmission) (map[string]uint64, uint64) {
	h.tb.Helper()
	before := storedPerStream(h.tb, h.srv.Server())
	h.mustRun(sub)
	h.waitQuiet(sub.RunID, sub.Step)
	after := storedPerStream(h.tb, h.srv.Server())
	got, total := map[string]uint64{}, uint64(0)
	for name, v := range after {
		if d := v - before[name]; d > 0 {
			got[name] = d
			total += d
		}
	}
	return got, total
}

// calls returns n calls of tool (echo or delegate) with valid arguments.
func calls(tool string, n int) []contracts.ToolCall {
	var cs []contracts.ToolCall
	for i := range n {
		cs = append(cs, call(fmt.Sprintf("c%d", i), tool, map[string]any{"text": "x", "task": "x", "ms": 1}))
	}
	return cs
}

// lookups returns n calls of lookup, the example tool that declares parallel.
func lookups(n int) []contracts.ToolCall {
	var cs []contracts.ToolCall
	for i := range n {
		cs = append(cs, call(fmt.Sprintf("c%d", i), "lookup", map[string]any{"ms": 1}))
	}
	return cs
}

// waitQuiet waits until the batch is marked published (the pipeline's last write for it)
// and every durable consumer has delivered and settled everything.
func (h *harness) waitQuiet(run string, step int64) {
	h.tb.Helper()
	ctx := ctxFor(h.tb, 30*time.Second)
	_, js := h.srv.Conn(h.tb)
	kv, err := js.KeyValue(ctx, "AWAKEN_batches")
	if err != nil {
		h.tb.Fatal(err)
	}
	natstest.WaitFor(h.tb, 30*time.Second, func() bool {
		e, err := kv.Get(ctx, contracts.BatchKey(run, step))
		if err != nil || !strings.Contains(string(e.Value()), `"phase":"published"`) {
			return false
		}
		info, err := h.srv.Server().Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
		if err != nil {
			return false
		}
		for _, a := range info.AccountDetails {
			for _, s := range a.Streams {
				for _, c := range s.Consumer {
					if c.Config == nil || c.Config.Durable == "" {
						continue
					}
					if c.NumPending > 0 || c.NumAckPending > 0 {
						return false
					}
				}
			}
		}
		return true
	}, "batch "+contracts.BatchID(run, step)+" published and every consumer settled")
}

// storedPerStream reads the messages ever stored per stream (its last sequence).
func storedPerStream(tb testing.TB, srv *server.Server) map[string]uint64 {
	tb.Helper()
	info, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]uint64{}
	for _, a := range info.AccountDetails {
		for _, s := range a.Streams {
			out[s.Name] += s.State.LastSeq
		}
	}
	return out
}

func formatCounts(m map[string]uint64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return "[" + strings.TrimSpace(b.String()) + "]"
}

// TestWritesPerCallUnderLimits pins what host limits add to the 1-call sequential batch
// (docs/configuration.md, "Limits", Writes): a count limit one ledger write at the
// decision; a concurrency limit one when the call takes its slot and one when it ends.
func TestWritesPerCallUnderLimits(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.Executors.BodyLedger = false
	cfg.Policy.Limits = []contracts.LimitConfig{
		{Name: "per-run", Tools: []string{"echo"}, Key: contracts.LimitKeyRun, Count: ptrTo(100)},
		{Name: "at-once", Tools: []string{"echo"}, Key: contracts.LimitKeyGlobal, Concurrency: ptrTo(8)},
	}
	h := newHarness(t, withConfig(cfg))
	h.mustRun(batch("limits-warm", 1, []string{"echo"}, call("c0", "echo", map[string]any{"text": "x"})))
	h.waitQuiet("limits-warm", 1)

	sub := batch("limits-seq", 1, []string{"echo"}, call("c0", "echo", map[string]any{"text": "x"}))
	got, total := h.storedBy(sub)
	t.Logf("sequential 1-call echo under a count and a concurrency limit: %d stored messages: %s", total, formatCounts(got))
	want := map[string]uint64{"AWAKEN_SUBMISSIONS": 1, "KV_AWAKEN_calls": 2, "KV_AWAKEN_batches": 1, "KV_AWAKEN_runs": 2,
		"AWAKEN_AUDIT": 1, "AWAKEN_RESULTS": 1, "KV_" + cfg.Names().LimitsBucket(): 3}
	if total != 11 || !maps.Equal(got, want) {
		t.Errorf("stored messages: got %d %s, want 11 %s", total, formatCounts(got), formatCounts(want))
	}
}
