package batcher_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// outputOf is the CallOutput announcing that call index of sub is terminal.
func outputOf(sub contracts.BatchSubmission, index int, parallel bool) contracts.CallOutput {
	c := sub.Calls[index]
	return contracts.CallOutput{
		RunID: sub.RunID, Step: sub.Step, Index: index, CallID: c.CallID, ToolID: c.ToolID,
		Outcome: contracts.OutcomeCompleted, Parallel: parallel,
	}
}

// TestOutputAdvancesSequentialDispatch shows that the output of call i publishes the gate
// request of call i+1, and nothing after the last call or for a call dispatched in
// parallel; a parallel batch that fell back to sequential dispatch advances like any other.
func TestOutputAdvancesSequentialDispatch(t *testing.T) {
	h := newHarness(t)
	h.start()
	names := h.Env.Names

	tests := []struct {
		name     string
		tool     string
		index    int
		parallel bool
		advances bool
	}{
		{name: "first call advances to the second", tool: "echo", index: 0, advances: true},
		{name: "middle call advances to the last", tool: "echo", index: 1, advances: true},
		{name: "last call advances nothing", tool: "echo", index: 2},
		{name: "parallel call advances nothing", tool: "delegate", index: 0, parallel: true},
		{name: "last parallel call advances nothing", tool: "delegate", index: 2, parallel: true},
		{name: "parallel batch after a probe fallback advances", tool: "delegate", index: 0, advances: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			run := fmt.Sprintf("run-adv-%d", i)
			sub := submission(run, 5, call("a", tt.tool), call("b", tt.tool), call("c", tt.tool))
			h.Submit(sub.BatchID(), sub)
			h.WaitMessages(names.WorkStream(), names.GateRequestSubject(run), 1)

			seq := h.Output("out-"+run, outputOf(sub, tt.index, tt.parallel))
			h.WaitSettled(names.CallRecordsStream(), contracts.ConsumerBatcherOutputs, seq)

			reqs := h.gateRequests(run)
			if !tt.advances {
				if len(reqs) != 1 {
					t.Fatalf("got %d gate requests, want only the first", len(reqs))
				}
				return
			}
			if len(reqs) != 2 {
				t.Fatalf("got %d gate requests, want 2", len(reqs))
			}
			next := tt.index + 1
			ev := reqs[1].Event
			req := decode[contracts.GateRequest](t, ev)
			want := contracts.GateRequest{RunID: run, Step: 5, Index: next}
			if req != want || ev.ID != pipeline.GateRequestID(op(run, 5, sub.Calls[next].CallID)) {
				t.Errorf("gate request %s = %+v, want %+v", ev.ID, req, want)
			}
		})
	}
}

// TestRedeliveredOutputPublishesOneGateRequest delivers the output of call 0 twice, as two
// stream messages (an executor that re-published it after a crash, past any stream
// deduplication of the output itself), and shows a single gate request for call 1.
func TestRedeliveredOutputPublishesOneGateRequest(t *testing.T) {
	h := newHarness(t)
	h.start()
	names := h.Env.Names
	const run = "run-redelivered"
	sub := submission(run, 1, call("a", "echo"), call("b", "echo"))
	h.Submit(sub.BatchID(), sub)
	h.WaitMessages(names.WorkStream(), names.GateRequestSubject(run), 1)

	h.Output("out-a-1", outputOf(sub, 0, false))
	seq := h.Output("out-a-2", outputOf(sub, 0, false))
	h.WaitSettled(names.CallRecordsStream(), contracts.ConsumerBatcherOutputs, seq)
	if n := len(h.gateRequests(run)); n != 2 {
		t.Errorf("got %d gate requests, want 2 (call 0 and call 1 once)", n)
	}
}

// TestCrashesAreRepairedByRedelivery crashes the batcher (through the fault hook) after it
// committed a batch record and after it published a gate request; the redelivery finds the
// work recorded and ends with exactly one record and one request.
func TestCrashesAreRepairedByRedelivery(t *testing.T) {
	tests := []struct {
		name  string
		point pipeline.FaultPoint
		op    func(sub contracts.BatchSubmission) string
		// output is true when the crash is in the output handler rather than at submit.
		output bool
	}{
		{name: "submit: after the record, before the gate request", point: pipeline.FaultAfterCommit,
			op: func(sub contracts.BatchSubmission) string { return sub.BatchID() }},
		{name: "submit: after the gate request, before the ack", point: pipeline.FaultAfterPublish,
			op: func(sub contracts.BatchSubmission) string { return sub.BatchID() }},
		{name: "output: after the next gate request, before the ack", point: pipeline.FaultAfterPublish, output: true,
			op: func(sub contracts.BatchSubmission) string { return op(sub.RunID, sub.Step, sub.Calls[1].CallID) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.start()
			names := h.Env.Names
			const run = "run-crash"
			sub := submission(run, 1, call("a", "echo"), call("b", "echo"))
			h.FailAt(tt.point, tt.op(sub), 2, nil)

			seq := h.Submit(sub.BatchID(), sub)
			h.WaitSettled(names.SubmissionsStream(), contracts.ConsumerBatcherSubmit, seq)
			want := 1
			if tt.output {
				seq = h.Output("out-a", outputOf(sub, 0, false))
				h.WaitSettled(names.CallRecordsStream(), contracts.ConsumerBatcherOutputs, seq)
				want = 2
			}
			if n := h.HitCount(tt.point, tt.op(sub)); n != 3 {
				t.Errorf("fault point reached %d times, want 3 (two crashes, one success)", n)
			}
			if n := len(h.gateRequests(run)); n != want {
				t.Errorf("got %d gate requests, want %d", n, want)
			}
			if rec, _ := h.Batch(run, 1); rec.Phase != contracts.BatchPhaseOpen || len(rec.Pinned) != 2 {
				t.Errorf("batch record = %+v", rec)
			}
			if n := len(h.DeadLetters(contracts.ConsumerBatcherSubmit)) + len(h.rejections()); n != 0 {
				t.Errorf("a crash ended in %d rejections or dead letters", n)
			}
		})
	}
}

