package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// testConfig is the host configuration of every gate test: one tool per gate outcome.
const testConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: counter
  - id: wc
    target: sandbox
    module: wc.wasm
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: ask_me
  - id: ask_timeout
  - id: ask_long
  - id: later
  - id: later_long
  - id: forbidden
  - id: stub
    set_result: { text: "stubbed: in maintenance" }
  - id: edit_me
    parameters:
      type: object
      properties: { path: { type: string } }
      required: [path]
      additionalProperties: false
  - id: client_pick
    kind: client_executed
  - id: delegate
    kind: delegation
    parallel_completion: true
  - id: par
    capability: replay_safe
    parallel: true
  - id: par_ask
    parallel: true
  - id: par_block
    parallel: true
  - id: two_keys
  - id: three_keys
  - id: two_keys_timeout
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask }
    - { pattern: ask_timeout, behavior: ask, timeout: 1s }
    - { pattern: ask_long, behavior: ask, timeout: 1h }
    - { pattern: later, behavior: schedule, delay: 1s }
    - { pattern: later_long, behavior: schedule, delay: 1h }
    - { pattern: forbidden, behavior: deny }
    - { pattern: 'edit_me(path ~ "/etc/*")', behavior: deny }
    - { pattern: edit_me, behavior: ask }
    - { pattern: 'delegate(task = "risky")', behavior: ask }
    - { pattern: par_ask, behavior: ask }
    - { pattern: par_block, behavior: deny }
    - { pattern: two_keys, behavior: ask, approvals: 2 }
    - { pattern: three_keys, behavior: ask, approvals: 3 }
    - { pattern: two_keys_timeout, behavior: ask, approvals: 2, timeout: 2s }
executors:
  sandbox:
    enabled: true
