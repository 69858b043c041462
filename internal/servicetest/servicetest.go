// Package servicetest is the shared test harness of the pipeline services: one embedded
// JetStream server with the awaken topology in memory, a pipeline environment on the
// trusted configuration the test gives, a scriptable fault hook, and the reads and writes
// the service tests make on streams and records. Only tests import it.
package servicetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// WaitTimeout bounds every wait of the service tests: generous for a 2-core machine under
// the race detector and loaded by other tests (the publisher's largest batches took over
// 20 s at a load of 22), never reached when the code is right.
const WaitTimeout = 45 * time.Second

// ErrInjected is the error of every fault the hook injects.
var ErrInjected = errors.New("injected crash")

// PipelineConfig is a trusted host configuration for service tests: tools on both
// targets, a delegation tool with parallel completion and one without, a tool that
// declares parallel, everything allowed.
const PipelineConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 4 }
  - id: counter
  - id: wc
    target: sandbox
    module: wc.wasm
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 2 }
  - id: delegate
    kind: delegation
    parallel_completion: true
  - id: serial_delegate
    kind: delegation
  - id: lookup
    capability: replay_safe
    parallel: true
policy:
  default_behavior: allow
`

// Kit is one embedded JetStream server with the awaken topology and an environment whose
// fault hook follows the rules the test sets. A service's harness embeds it.
type Kit struct {
	T      *testing.T
	Ctx    context.Context
	Server *natstest.Server
	NC     *nats.Conn
	JS     jetstream.JetStream
	Env    *pipeline.Env
	// service is the only service the fault hook expects to be called by.
	service string
	faults  *faults
	clock   *clock
}

// New starts a server, ensures the topology (memory storage; topo may set e.g. a short
// duplicate window) and builds the environment of configYAML for service.
func New(t *testing.T, service, configYAML string, topo bus.TopologyConfig) *Kit {
	t.Helper()
	ctx := t.Context()
	srv, env := NewEnv(t, ctx, ParseConfig(t, configYAML), topo, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	k := &Kit{T: t, Ctx: ctx, Server: srv, NC: env.Conn, JS: env.JS, Env: env, service: service,
		faults: &faults{hits: map[string]int{}}, clock: &clock{}}
	env.Faults = k.fault
	env.OnHandOffMismatch = func(m pipeline.HandOffMismatch) { t.Errorf("hand-off mismatch: %v", m) }
	env.Now = k.clock.now
	env.Service = service
	return k
}

// NewEnv starts a server for tb, ensures the awaken topology of cfg on it (memory storage;
// topo may set e.g. a short duplicate window) and binds a pipeline environment on a
// connection of its own, logging to log; ctx bounds the setup and the environment's
// reads. The base of every service test's environment ([New], exectest).
func NewEnv(tb testing.TB, ctx context.Context, cfg *config.Config, topo bus.TopologyConfig, log zerolog.Logger) (*natstest.Server, *pipeline.Env) {
	tb.Helper()
	srv := natstest.Start(tb)
	nc, js := srv.Conn(tb)
	topo.Storage = jetstream.MemoryStorage
	if err := bus.EnsureTopology(ctx, js, cfg.Names(), topo); err != nil {
		tb.Fatalf("topology: %v", err)
	}
	env, err := pipeline.NewEnv(ctx, nc, js, cfg, log)
	if err != nil {
		tb.Fatalf("env: %v", err)
	}
	return srv, env
}

// In returns a view of k that reports failures to t (a subtest); the fault rules are
// shared.
func (k *Kit) In(t *testing.T) *Kit {
	v := *k
	v.T = t
	return &v
}

// Publish stores e on subject and returns its stream sequence. A deduplicated publish
// fails the test: tests use fresh ids.
func (k *Kit) Publish(subject string, e cloudevent.Event) uint64 {
	k.T.Helper()
	ack, err := k.JS.PublishMsg(k.Ctx, cloudevent.EncodeMsg(subject, e))
	if err != nil {
		k.T.Fatalf("publish %s on %s: %v", e.ID, subject, err)
	}
	if ack.Duplicate {
		k.T.Fatalf("publish %s on %s: deduplicated by the stream; tests use fresh ids", e.ID, subject)
	}
	return ack.Sequence
}

// PublishRaw stores m as is and returns its stream sequence.
func (k *Kit) PublishRaw(m *nats.Msg) uint64 {
	k.T.Helper()
	ack, err := k.JS.PublishMsg(k.Ctx, m)
	if err != nil {
		k.T.Fatalf("publish raw on %s: %v", m.Subject, err)
	}
	return ack.Sequence
}

// Submit publishes sub with ce-id id on the submit subject and returns its stream
// sequence.
func (k *Kit) Submit(id string, sub contracts.BatchSubmission) uint64 {
	k.T.Helper()
	return k.Publish(k.Env.Names.SubmitSubject(), k.event(id, "test/platform", contracts.TypeBatchRequested, sub))
}

// Output announces out as an executor or the gate does — a terminal revision of the
// call's record with ce-type CallOutput and ce-id id on the calls bucket's stream — and
// returns its stream sequence. The revision repeats the record as it is stored (a
// Completed record with an empty text when there is none), with Index, CallID, ToolID and
// Parallel taken from out, so a test can also announce an output that does not fit the
// batch.
func (k *Kit) Output(id string, out contracts.CallOutput) uint64 {
	k.T.Helper()
	key := contracts.CallKey(k.Env.Config.Pin(out.ToolID).Target, out.RunID, out.Step, out.CallID)
	rec, _, err := k.Env.Calls.Get(k.Ctx, key)
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		k.T.Fatalf("output %s: read call %s: %v", id, key, err)
	}
	phase := rec.Phase
	if err != nil {
		phase = contracts.CompletedPhase(contracts.TextOutput(out.CallID, ""))
	}
	// Rebuilt with out's call: a test may announce an output that does not fit the batch.
	rec = contracts.CallRecord{Index: out.Index, CallID: out.CallID, ToolID: out.ToolID, Phase: phase,
		Policy: k.Env.Config.Pin(out.ToolID).Policy, Decision: rec.Decision, Timeline: rec.Timeline}
	if out.Parallel {
		rec.RunOutsideSequence()
	}
	data, err := json.Marshal(rec)
	if err != nil {
		k.T.Fatal(err)
	}
	ev := k.event(id, "test/executor", contracts.TypeCallOutput, nil)
	ev.Data = data
	m := cloudevent.EncodeMsg(contracts.RecordSubject(k.Env.Names.CallsBucket(), key), ev)
	m.Header.Del(jetstream.MsgIDHeader) // as state.Store writes a record revision
	return k.PublishRaw(m)
}

func (k *Kit) event(id, source, typ string, payload any) cloudevent.Event {
	k.T.Helper()
	ev, err := cloudevent.NewEvent(id, source, typ, payload)
	if err != nil {
		k.T.Fatal(err)
	}
	return ev
}

// WaitSettled waits until durable has settled (acked or terminated) every message up to
// stream sequence seq.
func (k *Kit) WaitSettled(stream, durable string, seq uint64) {
	k.T.Helper()
	natstest.WaitFor(k.T, WaitTimeout, func() bool {
		c, err := k.JS.Consumer(k.Ctx, stream, durable)
		if err != nil {
			return false
		}
		info, err := c.Info(k.Ctx)
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	}, fmt.Sprintf("%s to settle stream sequence %d", durable, seq))
}

// Stored is one message read back from a stream. Event is the zero value for a raw
// message that is not a CloudEvent (a dead letter keeps what it was given).
type Stored struct {
	Seq     uint64
	Subject string
	Header  nats.Header
	Event   cloudevent.Event
}

// Messages reads every message on subject (exact) of stream, in stream order.
func (k *Kit) Messages(stream, subject string) []Stored {
	k.T.Helper()
	return k.read(stream, subject, true)
}

// WaitMessages waits until subject of stream holds at least n messages and returns them.
func (k *Kit) WaitMessages(stream, subject string, n int) []Stored {
	k.T.Helper()
	var got []Stored
	natstest.WaitFor(k.T, WaitTimeout, func() bool {
		got = k.Messages(stream, subject)
		return len(got) >= n
	}, fmt.Sprintf("%d messages on %s", n, subject))
	return got
}

// DeadLetters returns the dead-lettered messages of consumer.
func (k *Kit) DeadLetters(consumer string) []Stored {
	k.T.Helper()
	return k.read(k.Env.Names.DeadLetterStream(), k.Env.Names.DeadLetterSubject(consumer), false)
}

func (k *Kit) read(stream, subject string, strict bool) []Stored {
	k.T.Helper()
	return ReadStored(k.T, k.Ctx, k.JS, stream, subject, strict)
}

// ReadStored reads every message on subject (a subject or a wildcard) of stream, in
// stream order; strict fails t on a message that is not a CloudEvent.
func ReadStored(t testing.TB, ctx context.Context, js jetstream.JetStream, stream, subject string, strict bool) []Stored {
	t.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	var out []Stored
	for seq := uint64(1); ; {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatalf("read %s from %d: %v", subject, seq, err)
		}
		ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
		if err != nil && strict {
			t.Fatalf("decode message %d on %s: %v", m.Sequence, subject, err)
		}
		out = append(out, Stored{Seq: m.Sequence, Subject: m.Subject, Header: m.Header, Event: ev})
		seq = m.Sequence + 1
	}
}

// BatchesRecorded returns the revisions of run's record that record a batch (written as
// [contracts.TypeBatchRecorded]: the gate's work), in stream order, as the runs bucket
// still holds them (its history).
func BatchesRecorded(t testing.TB, ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) []Stored {
	t.Helper()
	var out []Stored
	for _, m := range ReadStored(t, ctx, js, names.RunRecordsStream(), names.RunRecordSubject(run), false) {
		if m.Event.Type == contracts.TypeBatchRecorded {
			out = append(out, m)
		}
	}
	return out
}

// CallOutputs returns the outputs of run's calls in stream order: every call-record
// revision written as a CallOutput (the terminal ones), each as a Stored whose event data
// is the [contracts.CallOutput] it announces (pipeline.CallOutputOf) rather than the
// record. Revisions that hand nothing on are skipped.
func CallOutputs(t testing.TB, ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) []Stored {
	t.Helper()
	return callRevisions(t, ctx, js, names, run, contracts.TypeCallOutput, func(d bus.Delivery) (contracts.CallOutput, error) {
		return pipeline.CallOutputOf(names, d)
	})
}

// ExecRequests returns the executor requests of run's calls in stream order: every
// call-record revision written as an executor request (the gate's entries), each as a
// Stored whose event data is the [contracts.ExecRequest] it carries
// (execcore.RequestOf) rather than the record.
func ExecRequests(t testing.TB, ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) []Stored {
	t.Helper()
	return callRevisions(t, ctx, js, names, run, contracts.TypeExecRequest, func(d bus.Delivery) (contracts.ExecRequest, error) {
		req, _, err := execcore.RequestOf(names, d)
		return req, err
	})
}

// callRevisions returns the revisions of run's call records written with ce-type typ, in
// stream order, each as a Stored whose event data is the message payload decodes from the
// revision (what it hands on) rather than the record.
func callRevisions[P any](t testing.TB, ctx context.Context, js jetstream.JetStream, names contracts.Names, run, typ string, payload func(bus.Delivery) (P, error)) []Stored {
	t.Helper()
	var out []Stored
	for _, m := range ReadStored(t, ctx, js, names.CallRecordsStream(), names.CallRecordSubject(contracts.CallKeysOfRun(run)), false) {
		if m.Event.Type != typ {
			continue
		}
		p, err := payload(bus.Delivery{Event: m.Event, Subject: m.Subject})
		if err != nil {
			t.Fatalf("%s revision %d on %s: %v", typ, m.Seq, m.Subject, err)
		}
		if m.Event.Data, err = json.Marshal(p); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// CallOutputs returns the outputs of run's calls (see [CallOutputs]).
func (k *Kit) CallOutputs(run string) []Stored {
	k.T.Helper()
	return CallOutputs(k.T, k.Ctx, k.JS, k.Env.Names, run)
}

// Batch returns the batch record of (run, step), wherever it lives (see
// [pipeline.ReadBatch]), and the revision of the record it was read from: the run
// record's while the run holds the batch open, the archive's after.
func (k *Kit) Batch(run string, step int64) (contracts.BatchRecord, uint64) {
	k.T.Helper()
	r, rev, err := k.Env.Runs.Get(k.Ctx, contracts.RunKey(run))
	if err == nil {
		if b := r.Holds(step); b != nil && b.Phase == contracts.BatchPhaseOpen {
			return *b, rev
		}
	}
	rec, rev, err := k.Env.Batches.Get(k.Ctx, contracts.BatchKey(run, step))
	if err == nil {
		return rec, rev
	}
	if b := r.Holds(step); b != nil {
		_, rrev, _ := k.Env.Runs.Get(k.Ctx, contracts.RunKey(run))
		return *b, rrev
	}
	k.T.Fatalf("batch record %s: %v", contracts.BatchID(run, step), err)
	return contracts.BatchRecord{}, 0
}

// AcceptBatch records rec, an open batch, as the batcher does (the run's claim and the
// batch record in one write, [pipeline.Env.AcceptBatch]), failing the test if the run
// does not take it.
func (k *Kit) AcceptBatch(rec contracts.BatchRecord) {
	k.T.Helper()
	res, err := k.Env.AcceptBatch(k.Ctx, rec)
	if err != nil {
		k.T.Fatalf("accept batch %s: %v", rec.Submission.BatchID(), err)
	}
	if !res.Created {
		k.T.Fatalf("accept batch %s: not recorded (%+v)", rec.Submission.BatchID(), res)
	}
}

// Decode unmarshals the data of an event into a T.
func Decode[T any](t testing.TB, ev cloudevent.Event) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", ev.ID, err)
	}
	return v
}

// Call is a call of tool with call id id and small arguments.
func Call(id, tool string) contracts.ToolCall {
	return contracts.ToolCall{CallID: id, ToolID: tool, Arguments: json.RawMessage(`{"text":"hi"}`)}
}

// Submission is a valid batch of calls for (run, step) in thread "thread-1"; every tool
// is visible to the model.
func Submission(run string, step int64, calls ...contracts.ToolCall) contracts.BatchSubmission {
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

// CallJSON is a call of tool with call id id whose arguments are args encoded as JSON.
func CallJSON(id, tool string, args any) contracts.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("servicetest: arguments of %s: %v", id, err))
	}
	return contracts.ToolCall{CallID: id, ToolID: tool, Arguments: b}
}

// Context returns a context that ends after d or with the test.
func Context(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// ParseConfig is the host configuration of yaml, failing tb if it does not parse.
func ParseConfig(tb testing.TB, yaml string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		tb.Fatalf("config: %v", err)
	}
	return cfg
}

// LogEnv names the environment variable that asks for the logs of the services under
// test; its value is the level.
const LogEnv = "AWAKEN_TEST_LOG"

// LogWriter sends what is written to tb.Log, only when the environment variable [LogEnv]
// asks for logs: a stack of services logs a lot, and a passing test should stay quiet.
func LogWriter(tb testing.TB) io.Writer { return logWriter{tb} }

type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	if os.Getenv(LogEnv) != "" {
		w.tb.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// ProgressEvents reads the io.awaken.tool.progress.v1 events stored on the events subject
// of runID, in stream order, and how many other events that subject holds.
func ProgressEvents(t testing.TB, js jetstream.JetStream, names contracts.Names, runID string) (progress []contracts.ToolProgress, others int) {
	t.Helper()
	for _, m := range ReadStored(t, Context(t, WaitTimeout), js, names.EventsStream(), names.EventsSubject(runID), true) {
		if m.Event.Type != contracts.TypeToolProgress {
			others++
			continue
		}
		progress = append(progress, Decode[contracts.ToolProgress](t, m.Event))
	}
	return progress, others
}

// CheckProgress asserts that events are the throttled reports of one call that reported
// steps times, "step i of steps" for progress i, over at most elapsed: fewer events than
// reports, no more than one per interval (plus the first and the last), increasing, and
// the last report among them.
func CheckProgress(t testing.TB, events []contracts.ToolProgress, callID string, steps int, elapsed, interval time.Duration) {
	t.Helper()
	if len(events) == 0 {
		t.Fatalf("no progress event of %s", callID)
	}
	if limit := int(elapsed/interval) + 2; len(events) >= steps || len(events) > limit {
		t.Errorf("%d progress events for %d reports in %s, want fewer than the reports and at most %d", len(events), steps, elapsed, limit)
	}
	for i, p := range events {
		if p.CallID != callID || p.Total != float64(steps) || p.Message != fmt.Sprintf("step %v of %d", p.Progress, steps) {
			t.Errorf("progress event %d: %+v", i, p)
		}
		if i > 0 && p.Progress <= events[i-1].Progress {
			t.Errorf("progress went from %v to %v", events[i-1].Progress, p.Progress)
		}
	}
	if last := events[len(events)-1]; last.Progress != float64(steps) {
		t.Errorf("the last report (%d of %d) was not published: last event %+v", steps, steps, last)
	}
}