// TestExhaustedInputsSealTheCallTheyWouldDispatch makes a handler fail on every delivery
// and shows that the call it would have dispatched becomes Indeterminate with a reason
// naming the batcher, that its output is published so the batch still finishes, and that
// the input is dead-lettered as exhausted.
func TestExhaustedInputsSealTheCallTheyWouldDispatch(t *testing.T) {
	tests := []struct {
		name     string
		tool     string
		point    pipeline.FaultPoint
		op       func(sub contracts.BatchSubmission) string
		output   bool  // drive an output of call 0 after the submission
		sealed   []int // calls that must end Indeterminate
		consumer string
	}{
		{name: "submission of a sequential batch", tool: "echo", point: pipeline.FaultAfterCommit,
			op:     func(sub contracts.BatchSubmission) string { return sub.BatchID() },
			sealed: []int{0}, consumer: contracts.ConsumerBatcherSubmit},
		{name: "submission of a parallel batch", tool: "delegate", point: pipeline.FaultAfterCommit,
			op:     func(sub contracts.BatchSubmission) string { return sub.BatchID() },
			sealed: []int{0, 1, 2}, consumer: contracts.ConsumerBatcherSubmit},
		{name: "output of call 0", tool: "echo", point: pipeline.FaultAfterPublish, output: true,
			op:     func(sub contracts.BatchSubmission) string { return op(sub.RunID, sub.Step, sub.Calls[1].CallID) },
			sealed: []int{1}, consumer: contracts.ConsumerBatcherOutputs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.start(bus.WithDelivery(3, 10*time.Millisecond))
			names := h.Env.Names
			const run = "run-exhausted"
			sub := submission(run, 1, call("a", tt.tool), call("b", tt.tool), call("c", tt.tool))
			h.FailAt(tt.point, tt.op(sub), -1, nil)

			seq := h.Submit(sub.BatchID(), sub)
			stream := names.SubmissionsStream()
			if tt.output {
				h.WaitSettled(stream, contracts.ConsumerBatcherSubmit, seq)
				seq = h.Output("out-a", outputOf(sub, 0, false))
				stream = names.CallRecordsStream()
			}
			h.WaitSettled(stream, tt.consumer, seq)

			outs := h.CallOutputs(run)
			if tt.output {
				outs = outs[1:] // the output the test published
			}
			if len(outs) != len(tt.sealed) {
				t.Fatalf("got %d outputs of sealed calls, want %d", len(outs), len(tt.sealed))
			}
			for k, i := range tt.sealed {
				c := sub.Calls[i]
				rec, _, err := h.Env.Calls.Get(h.Ctx, contracts.CallKey(h.Env.Config.Pin(c.ToolID).Target, run, 1, c.CallID))
				if err != nil {
					t.Fatalf("call %s: %v", c.CallID, err)
				}
				if rec.Phase.Kind != contracts.PhaseIndeterminate || rec.Index != i || rec.CallID != c.CallID ||
					len(rec.Phase.Reason) < len("batcher: ") || rec.Phase.Reason[:len("batcher: ")] != "batcher: " {
					t.Errorf("call %s = %+v, want Indeterminate with a batcher reason", c.CallID, rec)
				}
				out := decode[contracts.CallOutput](t, outs[k].Event)
				want := contracts.CallOutput{RunID: run, Step: 1, Index: i, CallID: c.CallID, ToolID: c.ToolID,
					Outcome: contracts.OutcomeIndeterminate}
				if out != want || outs[k].Event.ID != pipeline.OutputID(op(run, 1, c.CallID)) {
					t.Errorf("output %s = %+v, want %+v", outs[k].Event.ID, out, want)
				}
			}
			dead := h.DeadLetters(tt.consumer)
			if len(dead) != 1 || dead[0].Header.Get(bus.HeaderDeadCode) != string(bus.CodeExhausted) {
				t.Errorf("dead letters of %s = %+v, want one exhausted", tt.consumer, dead)
			}
		})
	}
}
