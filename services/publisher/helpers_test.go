package publisher_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/publisher"
)

// waitTimeout bounds every wait of these tests.
const waitTimeout = servicetest.WaitTimeout

// service is the publisher as its tests run it: a fast redelivery, no limit on deliveries.
var service = servicetest.Service[*publisher.Service, bus.DeliveryOption]{
	Name: publisher.ServiceName, Start: func(ctx context.Context, env *pipeline.Env, opts ...bus.DeliveryOption) (*publisher.Service, error) {
		return publisher.Start(ctx, publisher.DepsOf(env), opts...)
	},
	Defaults: []bus.DeliveryOption{bus.WithDelivery(-1, 20*time.Millisecond)},
}

// harness is the shared service harness running one or more publishers.
type harness struct {
	*servicetest.Harness[*publisher.Service, bus.DeliveryOption]
	// live hears the live facts of every run (tool_result: never stored).
	live *servicetest.Live
}

var (
	call       = servicetest.Call
	submission = servicetest.Submission
)

// newHarness starts a server and (unless [servicetest.Stopped]) one publisher on it.
func newHarness(t *testing.T, opts ...servicetest.Option) *harness {
	h := servicetest.Start(t, service, opts...)
	return &harness{h, servicetest.Listen(t, h.NC, h.Env.Names.FactsWildcard())}
}

// in returns a view of h that reports failures to t (a subtest).
func (h *harness) in(t *testing.T) *harness { return &harness{h.Harness.In(t), h.live} }

// results returns the messages on the results subject of run.
func (h *harness) results(run string) []servicetest.Stored {
	return h.Messages(h.Env.Names.ResultsStream(), h.Env.Names.ResultsSubject(run))
}

// facts returns the live facts sent for run, as heard (a fact sent twice is heard twice).
func (h *harness) facts(run string) []servicetest.Stored {
	return h.live.Events(h.Env.Names.FactsSubject(run))
}

// storedEvents returns what the events stream stores for run.
func (h *harness) storedEvents(run string) []servicetest.Stored {
	return h.Messages(h.Env.Names.EventsStream(), h.Env.Names.EventsSubject(run))
}

// calls is n calls of tool with ids c0, c1, ...
func calls(n int, tool string) []contracts.ToolCall {
	out := make([]contracts.ToolCall, n)
	for i := range out {
		out[i] = call(fmt.Sprintf("c%d", i), tool)
	}
	return out
}

// createBatch writes the batch record of sub as the batcher would.
func (h *harness) createBatch(sub contracts.BatchSubmission, parallel bool) {
	h.T.Helper()
	pinned := make([]contracts.PinnedCall, len(sub.Calls))
	for i, c := range sub.Calls {
		pinned[i] = h.Env.Config.Pin(c.ToolID)
	}
	rec := contracts.BatchRecord{
		Submission: sub, Hash: "test-hash-" + sub.BatchID(), Pinned: pinned, Parallel: parallel,
		Phase: contracts.BatchPhaseOpen, CreatedAt: h.Env.Now(),
	}
	h.AcceptBatch(rec)
}

// setCall writes the record of call i of sub in phase, as the gate or an executor would.
func (h *harness) setCall(sub contracts.BatchSubmission, i int, phase contracts.ToolCallPhase) {
	h.T.Helper()
	c := sub.Calls[i]
	rec := contracts.CallRecord{
		Index: i, CallID: c.CallID, ToolID: c.ToolID, Phase: phase,
		Policy: h.Env.Config.Pin(c.ToolID).Policy,
	}
	if _, err := h.Env.Calls.Put(h.Ctx, contracts.CallKey(h.Env.Config.Pin(c.ToolID).Target, sub.RunID, sub.Step, c.CallID), rec); err != nil {
		h.T.Fatalf("write call %s: %v", c.CallID, err)
	}
}

// claimOwner sets the thread's "owner" key, exclusively: two calls of one batch that
// stage it conflict.
var claimOwner = contracts.Command{Key: "owner", Scope: contracts.ScopeThread, Merge: contracts.MergeExclusive,
	Action: contracts.Action{Kind: contracts.ActionSet, Value: json.RawMessage(`"me"`)}}

// completeStaging writes every call of sub completed with output "ok" that stages
// state(k), k the call's index.
func (h *harness) completeStaging(sub contracts.BatchSubmission, state func(k int) contracts.Command) {
	h.T.Helper()
	for k, c := range sub.Calls {
		h.setCall(sub, k, contracts.CompletedPhase(contracts.TextOutput(c.CallID, "ok").WithState(state(k))))
	}
}

