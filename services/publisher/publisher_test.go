package publisher_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestBarrierHoldsUntilEveryCallIsTerminal drives outputs while some call of the batch is
// not terminal and shows that nothing is published and the batch stays open; once the
// last call is terminal, its output publishes the batch.
func TestBarrierHoldsUntilEveryCallIsTerminal(t *testing.T) {
	executing := contracts.ExecutingPhase(1)
	awaiting := contracts.AwaitingPhase(contracts.WaitToolPermission, "perm.run.1.c1")
	type step struct {
		call   int
		phase  *contracts.ToolCallPhase // nil: leave the record as it is
		output bool                     // announce the call's output afterwards
	}
	done := func(i int) step {
		p := completed(fmt.Sprintf("c%d", i), "ok")
		return step{call: i, phase: &p, output: true}
	}
	tests := []struct {
		name     string
		tool     string
		parallel bool
		// held are the steps after which nothing may be published; the final steps
		// publish the batch.
		held  []step
		final []step
	}{
		{name: "sequential: outputs of earlier calls", tool: "echo",
			held:  []step{done(0), done(1), {call: 2, phase: &executing}},
			final: []step{done(2)}},
		{name: "sequential: last output while an earlier call executes", tool: "echo",
			held: []step{done(0), {call: 1, phase: &executing}, done(2)},
			// The middle call completes; a redelivery of the last output then publishes.
			final: []step{{call: 1, phase: ptr(completed("c1", "ok"))}, {call: 2, output: true}}},
		{name: "sequential: last output while an earlier call has no record", tool: "echo",
			held:  []step{done(0), done(2)},
			final: []step{{call: 1, phase: ptr(completed("c1", "ok"))}, {call: 2, output: true}}},
		{name: "parallel: outputs in any order", tool: "delegate", parallel: true,
			held:  []step{done(2), done(0), {call: 1, phase: &awaiting, output: true}},
			final: []step{done(1)}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			run := fmt.Sprintf("run-barrier-%d", i)
			sub := submission(run, 1, calls(3, tt.tool)...)
			h.createBatch(sub, tt.parallel)
			apply := func(s step, tag string) uint64 {
				if s.phase != nil {
					h.setCall(sub, s.call, *s.phase)
				}
				if !s.output {
					return 0
				}
				seq := h.announce(sub, s.call, tt.parallel, tag)
				h.settled(seq)
				return seq
			}
			for k, s := range tt.held {
				apply(s, fmt.Sprint(k))
				if n := len(h.results(run)); n != 0 {
					t.Fatalf("after step %d: %d messages published while a call is not terminal", k, n)
				}
				if p := h.phase(sub); p != contracts.BatchPhaseOpen {
					t.Fatalf("after step %d: phase %q while a call is not terminal", k, p)
				}
			}
			for k, s := range tt.final {
				apply(s, fmt.Sprint("final-", k))
			}
			h.waitPublications(t, run, 1)
			waitPhase(h, sub, contracts.BatchPhasePublished)
			if got := h.publications(t, run); len(got) != 1 || !got[0].single() || len(got[0].results) != 3 {
				t.Errorf("published %d publications, want one results message with 3 results", len(got))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// waitPhase waits until sub's batch is in phase p.
func waitPhase(h *harness, sub contracts.BatchSubmission, p contracts.BatchPhase) {
	h.T.Helper()
	natstest.WaitFor(h.T, waitTimeout, func() bool { return h.phase(sub) == p }, fmt.Sprintf("batch %s to be %s", sub.BatchID(), p))
}

// TestPublishesOneResultsMessageInModelOrder completes a batch with a text result, an
// error result, an Indeterminate call and staged state, and checks the one publication:
// one io.awaken.toolbatch.results.v1 message under the batch's id with every result in
// model order with its outcome and the finalized payload with the call ids and the staged
// state in order; then the live tool_result facts (none stored) and the published phase.
func TestPublishesOneResultsMessageInModelOrder(t *testing.T) {
	h := newHarness(t)
	const run = "run-order"
	sub := submission(run, 7, call("first", "echo"), call("second", "echo"), call("third", "nope"), call("fourth", "echo"))
	h.createBatch(sub, false)

	cmdA := contracts.Command{Key: "a", Scope: contracts.ScopeRun, Merge: contracts.MergeDisjoint,
		Action: contracts.Action{Kind: contracts.ActionSet, Value: json.RawMessage(`1`)}}
	cmdB := contracts.Command{Key: "b", Scope: contracts.ScopeThread, Merge: contracts.MergeDisjoint,
		Action: contracts.Action{Kind: contracts.ActionRemove}}
	const reason = "owner lease expired after the executor was entered"
	outputs := []contracts.ToolOutput{
		contracts.TextOutput("first", "one").WithState(cmdA),
		contracts.ErrorOutput("second", "blocked: denied"),
		contracts.ErrorOutput("third", "tool outcome is indeterminate: "+reason),
		contracts.TextOutput("fourth", "four").WithState(cmdB),
	}
	h.setCall(sub, 0, contracts.CompletedPhase(outputs[0]))
	h.setCall(sub, 1, contracts.CompletedPhase(outputs[1]))
	h.setCall(sub, 2, contracts.IndeterminatePhase(reason))
	h.setCall(sub, 3, contracts.CompletedPhase(outputs[3]))
	h.announce(sub, 3, false, "1")

	h.waitPublications(t, run, 1)
	waitPhase(h, sub, contracts.BatchPhasePublished)
	got := h.results(run)
	if len(got) != 1 {
		t.Fatalf("published %d messages, want 1", len(got))
	}
	batchID := sub.BatchID()
	m := got[0]
	if m.Event.Type != contracts.TypeBatchResults || m.Event.ID != pipeline.BatchResultsID(batchID) || m.Event.Source != "awaken/publisher" {
		t.Fatalf("published %s %s from %s, want the results message %s", m.Event.Type, m.Event.ID, m.Event.Source, pipeline.BatchResultsID(batchID))
	}
	if id := m.Header.Get("Nats-Msg-Id"); id != pipeline.BatchResultsID(batchID) {
		t.Errorf("Nats-Msg-Id %q, want %q (deduplicated by the batch id)", id, pipeline.BatchResultsID(batchID))
	}
	b := servicetest.Decode[contracts.BatchResults](t, m.Event)
	if b.BatchID != batchID || b.RunID != run || len(b.Results) != 4 {
		t.Fatalf("results message of %s/%s holds %d results, want %s/%s and 4", b.BatchID, b.RunID, len(b.Results), batchID, run)
	}
	outcomes := []contracts.Outcome{contracts.OutcomeCompleted, contracts.OutcomeCompleted,
		contracts.OutcomeIndeterminate, contracts.OutcomeCompleted}
	for i, r := range b.Results {
		c := sub.Calls[i]
		want := contracts.ToolResultEvent{BatchID: batchID, RunID: run, Index: i, CallID: c.CallID, ToolID: c.ToolID,
			Outcome: outcomes[i], Output: outputs[i]}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("result %d = %+v, want %+v", i, r, want)
		}
	}
	wantFin := contracts.BatchFinalized{BatchID: batchID, RunID: run, ThreadID: "thread-1", Step: 7,
		CallIDs: []string{"first", "second", "third", "fourth"}, State: []contracts.Command{cmdA, cmdB}}
	if !reflect.DeepEqual(b.Finalized, wantFin) {
		t.Errorf("finalized = %+v, want %+v", b.Finalized, wantFin)
	}

	// The tool_result facts repeat what the results message holds: sent live, so the
	// batch stores nothing for them.
	if stored := h.storedEvents(run); len(stored) != 0 {
		t.Errorf("the events stream stores %d messages of the batch, want none", len(stored))
	}
	facts := h.facts(run)
	if len(facts) != 4 {
		t.Fatalf("heard %d live facts, want 4", len(facts))
	}
	for i, m := range facts {
		c := sub.Calls[i]
		ev := servicetest.Decode[contracts.AgentEvent](t, m.Event)
		isErr := i == 1 || i == 2
		want := contracts.AgentEvent{Tier: "fact", BatchID: batchID,
			Event: contracts.AgentFact{Type: contracts.EventToolResult, ID: c.CallID, IsError: &isErr}}
		if !reflect.DeepEqual(ev, want) || m.Event.Type != contracts.TypeAgentEvent ||
			m.Event.ID != pipeline.AgentEventID(contracts.OperationID(run, 7, c.CallID), contracts.EventToolResult) {
			t.Errorf("fact %d %s = %+v, want %+v", i, m.Event.ID, ev, want)
		}
	}
}

// TestDuplicateOutputsPublishOnce delivers the outputs that can open the barrier several
// times — redeliveries of the last output, and every output of a parallel batch twice,
// handled concurrently by two replicas with several workers each — and shows exactly one
// publication.
func TestDuplicateOutputsPublishOnce(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		parallel bool
		replicas int
		n        int
	}{
		{name: "redelivered last output of a sequential batch", tool: "echo", replicas: 1, n: 3},
		{name: "parallel batch, concurrent outputs on two replicas", tool: "delegate", parallel: true, replicas: 2, n: 8},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, servicetest.Stopped())
			for range tt.replicas {
				h.StartReplica(bus.WithWorkers(4))
			}
			run := fmt.Sprintf("run-dup-%d", i)
			sub := submission(run, 1, calls(tt.n, tt.tool)...)
			h.createBatch(sub, tt.parallel)
			for k := range tt.n {
				h.setCall(sub, k, completed(sub.Calls[k].CallID, "ok"))
			}
			var last uint64
			for round := range 3 {
				if !tt.parallel {
					last = h.announce(sub, tt.n-1, false, fmt.Sprint(round))
					continue
				}
				if round == 2 {
					break
				}
				for k := range tt.n {
					last = h.announce(sub, k, true, fmt.Sprint(round))
				}
			}
			h.settled(last)
			waitPhase(h, sub, contracts.BatchPhasePublished)
			if n := len(h.results(run)); n != 1 {
				t.Errorf("results subject holds %d messages, want 1 (one publication)", n)
			}
			// A live fact may be sent again by a delivery that finalized before; a reader
			// deduplicates by id.
			ids := map[string]bool{}
			for _, f := range h.facts(run) {
				ids[f.Event.ID] = true
			}
			if len(ids) != tt.n {
				t.Errorf("heard the live facts of %d calls, want %d", len(ids), tt.n)
			}
		})
	}
}

