package batcher_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestSubmitRecordsTheBatchForTheGate shows that a valid submission becomes one batch
// record — the whole submission, its hash, and the pins resolved from the trusted
// configuration — written once as the announced run-record revision that is the gate's
// work (its first call, or the probe of a parallel-delegation batch).
func TestSubmitRecordsTheBatchForTheGate(t *testing.T) {
	h := newHarness(t)

	brain := func(mode contracts.ToolRecoveryMode, n uint16) contracts.PinnedCall {
		return contracts.PinnedCall{Known: true, Target: contracts.TargetBrain, Kind: contracts.KindRegular,
			Policy: contracts.ToolRecoveryPolicy{Mode: mode, MaxAttempts: n}}
	}
	delegation := contracts.PinnedCall{Known: true, Target: contracts.TargetBrain, Kind: contracts.KindDelegation,
		Policy: contracts.DurableRequestPolicy()}
	unknown := contracts.PinnedCall{Known: false, Policy: contracts.DefaultRecoveryPolicy()}

	tests := []struct {
		name     string
		calls    []contracts.ToolCall
		pins     []contracts.PinnedCall
		parallel bool
		declared bool
	}{
		{
			name:  "known tools on both targets and an unknown tool",
			calls: []contracts.ToolCall{call("c1", "echo"), call("c2", "wc"), call("c3", "nope"), call("c4", "counter")},
			pins: []contracts.PinnedCall{
				brain(contracts.ModeReplaySafe, 4),
				{Known: true, Target: contracts.TargetSandbox, Kind: contracts.KindRegular,
					Policy: contracts.ToolRecoveryPolicy{Mode: contracts.ModeReplaySafe, MaxAttempts: 2}},
				unknown,
				brain(contracts.ModeNeverReplay, 3),
			},
		},
		{
			name:     "every call to one delegation tool with parallel completion",
			calls:    []contracts.ToolCall{call("d1", "delegate"), call("d2", "delegate"), call("d3", "delegate")},
			pins:     []contracts.PinnedCall{delegation, delegation, delegation},
			parallel: true,
		},
		{
			name:  "delegation tool without parallel completion",
			calls: []contracts.ToolCall{call("d1", "serial_delegate"), call("d2", "serial_delegate")},
			pins:  []contracts.PinnedCall{delegation, delegation},
		},
		{
			name:  "a single delegation call",
			calls: []contracts.ToolCall{call("d1", "delegate")},
			pins:  []contracts.PinnedCall{delegation},
		},
		{
			name:  "delegation mixed with a regular tool",
			calls: []contracts.ToolCall{call("d1", "delegate"), call("e1", "echo")},
			pins:  []contracts.PinnedCall{delegation, brain(contracts.ModeReplaySafe, 4)},
		},
		{
			name:     "every call declares parallel",
			calls:    []contracts.ToolCall{call("l1", "lookup"), call("l2", "lookup"), call("l3", "lookup")},
			pins:     []contracts.PinnedCall{brain(contracts.ModeNeverReplay, 3), brain(contracts.ModeNeverReplay, 3), brain(contracts.ModeNeverReplay, 3)},
			parallel: true,
			declared: true,
		},
		{
			name:  "a call that declares parallel mixed with one that does not",
			calls: []contracts.ToolCall{call("l1", "lookup"), call("e1", "echo")},
			pins:  []contracts.PinnedCall{brain(contracts.ModeNeverReplay, 3), brain(contracts.ModeReplaySafe, 4)},
		},
		{
			name:  "a single call that declares parallel",
			calls: []contracts.ToolCall{call("l1", "lookup")},
			pins:  []contracts.PinnedCall{brain(contracts.ModeNeverReplay, 3)},
		},
		{
			name:  "unknown tool repeated",
			calls: []contracts.ToolCall{call("u1", "nope"), call("u2", "nope")},
			pins:  []contracts.PinnedCall{unknown, unknown},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			run := fmt.Sprintf("run-pins-%d", i)
			sub := submission(run, 3, tt.calls...)
			h.Submit(sub.BatchID(), sub)
			reqs := h.waitRecorded(run, 1)

			rec, _ := h.Batch(run, 3)
			if !reflect.DeepEqual(rec.Pinned, tt.pins) {
				t.Errorf("pins = %+v, want %+v", rec.Pinned, tt.pins)
			}
			if rec.Parallel != tt.parallel || rec.ParallelDeclared != tt.declared {
				t.Errorf("parallel = %v declared = %v, want %v, %v", rec.Parallel, rec.ParallelDeclared, tt.parallel, tt.declared)
			}
			if rec.Phase != contracts.BatchPhaseOpen {
				t.Errorf("phase = %q, want open", rec.Phase)
			}
			if want := decodedHash(t, sub); rec.Hash != want {
				t.Errorf("hash = %q, want %q", rec.Hash, want)
			}
			if rec.Submission.RunID != run || rec.Submission.Step != 3 || len(rec.Submission.Calls) != len(tt.calls) ||
				rec.Submission.Narrowing != contracts.NarrowingConfigured {
				t.Errorf("stored submission = %+v", rec.Submission)
			}

			// The write that recorded the batch is the gate's work: announced, with the
			// batch (and its parallel flag) in the record it carries.
			if len(reqs) != 1 {
				t.Fatalf("got %d batches recorded, want 1", len(reqs))
			}
			ev := reqs[0].Event
			got := servicetest.Decode[contracts.RunRecord](t, ev)
			wantID := pipeline.BatchRecordedID(sub.BatchID())
			if ev.ID != wantID || ev.Type != contracts.TypeBatchRecorded || ev.Source != "awaken/batcher" ||
				got.Batch == nil || got.Batch.Parallel != tt.parallel || got.Batch.ParallelDeclared != tt.declared || got.Batch.Hash != rec.Hash {
				t.Errorf("recorded revision %s %s from %s = %+v, want %s holding the batch", ev.ID, ev.Type, ev.Source, got, wantID)
			}
		})
	}
}

