package publisher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/publisher"
)

// waitTimeout bounds every wait of these tests; generous for a loaded 2-core machine
// under the race detector.
const waitTimeout = 20 * time.Second

// testConfig is the trusted host configuration of the tests: a regular tool and a
// delegation tool with parallel completion.
const testConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 4 }
  - id: delegate
    kind: delegation
    parallel_completion: true
policy:
  default_behavior: allow
`

// harness is one embedded JetStream server with the awaken topology, an environment and
// (after start) one or more running publishers.
type harness struct {
	t   *testing.T
	ctx context.Context
	nc  *nats.Conn
	js  jetstream.JetStream
	env *pipeline.Env
	svc *publisher.Service
	f   *faults
}

// faults is the state of the test's fault hook, shared by every view of a harness.
type faults struct {
	mu    sync.Mutex
	rules []faultRule
	hits  map[string]int // "point|op" → number of times the hook was reached
}

// faultRule makes the fault hook fail at point for op, times times (forever when < 0),
// running before (if set) first. A rule with a pass function runs it on every hit instead
// and never fails.
type faultRule struct {
	point  pipeline.FaultPoint
	op     string
	times  int
	before func()
	pass   func(hit int)
}

var errInjected = errors.New("injected crash")

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessWith(t, bus.TopologyConfig{})
}

// newHarnessWith is newHarness with a topology configuration (e.g. a short duplicate
// window); memory storage is always used.
func newHarnessWith(t *testing.T, topo bus.TopologyConfig) *harness {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := srv.Conn(t)
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx := t.Context()
	if err := bus.EnsureTopology(ctx, js, cfg.Names(), withMemory(topo)); err != nil {
		t.Fatalf("topology: %v", err)
	}
	env, err := pipeline.NewEnv(ctx, nc, js, cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatalf("env: %v", err)
	}
	h := &harness{t: t, ctx: ctx, nc: nc, js: js, env: env, f: &faults{hits: map[string]int{}}}
	env.Faults = h.fault
	return h
}

func withMemory(topo bus.TopologyConfig) bus.TopologyConfig {
	topo.Storage = jetstream.MemoryStorage
	return topo
}

// start starts a publisher (call it again for another replica); the test's cleanup stops
// it before the server goes away.
func (h *harness) start(opts ...publisher.Option) {
	h.t.Helper()
	opts = append([]publisher.Option{publisher.WithDelivery(-1, 20*time.Millisecond)}, opts...)
	svc, err := publisher.Start(context.WithoutCancel(h.ctx), h.env, opts...)
	if err != nil {
		h.t.Fatalf("start publisher: %v", err)
	}
	h.svc = svc
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			h.t.Errorf("stop publisher: %v", err)
		}
	})
}

// in returns a view of h that reports failures to t (a subtest).
func (h *harness) in(t *testing.T) *harness {
	v := *h
	v.t = t
	return &v
}

// onFault runs fn with the hit number (1, 2, ...) every time the fault hook is reached at
// point for op, without failing; tests use it to hold a handler at a step boundary.
func (h *harness) onFault(point pipeline.FaultPoint, op string, fn func(hit int)) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.rules = append(h.f.rules, faultRule{point: point, op: op, pass: fn})
}

// failAt makes the fault hook fail at point for op times times (forever when < 0),
// running before, if not nil, each time before it fails.
func (h *harness) failAt(point pipeline.FaultPoint, op string, times int, before func()) {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	h.f.rules = append(h.f.rules, faultRule{point: point, op: op, times: times, before: before})
}

func (h *harness) fault(_ context.Context, service string, point pipeline.FaultPoint, op string) error {
	if service != publisher.ServiceName {
		h.t.Errorf("fault hook called with service %q", service)
	}
	h.f.mu.Lock()
	h.f.hits[string(point)+"|"+op]++
	hit := h.f.hits[string(point)+"|"+op]
	var before func()
	fail := false
	for i := range h.f.rules {
		f := &h.f.rules[i]
		if f.point == point && f.op == op && f.pass != nil {
			pass := f.pass
			h.f.mu.Unlock()
			pass(hit)
			return nil
		}
		if f.point == point && f.op == op && f.times != 0 {
			f.times--
			before, fail = f.before, true
			break
		}
	}
	h.f.mu.Unlock()
	if !fail {
		return nil
	}
	if before != nil {
		before()
	}
	return fmt.Errorf("%w at %s of %s", errInjected, point, op)
}

// hitCount is how often the fault hook was reached at point for op.
func (h *harness) hitCount(point pipeline.FaultPoint, op string) int {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return h.f.hits[string(point)+"|"+op]
}

// publish stores e on subject and returns its stream sequence.
func (h *harness) publish(subject string, e bus.Event) uint64 {
	h.t.Helper()
	ack, err := h.js.PublishMsg(h.ctx, bus.EncodeMsg(subject, e))
	if err != nil {
		h.t.Fatalf("publish %s on %s: %v", e.ID, subject, err)
	}
	if ack.Duplicate {
		h.t.Fatalf("publish %s on %s: deduplicated by the stream; tests use fresh ids", e.ID, subject)
	}
	return ack.Sequence
}

// publishRaw stores m as is and returns its stream sequence.
func (h *harness) publishRaw(m *nats.Msg) uint64 {
	h.t.Helper()
	ack, err := h.js.PublishMsg(h.ctx, m)
	if err != nil {
		h.t.Fatalf("publish raw on %s: %v", m.Subject, err)
	}
	return ack.Sequence
}

// output publishes a CallOutput with ce-id id and returns its stream sequence.
func (h *harness) output(id string, out contracts.CallOutput) uint64 {
	h.t.Helper()
	ev, err := bus.NewEvent(id, "test/executor", contracts.TypeCallOutput, out)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.publish(h.env.Names.OutputSubject(out.RunID), ev)
}

// waitSettled waits until durable has settled (acked or terminated) every message up to
// stream sequence seq.
func (h *harness) waitSettled(stream, durable string, seq uint64) {
	h.t.Helper()
	natstest.WaitFor(h.t, waitTimeout, func() bool {
		c, err := h.js.Consumer(h.ctx, stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(h.ctx)
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	}, fmt.Sprintf("%s to settle stream sequence %d", durable, seq))
}

// stored is one message read back from a stream.
type stored struct {
	seq    uint64
	header nats.Header
	event  bus.Event
}

// messages reads every message on subject (exact) of stream, in stream order.
func (h *harness) messages(stream, subject string) []stored {
	h.t.Helper()
	s, err := h.js.Stream(h.ctx, stream)
	if err != nil {
		h.t.Fatalf("stream %s: %v", stream, err)
	}
	var out []stored
	for seq := uint64(1); ; {
		m, err := s.GetMsg(h.ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			h.t.Fatalf("read %s from %d: %v", subject, seq, err)
		}
		ev, err := bus.DecodeMsg(m.Header, m.Data)
		if err != nil {
			h.t.Fatalf("decode message %d on %s: %v", m.Sequence, subject, err)
		}
		out = append(out, stored{seq: m.Sequence, header: m.Header, event: ev})
		seq = m.Sequence + 1
	}
}

// waitMessages waits until subject of stream holds at least n messages and returns them.
func (h *harness) waitMessages(stream, subject string, n int) []stored {
	h.t.Helper()
	var got []stored
	natstest.WaitFor(h.t, waitTimeout, func() bool {
		got = h.messages(stream, subject)
		return len(got) >= n
	}, fmt.Sprintf("%d messages on %s", n, subject))
	return got
}

// results returns the messages on the results subject of run.
func (h *harness) results(run string) []stored {
	return h.messages(h.env.Names.ResultsStream(), h.env.Names.ResultsSubject(run))
}

// facts returns the projection facts published for run.
func (h *harness) facts(run string) []stored {
	return h.messages(h.env.Names.EventsStream(), h.env.Names.EventsSubject(run))
}

// deadLetters returns the dead-lettered messages of consumer.
func (h *harness) deadLetters(consumer string) []stored {
	h.t.Helper()
	s, err := h.js.Stream(h.ctx, h.env.Names.DeadLetterStream())
	if err != nil {
		h.t.Fatal(err)
	}
	subject := h.env.Names.DeadLetterSubject(consumer)
	var out []stored
	for seq := uint64(1); ; {
		m, err := s.GetMsg(h.ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			h.t.Fatal(err)
		}
		// A dead letter keeps the raw message, which may not be a valid CloudEvent.
		ev, _ := bus.DecodeMsg(m.Header, m.Data)
		out = append(out, stored{seq: m.Sequence, header: m.Header, event: ev})
		seq = m.Sequence + 1
	}
}

// batch returns the batch record of (run, step) and its revision.
func (h *harness) batch(run string, step int64) (contracts.BatchRecord, uint64) {
	h.t.Helper()
	rec, rev, err := h.env.Batches.Get(h.ctx, contracts.BatchKey(run, step))
	if err != nil {
		h.t.Fatalf("batch record %s: %v", contracts.BatchID(run, step), err)
	}
	return rec, rev
}

// decode unmarshals the data of an event into a T.
func decode[T any](t *testing.T, ev bus.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", ev.ID, err)
	}
	return v
}

// call is a call of tool with call id id and small arguments.
func call(id, tool string) contracts.ToolCall {
	return contracts.ToolCall{CallID: id, ToolID: tool, Arguments: json.RawMessage(`{"text":"hi"}`)}
}

// calls is n calls of tool with ids c0, c1, ...
func calls(n int, tool string) []contracts.ToolCall {
	out := make([]contracts.ToolCall, n)
	for i := range out {
		out[i] = call(fmt.Sprintf("c%d", i), tool)
	}
	return out
}

// submission is a valid batch of calls for (run, step); every tool is visible.
func submission(run string, step int64, calls ...contracts.ToolCall) contracts.BatchSubmission {
	var tools []string
	seen := map[string]bool{}
	for _, c := range calls {
		if !seen[c.ToolID] {
			seen[c.ToolID] = true
			tools = append(tools, c.ToolID)
		}
	}
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-1", Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: calls,
	}
}

// createBatch writes the batch record of sub as the batcher would.
func (h *harness) createBatch(sub contracts.BatchSubmission, parallel bool) {
	h.t.Helper()
	pinned := make([]contracts.PinnedCall, len(sub.Calls))
	for i, c := range sub.Calls {
		pinned[i] = h.env.Config.Pin(c.ToolID)
	}
	rec := contracts.BatchRecord{
		Submission: sub, Hash: "test-hash-" + sub.BatchID(), Pinned: pinned, Parallel: parallel,
		Phase: contracts.BatchPhaseOpen, CreatedAt: h.env.Now(),
	}
	if _, err := h.env.Batches.Create(h.ctx, contracts.BatchKey(sub.RunID, sub.Step), rec); err != nil {
		h.t.Fatalf("create batch %s: %v", sub.BatchID(), err)
	}
}

// setCall writes the record of call i of sub in phase, as the gate or an executor would.
func (h *harness) setCall(sub contracts.BatchSubmission, i int, phase contracts.ToolCallPhase) {
	h.t.Helper()
	c := sub.Calls[i]
	rec := contracts.CallRecord{
		Index: i, CallID: c.CallID, ToolID: c.ToolID, Phase: phase,
		Policy: h.env.Config.Pin(c.ToolID).Policy,
	}
	if _, err := h.env.Calls.Put(h.ctx, contracts.CallKey(sub.RunID, sub.Step, c.CallID), rec); err != nil {
		h.t.Fatalf("write call %s: %v", c.CallID, err)
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
	h.t.Helper()
	id := fmt.Sprintf("%s:%s:out:%s", sub.BatchID(), sub.Calls[index].CallID, tag)
	return h.output(id, outputOf(sub, index, parallel))
}

// settled waits until the publisher has settled every output up to seq.
func (h *harness) settled(seq uint64) {
	h.t.Helper()
	h.waitSettled(h.env.Names.WorkStream(), contracts.ConsumerPublisher, seq)
}

// phase is the current phase of sub's batch.
func (h *harness) phase(sub contracts.BatchSubmission) contracts.BatchPhase {
	h.t.Helper()
	rec, _ := h.batch(sub.RunID, sub.Step)
	return rec.Phase
}
