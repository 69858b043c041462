package publisher_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// duplicateWindow is the short deduplication window of the tests that must get past it.
const duplicateWindow = 300 * time.Millisecond

// TestCrashesPublishExactlyOnce crashes the publisher (through the fault hook) after it
// finalized a batch and before it published, and after it published and before it marked
// the batch published; the redelivery publishes the batch exactly once. The rows past the
// duplicate window show that the results stream, not its deduplication, is what stops a
// second publication — also when a later batch of the run was published in between, and
// without mistaking an earlier batch's results for this one's.
func TestCrashesPublishExactlyOnce(t *testing.T) {
	tests := []struct {
		name     string
		point    pipeline.FaultPoint
		times    int
		parallel bool
		// pastWindow waits, inside the crash, until the duplicate window has passed.
		pastWindow bool
		// laterBatch publishes the results of a later batch of the run inside the crash;
		// earlierBatch publishes those of an earlier one before the batch starts.
		laterBatch, earlierBatch bool
		// atomicBefore publishes, inside the crash, the batch's results as the atomic batch
		// of its per-call events — the form of a batch too large for one results message —
		// as the crashed delivery would have: the redelivery must find its finalized event
		// and publish nothing, whichever form it would publish itself.
		atomicBefore bool
	}{
		{name: "after finalize, before the publication", point: pipeline.FaultAfterCommit, times: 1},
		{name: "after finalize, twice", point: pipeline.FaultAfterCommit, times: 2},
		{name: "after finalize, parallel batch", point: pipeline.FaultAfterCommit, times: 1, parallel: true},
		{name: "after finalize, past the window, an earlier batch on the subject", point: pipeline.FaultAfterCommit,
			times: 1, pastWindow: true, earlierBatch: true},
		{name: "after the publication, before the published mark", point: pipeline.FaultAfterPublish, times: 1},
		{name: "after the publication, twice", point: pipeline.FaultAfterPublish, times: 2},
		{name: "after the publication, past the duplicate window", point: pipeline.FaultAfterPublish, times: 1,
			pastWindow: true},
		{name: "after the publication, past the window, a later batch published since", point: pipeline.FaultAfterPublish,
			times: 1, pastWindow: true, laterBatch: true},
		{name: "after finalize, the atomic batch published, past the window", point: pipeline.FaultAfterCommit,
			times: 1, pastWindow: true, atomicBefore: true},
		{name: "after finalize, the atomic batch published, past the window, a later batch published since",
			point: pipeline.FaultAfterCommit, times: 1, pastWindow: true, atomicBefore: true, laterBatch: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := bus.TopologyConfig{}
			if tt.pastWindow {
				topo.Duplicates = duplicateWindow
			}
			h := newHarness(t, servicetest.WithTopology(topo))
			run := fmt.Sprintf("run-crash-%d", i)
			tool := "echo"
			if tt.parallel {
				tool = "delegate"
			}
			const n = 3
			sub := submission(run, 5, calls(n, tool)...)
			if tt.earlierBatch {
				h.publishForeignBatch(run, 4)
			}
			h.createBatch(sub, tt.parallel)
			for k, c := range sub.Calls {
				h.setCall(sub, k, completed(c.CallID, "ok"))
			}
			h.FailAt(tt.point, sub.BatchID(), tt.times, func() {
				if tt.atomicBefore {
					h.publishAtomicForm(sub)
				}
				if tt.pastWindow {
					h.outlastDuplicateWindow()
				}
				if tt.laterBatch {
					h.publishForeignBatch(run, 6)
				}
			})

			seq := h.announce(sub, n-1, tt.parallel, "1")
			h.settled(seq)
			waitPhase(h, sub, contracts.BatchPhasePublished)

			if n := h.HitCount(tt.point, sub.BatchID()); n != tt.times+1 {
				t.Errorf("fault point reached %d times, want %d", n, tt.times+1)
			}
			var ours []published
			for _, p := range h.publications(t, run) {
				if p.batchID == sub.BatchID() {
					ours = append(ours, p)
				}
			}
			if len(ours) != 1 {
				t.Fatalf("results subject holds %d publications of the batch, want 1", len(ours))
			}
			p := ours[0]
			if p.single() == tt.atomicBefore || len(p.results) != n {
				t.Fatalf("publication of %d messages (one results message: %v) with %d results, want %d results",
					len(p.messages), p.single(), len(p.results), n)
			}
			for k, m := range p.messages {
				want := pipeline.BatchResultsID(sub.BatchID())
				if tt.atomicBefore {
					want = pipeline.ResultID(sub.BatchID(), k)
					if k == n {
						want = pipeline.FinalizedID(sub.BatchID())
					}
				}
				if m.Event.ID != want || m.Seq != p.messages[0].Seq+uint64(k) {
					t.Errorf("message %d is %s at sequence %d, want %s contiguous", k, m.Event.ID, m.Seq, want)
				}
			}
			if got := len(h.facts(run)); got < n {
				t.Errorf("heard %d live facts, want %d", got, n)
			}
			if n := len(h.DeadLetters(contracts.ConsumerPublisher)); n != 0 {
				t.Errorf("%d outputs dead-lettered", n)
			}
		})
	}
}