// completed is the Completed phase of call id with text output.
func completed(id, text string) contracts.ToolCallPhase {
	return contracts.CompletedPhase(contracts.TextOutput(id, text))
}

// outputOf is the CallOutput announcing that call index of sub is terminal.
func outputOf(sub contracts.BatchSubmission, index int, parallel bool) contracts.CallOutput {
	c := sub.Calls[index]
	return contracts.CallOutput{
		RunID: sub.RunID, Step: sub.Step, Index: index, CallID: c.CallID, ToolID: c.ToolID,
		Outcome: contracts.OutcomeCompleted, Parallel: parallel,
	}
}

// announce publishes the output of call index of sub under a fresh id (tag tells
// deliveries of one output apart) and returns its stream sequence.
func (h *harness) announce(sub contracts.BatchSubmission, index int, parallel bool, tag string) uint64 {
	h.T.Helper()
	id := fmt.Sprintf("%s:%s:out:%s", sub.BatchID(), sub.Calls[index].CallID, tag)
	return h.Output(id, outputOf(sub, index, parallel))
}

// settled waits until the publisher has settled every output up to seq.
func (h *harness) settled(seq uint64) {
	h.T.Helper()
	h.WaitSettled(h.Env.Names.CallRecordsStream(), contracts.ConsumerPublisher, seq)
}

// phase is the current phase of sub's batch.
func (h *harness) phase(sub contracts.BatchSubmission) contracts.BatchPhase {
	h.T.Helper()
	rec, _ := h.Batch(sub.RunID, sub.Step)
	return rec.Phase
}

// published is one batch's publication read back from a results subject, in either form:
// one io.awaken.toolbatch.results.v1 message, or the atomic batch of per-call results and
// the finalized event.
type published struct {
	batchID   string
	results   []contracts.ToolResultEvent
	finalized contracts.BatchFinalized
	// messages are the stored messages of the publication, in stream order.
	messages []servicetest.Stored
}

// single reports whether the batch went out as one results message.
func (p published) single() bool {
	return len(p.messages) == 1 && p.messages[0].Event.Type == contracts.TypeBatchResults
}

// publications decodes the results subject of run into the publications it holds, in
// stream order (per-call results are grouped with the finalized event that ends them).
func (h *harness) publications(t *testing.T, run string) []published {
	t.Helper()
	var out []published
	pending := map[string]*published{}
	for _, m := range h.results(run) {
		switch m.Event.Type {
		case contracts.TypeBatchResults:
			b := servicetest.Decode[contracts.BatchResults](t, m.Event)
			out = append(out, published{batchID: b.BatchID, results: b.Results, finalized: b.Finalized, messages: []servicetest.Stored{m}})
		case contracts.TypeToolResult:
			r := servicetest.Decode[contracts.ToolResultEvent](t, m.Event)
			p := pending[r.BatchID]
			if p == nil {
				p = &published{batchID: r.BatchID}
				pending[r.BatchID] = p
			}
			p.results = append(p.results, r)
			p.messages = append(p.messages, m)
		case contracts.TypeBatchFinalized:
			f := servicetest.Decode[contracts.BatchFinalized](t, m.Event)
			p := pending[f.BatchID]
			if p == nil {
				p = &published{batchID: f.BatchID}
			}
			delete(pending, f.BatchID)
			p.finalized = f
			p.messages = append(p.messages, m)
			out = append(out, *p)
		default:
			t.Errorf("unexpected %s %s on the results subject of %s", m.Event.Type, m.Event.ID, run)
		}
	}
	return out
}

// waitPublications waits until the results subject of run ends with a whole publication
// (its last message is a results message or a finalized event) and holds at least n, and
// returns them. It polls the subject's last message only: a large batch's publication is
// megabytes, decoded once at the end.
func (h *harness) waitPublications(t *testing.T, run string, n int) []published {
	t.Helper()
	subject := h.Env.Names.ResultsSubject(run)
	stream, err := h.JS.Stream(h.Ctx, h.Env.Names.ResultsStream())
	if err != nil {
		t.Fatal(err)
	}
	var got []published
	natstest.WaitFor(t, waitTimeout, func() bool {
		last, err := stream.GetLastMsgForSubject(h.Ctx, subject)
		if err != nil {
			return false
		}
		ev, err := cloudevent.DecodeMsg(last.Header, nil)
		if err != nil || ev.Type != contracts.TypeBatchResults && ev.Type != contracts.TypeBatchFinalized {
			return false
		}
		got = h.publications(t, run)
		return len(got) >= n
	}, fmt.Sprintf("%d publications on the results subject of %s", n, run))
	return got
}