`

const (
	waitLong  = servicetest.WaitTimeout
	testRunID = "run-1"
)

// service is the gate as its tests run it: four workers a consumer.
var service = servicetest.Service[*Service, bus.DeliveryOption]{
	Name: ServiceName, Start: startOnEnv, Defaults: []bus.DeliveryOption{bus.WithWorkers(4)},
}

// startOnEnv starts the gate on the dependencies of env.
func startOnEnv(ctx context.Context, env *pipeline.Env, opts ...bus.DeliveryOption) (*Service, error) {
	return Start(ctx, DepsOf(env), opts...)
}

// harness is the shared service harness running the gate on testConfig.
type harness struct {
	*servicetest.Harness[*Service, bus.DeliveryOption]
	seq atomic.Int64
	// live hears the live facts of every run (tool_call: never stored).
	live *servicetest.Live
	// clocked records batches at the harness clock's time instead of the real time
	// ([harness.inMidHour]).
	clocked bool
}

// errInjected is the error of every fault the harness injects.
var errInjected = servicetest.ErrInjected

// newHarness starts a server and (unless [servicetest.Stopped]) one gate on it.
func newHarness(t *testing.T, opts ...servicetest.Option) *harness {
	h := &harness{Harness: servicetest.Start(t, service, append([]servicetest.Option{servicetest.WithConfig(testConfig)}, opts...)...)}
	h.live = servicetest.Listen(t, h.NC, h.Env.Names.FactsWildcard())
	return h
}

// --- building batches -------------------------------------------------------------------

func call(id, tool, args string) contracts.ToolCall {
	return contracts.ToolCall{CallID: id, ToolID: tool, Arguments: json.RawMessage(args)}
}

// visibleTools is every configured tool plus "nosuch", which no executor registers.
func (h *harness) visibleTools() []string {
	ids := []string{"nosuch"}
	for _, t := range h.Env.Config.Tools {
		ids = append(ids, t.ID)
	}
	return ids
}

func (h *harness) submission(step int64, calls ...contracts.ToolCall) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: testRunID, ThreadID: "thread-1", Step: step,
		Agent:     contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: h.visibleTools()},
		Narrowing: contracts.NarrowingConfigured,
		Calls:     calls,
	}
}

// storeDelegates stores step 1 of one delegate call per task (call_1, call_2, …): with two
// or more, a batch that qualifies for the parallel probe.
func (h *harness) storeDelegates(tasks ...string) *contracts.BatchRecord {
	h.T.Helper()
	calls := make([]contracts.ToolCall, len(tasks))
	for i, task := range tasks {
		calls[i] = call(fmt.Sprintf("call_%d", i+1), "delegate", `{"task":"`+task+`"}`)
	}
	return h.store(h.submission(1, calls...))
}

// store writes the batch record of sub as the batcher would: pins from the trusted
// configuration, the dispatch mode (parallel delegation, declared parallel), phase open.
func (h *harness) store(sub contracts.BatchSubmission) *contracts.BatchRecord {
	h.T.Helper()
	if h.clocked {
		return h.storeAt(sub, h.Env.Now())
	}
	return h.storeAt(sub, time.Now().UTC())
}

// inMidHour moves the harness clock to the middle of its current hour and records every
// later batch at the clock's time, so a test of hourly windows has half an hour before
// the next boundary whatever the real time. It returns the start of that hour.
func (h *harness) inMidHour() time.Time {
	h.T.Helper()
	now := h.Env.Now()
	hour := now.Truncate(time.Hour)
	h.Advance(hour.Add(30 * time.Minute).Sub(now))
	h.clocked = true
	return hour
}

// storeAt records sub as recorded at createdAt (the harness clock's time, for a test that
// moves it: the windows of rate limits and windowed budgets are the batch's).
func (h *harness) storeAt(sub contracts.BatchSubmission, createdAt time.Time) *contracts.BatchRecord {
	h.T.Helper()
	rec := contracts.BatchRecord{Submission: sub, Hash: sub.Hash(), Phase: contracts.BatchPhaseOpen, CreatedAt: createdAt}
	parallel := len(sub.Calls) > 1
	for _, c := range sub.Calls {
		pin := h.Env.Config.Pin(c.ToolID)
		rec.Pinned = append(rec.Pinned, pin)
		t, ok := h.Env.Config.Tool(c.ToolID)
		if !ok || t.Kind != contracts.KindDelegation || !t.ParallelCompletion || c.ToolID != sub.Calls[0].ToolID {
			parallel = false
		}
	}
	declared := len(sub.Calls) > 1
	for _, c := range sub.Calls {
		if t, ok := h.Env.Config.Tool(c.ToolID); !ok || !t.Parallel {
			declared = false
		}
	}
	rec.Parallel, rec.ParallelDeclared = parallel || declared, declared
	h.accept(rec)
	return &rec
}

// published moves rec's batch to where the publisher leaves it: finalized and released on
// the run record, archived as published (without looking at its calls).
func (h *harness) published(rec *contracts.BatchRecord) {
	h.T.Helper()
	sub := &rec.Submission
	if _, _, err := h.Env.Runs.Update(h.Ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, _ bool) error {
		if b := cur.Holds(sub.Step); b != nil {
			b.Phase, cur.ActiveStep = contracts.BatchPhaseFinalized, nil
		}
		return nil
	}); err != nil {
		h.T.Fatal(err)
	}
	done := *rec
	done.Phase = contracts.BatchPhasePublished
	if _, err := h.Env.ArchiveBatch(h.Ctx, done); err != nil {
		h.T.Fatal(err)
	}
	rec.Phase = contracts.BatchPhasePublished
}

// accept records rec as the batcher does: the run's claim and the batch record in one
// write on the run record. Many gate tests keep several batches of one run open at once,
// which the batcher never allows: a batch the run refuses as busy is written straight to
// the batches bucket instead, where the gate reads it all the same ([pipeline.ReadBatch]);
// the tests of the run lifecycle (cancel) use one open batch per run.
//
// The write is a plain key-value update, not the announced revision the batcher's
// [pipeline.Env.AcceptBatch] writes: the test decides when the gate gets the batch
// ([harness.gate] of call 0, [harness.probe]), after setting up whatever state it needs.
func (h *harness) accept(rec contracts.BatchRecord) {
	h.T.Helper()
	sub := &rec.Submission
	kv, err := h.JS.KeyValue(h.Ctx, h.Env.Names.RunsBucket())
	if err != nil {
		h.T.Fatal(err)
	}
	runs := state.NewStore[contracts.RunRecord](kv, state.WithJetStream(h.JS))
	busy := false
	if _, _, err := runs.Update(h.Ctx, contracts.RunKey(sub.RunID), func(cur *contracts.RunRecord, exists bool) error {
		busy = false
		if !exists {
			cur.RunID = sub.RunID
		}
		if cur.ActiveStep != nil {
			busy = true
			return state.ErrNoChange
		}
		if prev := cur.Batch; prev != nil {
			if _, err := h.Env.ArchiveBatch(h.Ctx, *prev); err != nil {
				return err
			}
		}
		return cur.Open(rec)
	}); err != nil {
		h.T.Fatalf("store batch %s: %v", sub.BatchID(), err)
	}
	if busy {
		// Another batch of the run is open: keep this one in the archive, where the gate
		// reads it all the same.
		if _, err := h.Env.Batches.Create(h.Ctx, contracts.BatchKey(sub.RunID, sub.Step), rec); err != nil {
			h.T.Fatalf("store batch %s: %v", sub.BatchID(), err)
		}
	}
}

// --- publishing inputs ------------------------------------------------------------------

// publish stores an event on subject and returns its stream sequence.
func (h *harness) publish(subject, id, typ string, payload any) uint64 {
	h.T.Helper()
	ev, err := cloudevent.NewEvent(id, "awaken/test", typ, payload)
	if err != nil {
		h.T.Fatalf("event: %v", err)
	}
	ack, err := h.JS.PublishMsg(h.Ctx, cloudevent.EncodeMsg(subject, ev))
	if err != nil {
		h.T.Fatalf("publish %s: %v", subject, err)
	}
	return ack.Sequence
}

// uniq returns a fresh message id, so the stream does not deduplicate a re-sent input.
func (h *harness) uniq(base string) string { return fmt.Sprintf("%s#%d", base, h.seq.Add(1)) }

// gate asks the gate to gate call index of b. Call 0 is asked for as the pipeline asks:
// a revision of the run record that records b (each call a new one, so a second call is a
// redelivery the stream cannot deduplicate), consumed by the running gate. A later call is
// gated directly, in the test's goroutine: in the pipeline only call index-1's terminal
// revision asks for it (and does so by itself once the gate writes or an executor commits
// it), while these tests also gate calls whose predecessor they left executing.
func (h *harness) gate(b *contracts.BatchRecord, index int) {
	h.T.Helper()
	if index == 0 {
		h.recordAgain(b)
		return
	}
	svc := h.Svc
	if svc == nil {
		h.T.Fatal("gate: no gate service started")
	}
	if err := svc.gateCall(withCall(h.Ctx, b, index), b, index, false); err != nil {
		h.T.Fatalf("gate call %d of %s: %v", index, b.Submission.BatchID(), err)
	}
}

// probe asks the gate to probe the parallel batch b: the revision that records it.
func (h *harness) probe(b *contracts.BatchRecord) {
	h.T.Helper()
	if !b.Parallel {
		h.T.Fatalf("probe of %s, which is not a parallel batch", b.Submission.BatchID())
	}
	h.recordAgain(b)
}

// recordAgain writes the run record of b again as the revision that records b
// ([contracts.TypeBatchRecorded]), with the run record's current content, and returns its
// stream sequence.
func (h *harness) recordAgain(b *contracts.BatchRecord) uint64 {
	h.T.Helper()
	sub := &b.Submission
	run, _, err := h.Env.Runs.Get(h.Ctx, contracts.RunKey(sub.RunID))
	if err != nil {
		h.T.Fatalf("run record of %s: %v", sub.BatchID(), err)
	}
	if run.Holds(sub.Step) == nil {
		// A batch kept in the archive (another batch of the run is open): the revision
		// carries it all the same, as the batcher would have recorded it.
		open := *b
		run.Batch = &open
	}
	return h.publish(h.Env.Names.RunRecordSubject(sub.RunID),
		h.uniq(pipeline.BatchRecordedID(sub.BatchID())), contracts.TypeBatchRecorded, run)
}

func (h *harness) resume(id string, cmd contracts.ResumeCommand) {
	h.publish(h.Env.Names.TicketResumeSubject(), id, contracts.TypeTicketResume, cmd)
}

func (h *harness) cancelRun(id, runID string) {
	h.publish(h.Env.Names.RunCancelSubject(), id, contracts.TypeRunCancel, contracts.RunCancel{RunID: runID})
}

func (h *harness) fireTimer(id, corr, kind string) {
	h.publish(h.Env.Names.TicketExpireSubject(), id, contracts.TypeTicketExpire, contracts.TicketTimer{CorrelationID: corr, Kind: kind})
}

func op(b *contracts.BatchRecord, i int) string {
	return contracts.OperationID(b.Submission.RunID, b.Submission.Step, b.Submission.Calls[i].CallID)
}

func allow(t contracts.ResumeTicket) contracts.ResumeCommand {
	return contracts.ResumeCommandFromTicket(t, contracts.ResumeResult{Permission: &contracts.PermissionDecision{Decision: contracts.DecisionAllow, Note: "ok"}})
}

func deny(t contracts.ResumeTicket, reason string) contracts.ResumeCommand {
	return contracts.ResumeCommandFromTicket(t, contracts.ResumeResult{Permission: &contracts.PermissionDecision{Decision: contracts.DecisionDeny, Reason: reason}})
}

// --- reading state and outputs ----------------------------------------------------------

func (h *harness) call(b *contracts.BatchRecord, i int) (contracts.CallRecord, bool) {
	h.T.Helper()
	rec, _, err := h.Env.Calls.Get(h.Ctx, callKey(b, i))
	if errors.Is(err, state.ErrNotFound) {
		return contracts.CallRecord{}, false
	}
	if err != nil {
		h.T.Fatalf("read call: %v", err)
	}
	return rec, true
}

func (h *harness) mustCall(b *contracts.BatchRecord, i int) contracts.CallRecord {
	h.T.Helper()
	rec, ok := h.call(b, i)
	if !ok {
		h.T.Fatalf("call %d of %s has no record", i, b.Submission.BatchID())
	}
	return rec
}

func (h *harness) ticket(corr string) (contracts.ResumeTicket, bool) {
	h.T.Helper()
	t, _, err := h.Env.Tickets.Get(h.Ctx, corr)
	if errors.Is(err, state.ErrNotFound) {
		return contracts.ResumeTicket{}, false
	}
	if err != nil {
		h.T.Fatalf("read ticket: %v", err)
	}
	return t, true
}

// waitCall waits until call i's record satisfies cond and returns it.
func (h *harness) waitCall(b *contracts.BatchRecord, i int, what string, cond func(contracts.CallRecord) bool) contracts.CallRecord {
	h.T.Helper()
	var rec contracts.CallRecord
	natstest.WaitFor(h.T, waitLong, func() bool {
		r, ok := h.call(b, i)
		rec = r
		return ok && cond(r)
	}, fmt.Sprintf("call %d %s", i, what))
	return rec
}

func isPhase(k contracts.PhaseKind) func(contracts.CallRecord) bool {
	return func(r contracts.CallRecord) bool { return r.Phase.Kind == k }
}

// msg is one stored message with its decoded envelope.
type msg = servicetest.Stored

func decodeAs[T any](t *testing.T, m msg) T { return servicetest.Decode[T](t, m.Event) }

// execRequests returns the executor requests of every target for the test run.
func (h *harness) execRequests() []msg {
	return servicetest.ExecRequests(h.T, h.Ctx, h.JS, h.Env.Names, testRunID)
}

// outputs returns the call outputs of the test run: the terminal call-record revisions,
// each with the CallOutput it announces as its data.
func (h *harness) outputs() []msg { return h.CallOutputs(testRunID) }

func (h *harness) audits() []contracts.AuditRecord {
	var out []contracts.AuditRecord
	for _, m := range h.Messages(h.Env.Names.AuditStream(), h.Env.Names.AuditSubject(testRunID)) {
		out = append(out, decodeAs[contracts.AuditRecord](h.T, m))
	}
	return out
}

// auditsOf returns the audit decisions recorded for callID, in order.
func (h *harness) auditsOf(callID string) []string {
	var out []string
	for _, a := range h.audits() {
		if a.CallID == callID {
			out = append(out, a.Decision)
		}
	}
	return out
}

// facts returns the facts of testRunID: the stored ones (awaiting) and then the live ones
// heard so far (tool_call).
func (h *harness) facts() []contracts.AgentEvent {
	var out []contracts.AgentEvent
	for _, m := range append(h.Messages(h.Env.Names.EventsStream(), h.Env.Names.EventsSubject(testRunID)),
		h.live.Events(h.Env.Names.FactsSubject(testRunID))...) {
		if m.Event.Type == contracts.TypeAgentEvent {
			out = append(out, decodeAs[contracts.AgentEvent](h.T, m))
		}
	}
	return out
}

// storedFacts returns the facts stored on testRunID's events subject.
func (h *harness) storedFacts() []contracts.AgentFact {
	var out []contracts.AgentFact
	for _, m := range h.Messages(h.Env.Names.EventsStream(), h.Env.Names.EventsSubject(testRunID)) {
		if m.Event.Type == contracts.TypeAgentEvent {
			out = append(out, decodeAs[contracts.AgentEvent](h.T, m).Event)
		}
	}
	return out
}

// runEnded returns the io.awaken.run.ended.v1 events stored for runID.
func (h *harness) runEnded(runID string) []contracts.RunEndedEvent {
	var out []contracts.RunEndedEvent
	for _, m := range h.Messages(h.Env.Names.EventsStream(), h.Env.Names.EventsSubject(runID)) {
		if m.Event.Type == contracts.TypeRunEnded {
			if m.Event.ID != runID+":ended" || m.Event.Source != "awaken/gate" {
				h.T.Errorf("run.ended id %q source %q", m.Event.ID, m.Event.Source)
			}
			out = append(out, decodeAs[contracts.RunEndedEvent](h.T, m))
		}
	}
	return out
}

func (h *harness) factsOf(callID string) []contracts.AgentFact {
	var out []contracts.AgentFact
	for _, f := range h.facts() {
		if f.Event.ID == callID || f.Event.PendingToolUseID == callID {
			out = append(out, f.Event)
		}
	}
	return out
}

// answer is a ticket.resolved or ticket.rejected event.
type answer struct {
	kind string // "resolved" or "rejected"
	res  contracts.TicketResolution
}

func (h *harness) answers() []answer {
	var out []answer
	for _, m := range h.Messages(h.Env.Names.TicketsStream(), h.Env.Names.Prefix+".tickets.>") {
		switch m.Event.Type {
		case contracts.TypeTicketResolved:
			out = append(out, answer{"resolved", decodeAs[contracts.TicketResolution](h.T, m)})
		case contracts.TypeTicketRejected:
			out = append(out, answer{"rejected", decodeAs[contracts.TicketResolution](h.T, m)})
		}
	}
	return out
}

// waitAnswer waits for the answer to resume command resumeID.
func (h *harness) waitAnswer(resumeID string) answer {
	h.T.Helper()
	var got answer
	natstest.WaitFor(h.T, waitLong, func() bool {
		for _, a := range h.answers() {
			if a.res.ResumeID == resumeID {
				got = a
				return true
			}
		}
		return false
	}, "answer to "+resumeID)
	return got
}

func (h *harness) opened() []contracts.ResumeTicket {
	var out []contracts.ResumeTicket
	for _, m := range h.Messages(h.Env.Names.TicketsStream(), h.Env.Names.TicketOpenedSubject()) {
		out = append(out, decodeAs[contracts.ResumeTicket](h.T, m))
	}
	return out
}

// quiet waits until every gate consumer has delivered and settled all its messages, so
// that counting outputs afterwards proves that nothing more will come.
func (h *harness) quiet() {
	h.T.Helper()
	n := h.Env.Names
	consumers := []struct{ stream, durable string }{
		{n.RunRecordsStream(), contracts.ConsumerGateBatches},
		{n.CallRecordsStream(), contracts.ConsumerGateOutputs},
		{n.ControlStream(), contracts.ConsumerGateResume},
		{n.TimersStream(), contracts.ConsumerGateTimers},
		{n.ControlStream(), contracts.ConsumerGateControl},
	}
	natstest.WaitFor(h.T, waitLong, func() bool {
		for _, c := range consumers {
			cons, err := h.JS.Consumer(h.Ctx, c.stream, c.durable)
			if err != nil {
				return false
			}
			info, err := cons.Info(h.Ctx)
			if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
				return false
			}
		}
		return true
	}, "gate consumers to settle")
}

// outputText is the text of a Completed call's output.
func outputText(rec contracts.CallRecord) string {
	if rec.Phase.Output == nil {
		return ""
	}
	return rec.Phase.Output.Text()
}

func count[T any](xs []T, pred func(T) bool) int {
	n := 0
	for _, x := range xs {
		if pred(x) {
			n++
		}
	}
	return n
}

func contains(xs []string, x string) bool { return slices.Contains(xs, x) }

// recordedDelivery is the first delivery of the revision that records b, as the gate's
// consumer of the run records' stream hands it over.
func recordedDelivery(t *testing.T, names contracts.Names, b *contracts.BatchRecord) bus.Delivery {
	t.Helper()
	open := *b
	run := contracts.RunRecord{RunID: b.Submission.RunID, ActiveStep: &open.Submission.Step, Batch: &open}
	ev, err := cloudevent.NewEvent(pipeline.BatchRecordedID(b.Submission.BatchID()), "awaken/test", contracts.TypeBatchRecorded, run)
	if err != nil {
		t.Fatal(err)
	}
	return bus.Delivery{Event: ev, NumDelivered: 1,
		Subject: names.RunRecordSubject(b.Submission.RunID)}
}

// outputDelivery is the first delivery of rec, the terminal record of call index of b, as
// the gate's consumer of the call records' stream hands it over.
func outputDelivery(t *testing.T, names contracts.Names, b *contracts.BatchRecord, index int, rec contracts.CallRecord) bus.Delivery {
	t.Helper()
	ev, err := cloudevent.NewEvent(pipeline.OutputID(op(b, index)), "awaken/test", contracts.TypeCallOutput, rec)
	if err != nil {
		t.Fatal(err)
	}
	return bus.Delivery{Event: ev, NumDelivered: 1, Subject: names.CallRecordSubject(callKey(b, index))}
}

// waitTicket waits until ticket corr exists: a parked call's ticket is created after its
// record is committed.
func (h *harness) waitTicket(corr string) contracts.ResumeTicket {
	h.T.Helper()
	var tk contracts.ResumeTicket
	natstest.WaitFor(h.T, waitLong, func() bool {
		var ok bool
		tk, ok = h.ticket(corr)
		return ok
	}, "ticket "+corr)
	return tk
}