// TestInvalidOutputsAreDeadLettered shows that an output naming no recorded batch, or a
// call the batch does not have, is dead-lettered at once and the next batch still
// publishes.
func TestInvalidOutputsAreDeadLettered(t *testing.T) {
	h := newHarness(t)
	sub := submission("run-invalid", 1, call("c0", "echo"))
	h.createBatch(sub, false)

	wrong := outputOf(sub, 0, false)
	wrong.CallID = "other"
	seq := h.Output("wrong-1", wrong)
	h.settled(seq)
	codes := map[string]string{} // original message id → dead-letter code (workers run concurrently)
	for _, d := range h.DeadLetters(contracts.ConsumerPublisher) {
		codes[d.Header.Get(bus.HeaderOriginalMsgID)] = d.Header.Get(bus.HeaderDeadCode)
	}
	want := map[string]string{"wrong-1": string(contracts.RejectInvalidField)}
	if !reflect.DeepEqual(codes, want) {
		t.Errorf("dead letters = %v, want %v", codes, want)
	}

	h.setCall(sub, 0, completed("c0", "ok"))
	h.announce(sub, 0, false, "1")
	h.waitPublications(t, "run-invalid", 1)
}

// TestOutputAheadOfItsBatchRecordIsRetried: the batcher records a batch before any of its
// calls can have an output, so an output whose batch record reads as missing was read from
// a replica of the batches bucket behind that write. It is redelivered, not dead-lettered
// (which left the batch unpublished for good in make chaos-cluster), and publishes the
// batch once the record shows up.
func TestOutputAheadOfItsBatchRecordIsRetried(t *testing.T) {
	h := newHarness(t)
	sub := submission("run-ahead", 1, call("c0", "echo"))
	h.announce(sub, 0, false, "1")
	natstest.WaitFor(t, waitTimeout, func() bool {
		cons, err := h.JS.Consumer(h.Ctx, h.Env.Names.CallRecordsStream(), contracts.ConsumerPublisher)
		if err != nil {
			return false
		}
		info, err := cons.Info(h.Ctx)
		return err == nil && info.NumRedelivered > 0
	}, "the output to be redelivered")
	// The batcher's and the executor's writes become visible.
	h.createBatch(sub, false)
	h.setCall(sub, 0, completed("c0", "ok"))
	h.waitPublications(t, "run-ahead", 1)
	if dead := h.DeadLetters(contracts.ConsumerPublisher); len(dead) != 0 {
		t.Errorf("%d dead letters, want none", len(dead))
	}
}