// TestConcurrentFinalizersPublishOnce holds the worker that finalized a parallel batch
// right after its compare-and-swap until a second worker — which found the batch already
// finalized and nothing on the results stream — has published it. The first worker's own
// publication is then refused as a duplicate, which it takes as "already published": it
// completes its delivery instead of failing it, and the batch is published once.
func TestConcurrentFinalizersPublishOnce(t *testing.T) {
	h := newHarness(t, servicetest.Stopped())
	h.StartReplica(bus.WithWorkers(2))
	const run = "run-race"
	sub := submission(run, 1, calls(2, "delegate")...)
	h.createBatch(sub, true)
	for k, c := range sub.Calls {
		h.setCall(sub, k, completed(c.CallID, "ok"))
	}
	h.OnFault(pipeline.FaultAfterCommit, sub.BatchID(), func(hit int) {
		if hit != 1 {
			return
		}
		deadline := time.Now().Add(waitTimeout)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if len(h.results(run)) == 1 || time.Now().After(deadline) {
				return
			}
		}
	})
	h.announce(sub, 0, true, "1")
	seq := h.announce(sub, 1, true, "1")
	h.settled(seq)
	waitPhase(h, sub, contracts.BatchPhasePublished)

	if n := h.HitCount(pipeline.FaultAfterCommit, sub.BatchID()); n != 2 {
		t.Fatalf("%d workers reached the finalized batch, want 2 (the test needs both)", n)
	}
	if n := h.HitCount(pipeline.FaultAfterPublish, sub.BatchID()); n != 2 {
		t.Errorf("%d workers completed the publication step, want 2: the loser must take the duplicate as published", n)
	}
	if n := len(h.results(run)); n != 1 {
		t.Errorf("results subject holds %d messages, want 1 (one publication)", n)
	}
}

// outlastDuplicateWindow returns once the stream's duplicate window has passed for every
// message published before the call. It publishes a probe with a fresh id, then
// re-publishes it until the stream no longer reports it as a duplicate: ids expire in
// the order they were stored, so everything older has expired too. It runs inside the
// fault hook, off the test goroutine, so it reports failures without stopping the test.
func (h *harness) outlastDuplicateWindow() {
	subject := h.Env.Names.ResultsSubject("window-probe")
	id := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	if _, err := h.JS.PublishMsg(h.Ctx, probeMsg(subject, id)); err != nil {
		h.T.Errorf("publish window probe: %v", err)
		return
	}
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		ack, err := h.JS.PublishMsg(h.Ctx, probeMsg(subject, id))
		if err != nil {
			h.T.Errorf("re-publish window probe: %v", err)
			return
		}
		if !ack.Duplicate {
			return
		}
		if time.Now().After(deadline) {
			h.T.Errorf("the duplicate window did not pass within %s", waitTimeout)
			return
		}
	}
}

// publishForeignBatch publishes the results of another batch (run, step) — one result
// and its finalized event — as a publisher would have.
func (h *harness) publishForeignBatch(run string, step int64) {
	batchID := contracts.BatchID(run, step)
	subject := h.Env.Names.ResultsSubject(run)
	res, err := cloudevent.NewEvent(pipeline.ResultID(batchID, 0), "awaken/publisher", contracts.TypeToolResult,
		contracts.ToolResultEvent{BatchID: batchID, RunID: run, CallID: "x", ToolID: "echo",
			Outcome: contracts.OutcomeCompleted, Output: contracts.TextOutput("x", "other")})
	if err != nil {
		h.T.Errorf("foreign result: %v", err)
		return
	}
	fin, err := cloudevent.NewEvent(pipeline.FinalizedID(batchID), "awaken/publisher", contracts.TypeBatchFinalized,
		contracts.BatchFinalized{BatchID: batchID, RunID: run, ThreadID: "thread-1", Step: step,
			CallIDs: []string{"x"}, State: []contracts.Command{}})
	if err != nil {
		h.T.Errorf("foreign finalized: %v", err)
		return
	}
	if err := h.Env.Pub.PublishAtomic(h.Ctx, []bus.Outgoing{{Subject: subject, Event: res}, {Subject: subject, Event: fin}}); err != nil {
		h.T.Errorf("publish foreign batch %s: %v", batchID, err)
	}
}

// publishAtomicForm publishes the results of sub (every call completed with "ok") as the
// publisher publishes a batch too large for one results message: its per-call events and
// its finalized event, one atomic batch, under the publisher's ids.
func (h *harness) publishAtomicForm(sub contracts.BatchSubmission) {
	batchID := sub.BatchID()
	subject := h.Env.Names.ResultsSubject(sub.RunID)
	var out []bus.Outgoing
	var ids []string
	for i, c := range sub.Calls {
		ev, err := cloudevent.NewEvent(pipeline.ResultID(batchID, i), "awaken/publisher", contracts.TypeToolResult,
			contracts.ToolResultEvent{BatchID: batchID, RunID: sub.RunID, Index: i, CallID: c.CallID, ToolID: c.ToolID,
				Outcome: contracts.OutcomeCompleted, Output: contracts.TextOutput(c.CallID, "ok")})
		if err != nil {
			h.T.Errorf("result: %v", err)
			return
		}
		out = append(out, bus.Outgoing{Subject: subject, Event: ev})
		ids = append(ids, c.CallID)
	}
	fin, err := cloudevent.NewEvent(pipeline.FinalizedID(batchID), "awaken/publisher", contracts.TypeBatchFinalized,
		contracts.BatchFinalized{BatchID: batchID, RunID: sub.RunID, ThreadID: sub.ThreadID, Step: sub.Step,
			CallIDs: ids, State: []contracts.Command{}})
	if err != nil {
		h.T.Errorf("finalized: %v", err)
		return
	}
	if err := h.Env.Pub.PublishAtomic(h.Ctx, append(out, bus.Outgoing{Subject: subject, Event: fin})); err != nil {
		h.T.Errorf("publish %s as an atomic batch: %v", batchID, err)
	}
}

// probeMsg is a bare message with a message id on subject.
func probeMsg(subject, id string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(jetstream.MsgIDHeader, id)
	m.Data = []byte("probe")
	return m
}