// decodedHash is the hash the batcher must store: that of the submission as decoded.
func decodedHash(t *testing.T, sub contracts.BatchSubmission) string {
	t.Helper()
	data, err := json.Marshal(sub)
	if err != nil {
		t.Fatal(err)
	}
	d, err := contracts.DecodeSubmission(data)
	if err != nil {
		t.Fatalf("test submission does not decode: %v", err)
	}
	return d.Hash()
}

// TestIdenticalResubmissionIsANoOp submits one batch twice under different event ids (so
// the stream does not deduplicate the second) and shows one record, untouched, recorded
// (announced to the gate) once; past open, a resubmission changes nothing either. Each
// resubmission, and only a resubmission, is answered at once with an unchanged notice
// naming its event id and the batch's phase.
func TestIdenticalResubmissionIsANoOp(t *testing.T) {
	h := newHarness(t)
	const run = "run-resubmit"
	sub := submission(run, 1, call("c1", "echo"), call("c2", "echo"))
	batchID := sub.BatchID()
	notices := h.unchangedNotices(run)

	h.Submit(batchID, sub)
	h.waitRecorded(run, 1)
	_, rev := h.Batch(run, 1)

	h.submitSettled("resubmission-1", sub)
	// The batcher publishes its notices in the order it settles the submissions, so a
	// notice for the first submission (a new batch) would be the first to arrive.
	ev, got := h.nextUnchanged(notices)
	want := contracts.BatchUnchanged{BatchID: batchID, RunID: run, EventID: "resubmission-1",
		Phase: contracts.BatchPhaseOpen, ResultsSubject: h.Env.Names.ResultsSubject(run)}
	if got != want || got.Finished() || ev.ID != "resubmission-1:unchanged" || ev.Type != contracts.TypeBatchUnchanged || ev.Source != "awaken/batcher" {
		t.Errorf("notice %s %s from %s = %+v, want %+v", ev.ID, ev.Type, ev.Source, got, want)
	}
	if _, again := h.Batch(run, 1); again != rev {
		t.Errorf("batch record rewritten by the resubmission: revision %d → %d", rev, again)
	}
	h.wantRecorded(run, 1)
	if n := len(h.rejections()); n != 0 {
		t.Errorf("identical resubmission rejected (%d rejections)", n)
	}
	if n := h.HitCount(pipeline.FaultAfterCommit, batchID); n != 1 {
		t.Errorf("batch recorded %d times, want 1 (the resubmission finds it)", n)
	}

	// Past open (the publisher finalized and archived it), a resubmission changes
	// nothing at all.
	rec, _ := h.Batch(run, 1)
	if _, _, err := h.Env.Runs.Update(h.Ctx, contracts.RunKey(run), func(cur *contracts.RunRecord, _ bool) error {
		cur.Batch.Phase, cur.ActiveStep = contracts.BatchPhaseFinalized, nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rec.Phase = contracts.BatchPhasePublished
	if _, err := h.Env.ArchiveBatch(h.Ctx, rec); err != nil {
		t.Fatal(err)
	}
	finalized := h.runRevision(run)
	h.submitSettled("resubmission-2", sub)
	// The run record still holds the batch as finalized (the next batch of the run
	// replaces it), and that is the record the batcher finds first: finished either way.
	_, got = h.nextUnchanged(notices)
	want.EventID, want.Phase = "resubmission-2", contracts.BatchPhaseFinalized
	if got != want || !got.Finished() {
		t.Errorf("notice of the finished batch = %+v, want %+v", got, want)
	}
	if n := h.HitCount(pipeline.FaultAfterCommit, batchID); n != 1 {
		t.Errorf("published batch recorded again by a resubmission (%d, want 1)", n)
	}
	if got, _ := h.Batch(run, 1); got.Phase != contracts.BatchPhasePublished {
		t.Errorf("phase = %q after resubmitting a published batch", got.Phase)
	}
	h.wantRunUnchanged(run, finalized)

	// Once the run's next batch (new: no notice) has replaced it in the run record, the
	// batch is found in the archive, published.
	next := submission(run, 2, call("c1", "echo"))
	h.submitSettled(next.BatchID(), next)
	h.submitSettled("resubmission-3", sub)
	_, got = h.nextUnchanged(notices)
	want.EventID, want.Phase = "resubmission-3", contracts.BatchPhasePublished
	if got != want || !got.Finished() {
		t.Errorf("notice of the archived batch = %+v, want %+v (and none for the new batch %s)", got, want, next.BatchID())
	}
}

// TestConflictingResubmissionIsRejected resubmits a batch id with other content: the
// platform gets a conflict rejection naming the batch, the message is dead-lettered with
// the reason, and the stored batch is untouched.
func TestConflictingResubmissionIsRejected(t *testing.T) {
	h := newHarness(t)
	const run = "run-conflict"
	first := submission(run, 2, call("c1", "echo"))
	h.Submit(first.BatchID(), first)
	h.waitRecorded(run, 1)
	_, rev := h.Batch(run, 2)

	other := submission(run, 2, call("c1", "echo"))
	other.Calls[0].Arguments = json.RawMessage(`{"text":"something else"}`)
	h.submitSettled("conflicting-1", other)

	rej := h.WaitMessages(h.Env.Names.SubmissionsStream(), h.Env.Names.RejectedSubject(), 1)
	got := servicetest.Decode[contracts.BatchRejected](t, rej[0].Event)
	want := contracts.BatchRejected{BatchID: first.BatchID(), RunID: run, Code: string(contracts.RejectConflict),
		Message: got.Message, EventID: "conflicting-1"}
	if got != want || !strings.Contains(got.Message, first.BatchID()) {
		t.Errorf("rejection = %+v, want %+v with a message naming the batch", got, want)
	}
	if ev := rej[0].Event; ev.ID != "conflicting-1:rejected" || ev.Type != contracts.TypeBatchRejected {
		t.Errorf("rejection event %s of type %s", ev.ID, ev.Type)
	}
	dead := h.DeadLetters(contracts.ConsumerBatcherSubmit)
	if len(dead) != 1 || dead[0].Header.Get(bus.HeaderDeadCode) != string(contracts.RejectConflict) ||
		dead[0].Event.ID != "conflicting-1" {
		t.Errorf("dead letters = %+v, want the conflicting submission with code conflict", dead)
	}
	if rec, again := h.Batch(run, 2); again != rev || rec.Hash != decodedHash(t, first) {
		t.Errorf("stored batch changed by a conflicting resubmission")
	}
	h.wantRecorded(run, 1)
}

// TestMalformedSubmissionsAreRejectedAndTheConsumerMovesOn sends one malformed submission
// of every kind — envelope and payload — and shows for each a rejection event with its
// code, the raw message on the dead-letter stream with the same code, and a good batch
// submitted right after it still processed.
func TestMalformedSubmissionsAreRejectedAndTheConsumerMovesOn(t *testing.T) {
	h := newHarness(t)
	names := h.Env.Names

	valid := func(run string) []byte {
		b, err := json.Marshal(submission(run, 1, call("c1", "echo")))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	withField := func(run, field, value string) []byte {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(valid(run), &m); err != nil {
			t.Fatal(err)
		}
		m[field] = json.RawMessage(value)
		b, _ := json.Marshal(m)
		return b
	}
	manyCalls := func(run string, n int) []byte {
		calls := make([]contracts.ToolCall, n)
		for i := range calls {
			calls[i] = call(fmt.Sprintf("c%d", i), "echo")
		}
		b, _ := json.Marshal(submission(run, 1, calls...))
		return b
	}
	// binary builds a binary-mode message with the usual headers; edit removes or changes
	// some of them.
	binary := func(id string, body []byte, edit func(nats.Header)) *nats.Msg {
		m := nats.NewMsg(names.SubmitSubject())
		m.Header.Set("ce-specversion", "1.0")
		m.Header.Set("ce-id", id)
		m.Header.Set("ce-source", "test/platform")
		m.Header.Set("ce-type", contracts.TypeBatchRequested)
		m.Header.Set("Content-Type", "application/json")
		m.Header.Set(jetstream.MsgIDHeader, id)
		if edit != nil {
			edit(m.Header)
		}
		m.Data = body
		return m
	}

	tests := []struct {
		name    string
		msg     func(run string) *nats.Msg
		code    contracts.RejectCode
		eventID string // "" → the message's own id
		ids     bool   // the rejection names the run and batch
		noBatch bool   // the rejection names the run only
	}{
		{name: "invalid JSON", code: contracts.RejectInvalidJSON,
			msg: func(run string) *nats.Msg { return binary("m-json", []byte(`{"run_id":"`+run+`",`), nil) }},
		{name: "invalid UTF-8", code: contracts.RejectInvalidUTF8,
			msg: func(run string) *nats.Msg { return binary("m-utf8", []byte("{\"run_id\":\"\xff\"}"), nil) }},
		{name: "too deep", code: contracts.RejectTooDeep,
			msg: func(run string) *nats.Msg {
				deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
				return binary("m-deep", withField(run, "assistant", deep), nil)
			}},
		{name: "unknown top-level field", code: contracts.RejectUnknownField, ids: true,
			msg: func(run string) *nats.Msg { return binary("m-field", withField(run, "priority", `1`), nil) }},
		{name: "invalid run id", code: contracts.RejectInvalidID,
			msg: func(string) *nats.Msg { return binary("m-id", withField("x", "run_id", `"run 7!"`), nil) }},
		{name: "invalid call id", code: contracts.RejectInvalidID, ids: true,
			msg: func(run string) *nats.Msg {
				return binary("m-callid", withField(run, "calls", `[{"call_id":"a\u0000b","tool_id":"echo","arguments":{}}]`), nil)
			}},
		{name: "negative step", code: contracts.RejectInvalidStep, noBatch: true,
			msg: func(run string) *nats.Msg { return binary("m-step", withField(run, "step", `-1`), nil) }},
		{name: "empty batch", code: contracts.RejectEmptyBatch, ids: true,
			msg: func(run string) *nats.Msg { return binary("m-empty", withField(run, "calls", `[]`), nil) }},
		{name: "duplicate call id", code: contracts.RejectDuplicateCall, ids: true,
			msg: func(run string) *nats.Msg {
				return binary("m-dup", withField(run, "calls",
					`[{"call_id":"a","tool_id":"echo","arguments":{}},{"call_id":"a","tool_id":"wc","arguments":{}}]`), nil)
			}},
		{name: "too many calls", code: contracts.RejectTooManyCalls, ids: true,
			msg: func(run string) *nats.Msg { return binary("m-many", manyCalls(run, contracts.MaxCallsPerBatch+1), nil) }},
		{name: "wrong event type", code: contracts.RejectWrongType, ids: true,
			msg: func(run string) *nats.Msg {
				return binary("m-type", valid(run), func(h nats.Header) { h.Set("ce-type", "io.awaken.something.else.v1") })
			}},
		{name: "missing ce-id and message id", code: contracts.RejectMissingAttribute, ids: true, eventID: "-",
			msg: func(run string) *nats.Msg {
				return binary("m-noid", valid(run), func(h nats.Header) { h.Del("ce-id"); h.Del(jetstream.MsgIDHeader) })
			}},
		{name: "missing ce-source", code: contracts.RejectMissingAttribute, ids: true,
			msg: func(run string) *nats.Msg {
				return binary("m-nosource", valid(run), func(h nats.Header) { h.Del("ce-source") })
			}},
		{name: "unsupported content type", code: contracts.RejectUnsupportedContent, ids: true,
			msg: func(run string) *nats.Msg {
				return binary("m-ct", valid(run), func(h nats.Header) { h.Set("Content-Type", "text/plain") })
			}},
		{name: "structured mode with a body that is not JSON", code: contracts.RejectInvalidJSON,
			msg: func(run string) *nats.Msg {
				m := nats.NewMsg(names.SubmitSubject())
				m.Header.Set("Content-Type", cloudevent.ContentTypeStructured)
				m.Header.Set(jetstream.MsgIDHeader, "m-structured")
				m.Data = []byte("not json")
				return m
			}, eventID: "m-structured"},
		// Last: every later case would read its 1 MiB dead letter twice (a quarter of a
		// second each under the race detector).
		{name: "too large", code: contracts.RejectTooLarge,
			msg: func(run string) *nats.Msg {
				return binary("m-large", withField(run, "thread_id", `"`+strings.Repeat("a", contracts.MaxSubmissionBytes)+`"`), nil)
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := h.in(t)
			run := fmt.Sprintf("run-bad-%d", i)
			rejBefore := len(h.rejections())
			deadBefore := len(h.DeadLetters(contracts.ConsumerBatcherSubmit))

			m := tt.msg(run)
			msgID := m.Header.Get(jetstream.MsgIDHeader)
			seq := h.PublishRaw(m)
			h.settled(seq)

			rejs := h.WaitMessages(names.SubmissionsStream(), names.RejectedSubject(), rejBefore+1)
			if len(rejs) != rejBefore+1 {
				t.Fatalf("got %d new rejections, want 1", len(rejs)-rejBefore)
			}
			rej := servicetest.Decode[contracts.BatchRejected](t, rejs[rejBefore].Event)
			if rej.Code != string(tt.code) || rej.Message == "" {
				t.Errorf("rejection code %q (%s), want %q", rej.Code, rej.Message, tt.code)
			}
			wantEventID, wantRejID := msgID, pipeline.RejectedID(msgID)
			switch tt.eventID {
			case "-":
				wantEventID = ""
				wantRejID = pipeline.RejectedID(fmt.Sprintf("%s-%d", names.SubmissionsStream(), seq))
			case "":
			default:
				wantEventID, wantRejID = tt.eventID, pipeline.RejectedID(tt.eventID)
			}
			if rej.EventID != wantEventID || rejs[rejBefore].Event.ID != wantRejID {
				t.Errorf("rejection event %s for event_id %q, want %s for %q", rejs[rejBefore].Event.ID, rej.EventID, wantRejID, wantEventID)
			}
			wantRun, wantBatch := "", ""
			if tt.ids || tt.noBatch {
				wantRun = run
			}
			if tt.ids {
				wantBatch = contracts.BatchID(run, 1)
			}
			if rej.RunID != wantRun || rej.BatchID != wantBatch {
				t.Errorf("rejection names run %q batch %q, want run %q batch %q", rej.RunID, rej.BatchID, wantRun, wantBatch)
			}

			dead := h.DeadLetters(contracts.ConsumerBatcherSubmit)
			if len(dead) != deadBefore+1 {
				t.Fatalf("got %d new dead letters, want 1", len(dead)-deadBefore)
			}
			d := dead[deadBefore]
			if d.Header.Get(bus.HeaderDeadCode) != string(tt.code) || d.Header.Get(bus.HeaderDeadReason) == "" ||
				d.Header.Get(bus.HeaderOriginalSequence) != fmt.Sprint(seq) {
				t.Errorf("dead letter headers = %v, want code %s for sequence %d", d.Header, tt.code, seq)
			}
			if h.stored(run, 1) {
				t.Errorf("a batch record was written for a rejected submission")
			}

			// The consumer moves on: the next good batch is processed.
			good := submission(run+"-good", 1, call("c1", "echo"))
			h.Submit(good.BatchID(), good)
			h.waitRecorded(run+"-good", 1)
		})
	}
}