// TestLargeBatches publishes the largest batch the protocol allows (it fits one results
// message), outputs at the executors' size cap and staged state too large for one message
// (both are published as the atomic batch of per-call events: the results message would
// exceed the server's max payload).
func TestLargeBatches(t *testing.T) {
	big := func(i int) string { return strings.Repeat(string(rune('a'+i%26)), 256<<10) }
	stateOf := func(i int) contracts.Command {
		return contracts.Command{Key: fmt.Sprintf("k%d", i), Scope: contracts.ScopeRun, Merge: contracts.MergeDisjoint,
			Action: contracts.Action{Kind: contracts.ActionSet, Value: json.RawMessage(`"` + strings.Repeat("s", 230<<10) + `"`)}}
	}
	tests := []struct {
		name      string
		n         int
		output    func(i int, id string) contracts.ToolOutput
		wantState int  // commands in the finalized event
		atomic    bool // published as the atomic batch, not one results message
	}{
		{name: "512 calls", n: contracts.MaxCallsPerBatch,
			output: func(i int, id string) contracts.ToolOutput { return contracts.TextOutput(id, fmt.Sprint("result ", i)) }},
		{name: "outputs of 256 KiB", n: 6,
			output: func(i int, id string) contracts.ToolOutput { return contracts.TextOutput(id, big(i)) }},
		// The test server's max payload is 4 MiB.
		{name: "outputs of 256 KiB, more than one message holds", n: 17, atomic: true,
			output: func(i int, id string) contracts.ToolOutput { return contracts.TextOutput(id, big(i)) }},
		{name: "staged state larger than one message", n: 20, atomic: true,
			output: func(i int, id string) contracts.ToolOutput {
				return contracts.TextOutput(id, "ok").WithState(stateOf(i))
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			run := fmt.Sprintf("run-large-%d", i)
			sub := submission(run, 1, calls(tt.n, "echo")...)
			h.createBatch(sub, false)
			for k, c := range sub.Calls {
				h.setCall(sub, k, contracts.CompletedPhase(tt.output(k, c.CallID)))
			}
			h.announce(sub, tt.n-1, false, "1")
			h.waitPublications(t, run, 1)
			waitPhase(h, sub, contracts.BatchPhasePublished)
			pubs := h.publications(t, run)
			if len(pubs) != 1 {
				t.Fatalf("%d publications, want 1", len(pubs))
			}
			p := pubs[0]
			if wantMsgs := map[bool]int{false: 1, true: tt.n + 1}[tt.atomic]; len(p.messages) != wantMsgs || p.single() == tt.atomic {
				t.Fatalf("published %d messages (one results message: %v), want %d", len(p.messages), p.single(), wantMsgs)
			}
			for k, m := range p.messages {
				if m.Seq != p.messages[0].Seq+uint64(k) {
					t.Fatalf("message %d at sequence %d: not one contiguous batch", k, m.Seq)
				}
			}
			if len(p.results) != tt.n {
				t.Fatalf("%d results, want %d", len(p.results), tt.n)
			}
			for k, r := range p.results {
				if want := tt.output(k, sub.Calls[k].CallID); r.Index != k || !reflect.DeepEqual(r.Output, want) {
					t.Fatalf("result %d does not carry its output", k)
				}
			}
			f := p.finalized
			if len(f.CallIDs) != tt.n || f.State == nil || len(f.State) != tt.wantState {
				t.Errorf("finalized has %d call ids and %d state commands (nil %v), want %d and %d",
					len(f.CallIDs), len(f.State), f.State == nil, tt.n, tt.wantState)
			}
		})
	}
}

// TestConflictingStateIsLeftOutOfTheFinalizedEvent stages two exclusive sets of one key:
// the batch still publishes, with empty state in its finalized event.
func TestConflictingStateIsLeftOutOfTheFinalizedEvent(t *testing.T) {
	h := newHarness(t)
	const run = "run-state-conflict"
	sub := submission(run, 1, calls(2, "echo")...)
	h.createBatch(sub, false)
	h.completeStaging(sub, func(int) contracts.Command { return claimOwner })
	h.announce(sub, 1, false, "1")
	p := h.waitPublications(t, run, 1)[0]
	if f := p.finalized; f.State == nil || len(f.State) != 0 {
		t.Errorf("finalized state = %+v, want empty", f.State)
	}
	if r := p.results[0]; len(r.Output.State) != 1 {
		t.Errorf("result 0 lost its own staged state: %+v", r.Output.State)
	}
}
