package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

// Tests of the durable state machine on the records the services store: the transitions
// of CallRecord (call_transitions.go) and the batch rules of BatchRecord
// (batch_transitions.go). Fixture names carry a "bt" prefix.

// btAt is the time every transition of these tests stamps.
var btAt = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func btPolicy(mode ToolRecoveryMode, max uint16) ToolRecoveryPolicy {
	return ToolRecoveryPolicy{Mode: mode, MaxAttempts: max}
}

func btText(callID, text string) ToolOutput {
	return ToolOutput{CallID: callID, Content: []ContentBlock{{Type: BlockText, Text: text}}}
}

// btToolCall is call id with tool "tool-{id}" and arguments {"call": id}, like the
// original's two_call_batch.
func btToolCall(id string) ToolCall {
	return ToolCall{CallID: id, ToolID: "tool-" + id, Arguments: json.RawMessage(`{"call":"` + id + `"}`)}
}

// btRec is the fresh Requested record of call id at index 0, policy {replay_safe, 3}.
func btRec(id string) CallRecord {
	return NewCallRecord(0, btToolCall(id), btPolicy(ModeReplaySafe, 3))
}

// btBatch is the open batch record of run "r", step 0, thread "thread", with one fresh
// Requested record per call id, in model order.
func btBatch(ids ...string) (*BatchRecord, []CallRecord) {
	b := &BatchRecord{Submission: BatchSubmission{RunID: "r", ThreadID: "thread", Step: 0}, Phase: BatchPhaseOpen}
	recs := make([]CallRecord, len(ids))
	for i, id := range ids {
		c := btToolCall(id)
		b.Submission.Calls = append(b.Submission.Calls, c)
		b.Pinned = append(b.Pinned, PinnedCall{Known: true, Policy: btPolicy(ModeReplaySafe, 3)})
		recs[i] = NewCallRecord(i, c, b.Pinned[i].Policy)
	}
	return b, recs
}

func btTicket(reason TicketReason, callID, toolID, corr string) ResumeTicket {
	return ResumeTicket{
		CorrelationID: corr,
		RunID:         "r",
		ThreadID:      "thread",
		SnapshotID:    "snapshot",
		BatchID:       BatchID("r", 0),
		CallID:        callID,
		ToolID:        toolID,
		Arguments:     json.RawMessage(`{"call":"` + callID + `"}`),
		Reason:        reason,
	}
}

func btMustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

func btWantErr(t testing.TB, got, want error, label string) {
	t.Helper()
	if want == nil {
		if got != nil {
			t.Fatalf("%s: unexpected error %v", label, got)
		}
		return
	}
	if !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", label, got, want)
	}
}

func btMust(t testing.TB, errs ...error) {
	t.Helper()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("setup step %d: %v", i, err)
		}
	}
}

// btPhaseEqual compares phases field by field, outputs canonically.
func btPhaseEqual(a, b ToolCallPhase) bool {
	if a.Kind != b.Kind || a.Attempt != b.Attempt || a.Reason != b.Reason {
		return false
	}
	if (a.Wait == nil) != (b.Wait == nil) || (a.Wait != nil && *a.Wait != *b.Wait) {
		return false
	}
	if (a.Output == nil) != (b.Output == nil) || (a.Output != nil && !batchOutputEqual(*a.Output, *b.Output)) {
		return false
	}
	return true
}

// btStages lists the stages of r's timeline.
func btStages(r *CallRecord) []string {
	var s []string
	for _, m := range r.Timeline {
		s = append(s, m.Stage)
	}
	return s
}

func TestOperationIdentityIsOwnedByTheBatchCoordinate(t *testing.T) {
	// O1: same run, step and call id reconstruct the same operation id; O2: another call
	// id of the same batch cannot collide.
	op := OperationID("run-7", 3, "call-1")
	if op != "tool-batch:run-7:3:call-1" {
		t.Fatalf("O1: operation id %q", op)
	}
	if op == OperationID("run-7", 3, "call-2") || op == OperationID("run-7", 4, "call-1") {
		t.Fatal("O2: distinct calls share an operation id")
	}
	if CallKey(TargetBrain, "run-7", 3, "call-1") == CallKey(TargetBrain, "run-7", 3, "call-2") {
		t.Fatal("O2: distinct calls share a record key")
	}
}

func TestNewCallRecordIsRequestedWithItsPinnedPolicy(t *testing.T) {
	r := NewCallRecord(2, btToolCall("c"), btPolicy(ModeIdempotent, 4))
	if r.Index != 2 || r.CallID != "c" || r.ToolID != "tool-c" || r.Phase.Kind != PhaseRequested || r.Policy != btPolicy(ModeIdempotent, 4) {
		t.Fatalf("record %+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(r.Timeline) != 0 || r.Decision != nil || r.Entered {
		t.Fatalf("a fresh record carries history: %+v", r)
	}
}

func TestTerminalOutputIsIdempotentAndFinalizationRequiresCompletion(t *testing.T) {
	b, recs := btBatch("c")
	btWantErr(t, b.Finalize(recs), ErrIncomplete, "finalize of a Requested call")
	btWantErr(t, b.MarkPublished(), ErrInvalidTransition, "publish before the barrier")
	c := &recs[0]
	btMust(t, c.Dispatch(btAt), c.Enter(7, btAt))
	out := btText("c", "done")
	btMust(t, c.Complete(out, btAt))
	marks := len(c.Timeline)
	// An equal output is a no-op: no new phase, no new mark.
	if err := c.Complete(btText("c", "done"), btAt.Add(time.Second)); err != nil {
		t.Fatalf("idempotent re-complete: %v", err)
	}
	if len(c.Timeline) != marks {
		t.Fatalf("an idempotent re-complete stamped the timeline: %v", btStages(c))
	}
	btWantErr(t, c.Complete(btText("c", "different"), btAt), ErrInvalidTransition, "re-complete with another output")
	btMust(t, b.Finalize(recs))
	if b.Phase != BatchPhaseFinalized {
		t.Fatalf("phase %q", b.Phase)
	}
	btWantErr(t, b.Finalize(recs), ErrBatchFinalized, "second finalize")
	outs, err := b.Outputs(recs)
	if err != nil || len(outs) != 1 || !batchOutputEqual(outs[0], out) {
		t.Fatalf("outputs %v, %v", outs, err)
	}
	btMust(t, b.MarkPublished())
	err = b.Finalize(recs)
	btWantErr(t, err, ErrBatchFinalized, "finalize after publish")
	btWantErr(t, err, ErrBatchPublished, "finalize after publish names it")
	btWantErr(t, b.MarkPublished(), ErrBatchPublished, "second publish")
	if b.Phase != BatchPhasePublished {
		t.Fatalf("phase %q", b.Phase)
	}
}

func TestFinalizeRefusesForeignOrMissingRecords(t *testing.T) {
	b, recs := btBatch("c1", "c2")
	for i := range recs {
		btMust(t, recs[i].CompleteImmediate(btText(recs[i].CallID, "ok"), btAt))
	}
	btWantErr(t, b.Finalize(recs[:1]), ErrCallMismatch, "one record short")
	swapped := []CallRecord{recs[1], recs[0]}
	btWantErr(t, b.Finalize(swapped), ErrCallMismatch, "records out of model order")
	if b.Phase != BatchPhaseOpen {
		t.Fatal("a refused finalize moved the batch")
	}
	unknown := *b
	unknown.Phase = "archived"
	btWantErr(t, unknown.Finalize(recs), ErrInvalidPersistedState, "unknown batch phase")
	btWantErr(t, unknown.MarkPublished(), ErrInvalidPersistedState, "unknown batch phase")
}

func TestAttemptBudgetIsEnforced(t *testing.T) {
	c := btRec("c")
	btMust(t, c.Dispatch(btAt), c.Enter(1, btAt))
	for want := uint16(2); want <= 3; want++ {
		if err := c.Retry(uint64(want), btAt); err != nil {
			t.Fatalf("attempt %d: %v", want, err)
		}
		if c.Phase.Kind != PhaseExecuting || c.Phase.Attempt != want || !c.Entered || c.EnteredBy != uint64(want) {
			t.Fatalf("attempt %d: %+v", want, c)
		}
	}
	before := btMustJSON(t, c)
	btWantErr(t, c.Retry(9, btAt), ErrAttemptsExhausted, "fourth attempt of three")
	if !bytes.Equal(btMustJSON(t, c), before) {
		t.Fatal("an exhausted attempt changed the record")
	}

	// The u16 counter never wraps, whatever the budget.
	max := btRec("m")
	max.Policy = btPolicy(ModeReplaySafe, 65535)
	max.Phase, max.Entered = ExecutingPhase(65535), true
	btWantErr(t, max.Retry(1, btAt), ErrAttemptsExhausted, "u16 overflow")
	if max.Phase.Attempt != 65535 {
		t.Fatalf("overflow changed the attempt to %d", max.Phase.Attempt)
	}
}

// Requeue is Retry's next attempt with no delivery holding it: an executor handed the
// call enters it as a fresh attempt, within the same budget, from the same phase only.
func TestRequeueHandsTheNextAttemptToWhoeverEntersIt(t *testing.T) {
	c := btRec("c")
	btMust(t, c.Dispatch(btAt), c.Enter(1, btAt))
	retried := c
	retried.Timeline = append([]TimelineMark(nil), c.Timeline...)
	btMust(t, retried.Retry(7, btAt), c.Requeue(btAt))
	if c.Phase != retried.Phase || c.Entered || c.EnteredBy != 0 {
		t.Fatalf("requeued: %+v, want attempt %d not entered", c, retried.Phase.Attempt)
	}
	if got, want := c.Timeline[len(c.Timeline)-1], retried.Timeline[len(retried.Timeline)-1]; got != want {
		t.Fatalf("requeue stamped %+v, retry %+v", got, want)
	}
	btMust(t, c.Enter(8, btAt))
	if !c.HeldBy(2, 8) {
		t.Fatalf("the requeued attempt was not entered: %+v", c)
	}

	btMust(t, c.Retry(9, btAt))
	before := btMustJSON(t, c)
	btWantErr(t, c.Requeue(btAt), ErrAttemptsExhausted, "fourth attempt of three")
	if !bytes.Equal(btMustJSON(t, c), before) {
		t.Fatal("an exhausted requeue changed the record")
	}
	d := btRec("d")
	btWantErr(t, d.Requeue(btAt), ErrInvalidTransition, "requeue of a Requested call")
	btMust(t, d.Dispatch(btAt))
	btWantErr(t, d.Requeue(btAt), ErrInvalidTransition, "requeue of an attempt nobody entered")
}

func TestApprovalMustMatchTheCommittedWait(t *testing.T) {
	c := btRec("c")
	btMust(t, c.Park(WaitToolPermission, "approval-1", btAt))
	btWantErr(t, c.Resume(WaitToolPermission, "stale", btAt), ErrWaitMismatch, "stale correlation")
	btWantErr(t, c.Resume(WaitDelegation, "approval-1", btAt), ErrWaitMismatch, "wrong kind")
	if c.Phase.Kind != PhaseAwaiting {
		t.Fatalf("a mismatched approval moved the call to %s", c.Phase.Kind)
	}
	btMust(t, c.Resolve(Resolver{By: "resume-1"}, btAt), c.Resume(WaitToolPermission, "approval-1", btAt))
	if c.Phase.Kind != PhaseExecuting || c.Phase.Attempt != 1 || c.Entered || c.ResolvedBy != "resume-1" {
		t.Fatalf("exact approval: %+v, want Executing{1}, not entered, resolved by resume-1", c)
	}
}

// TestResolveRecordsActorAndEdit: a resolution records who decided and the edited
// arguments (compacted), which the call then runs with; an edit that is not a JSON object
// is refused and leaves the record unchanged.
func TestResolveRecordsActorAndEdit(t *testing.T) {
	c := btRec("c")
	btMust(t, c.Park(WaitToolPermission, "approval-1", btAt))
	before := c.Clone()
	btWantErr(t, c.Resolve(Resolver{By: "resume-1", Actor: "alice", EditedArguments: json.RawMessage(`[1]`)}, btAt), ErrInvalidTransition, "array edit")
	if !reflect.DeepEqual(c, before) {
		t.Fatalf("a refused edit changed the record: %+v", c)
	}
	btMust(t, c.Resolve(Resolver{By: "resume-1", Actor: "alice", EditedArguments: json.RawMessage(`{ "p" : 1 }`), EditBlocked: "no"}, btAt))
	if c.ResolvedBy != "resume-1" || c.ResolvedActor != "alice" || string(c.EditedArguments) != `{"p":1}` || c.EditBlocked != "no" {
		t.Fatalf("resolved record %+v", c)
	}
	if got := c.Arguments(json.RawMessage(`{"p":0}`)); string(got) != `{"p":1}` {
		t.Fatalf("the call runs with %s, want the edit", got)
	}
	plain := btRec("d")
	if got := plain.Arguments(json.RawMessage(`{"p":0}`)); string(got) != `{"p":0}` {
		t.Fatalf("an unedited call runs with %s, want the proposed arguments", got)
	}
}

func TestADecisionIsRecordedOnceAndOnlyBeforeTheCallMoves(t *testing.T) {
	allow := &GateOutcome{Kind: GateAllow}
	c := btRec("c")
	btMust(t, c.Decide(allow, "00-trace-01", btAt))
	if c.Decision == nil || c.Decision.Kind != GateAllow || c.TraceParent != "00-trace-01" {
		t.Fatalf("decision not recorded: %+v", c)
	}
	allow.Kind = GateBlock
	if c.Decision.Kind != GateAllow {
		t.Fatal("the record aliases the caller's outcome")
	}
	btWantErr(t, c.Decide(&GateOutcome{Kind: GateBlock}, "", btAt), ErrAlreadyDecided, "second decision")
	btWantErr(t, c.Probe(&GateOutcome{Kind: GateBlock}, "", btAt), ErrAlreadyDecided, "probe after a decision")

	probed := btRec("c")
	btWantErr(t, probed.Probe(nil, "", btAt), ErrInvalidTransition, "probe without a permission decision")
	btMust(t, probed.Probe(&GateOutcome{Kind: GateAllow}, "", btAt))
	if at, ok := probed.MarkTime(StageProbed); !ok || !at.Equal(btAt) {
		t.Fatalf("probe stamp %v %v", at, ok)
	}
	if _, ok := probed.MarkTime(StageDecided); ok {
		t.Fatal("a probe stamped the sequential path's stage")
	}

	// Client execution and unknown tools have no permission decision; the gate still
	// records that it decided.
	client := btRec("c")
	btMust(t, client.Decide(nil, "", btAt))
	if client.Decision != nil || len(client.Timeline) != 1 {
		t.Fatalf("nil decision: %+v", client)
	}
}

func TestEnterClaimsAnAttemptOnce(t *testing.T) {
	c := btRec("c")
	btWantErr(t, c.Enter(5, btAt), ErrInvalidTransition, "enter before dispatch")
	btMust(t, c.Dispatch(btAt), c.Enter(5, btAt))
	if !c.HeldBy(1, 5) || c.HeldBy(1, 6) || c.HeldBy(2, 5) {
		t.Fatalf("ownership after enter: %+v", c)
	}
	btWantErr(t, c.Enter(6, btAt), ErrInvalidTransition, "a second delivery")
	if c.EnteredBy != 5 {
		t.Fatal("a refused enter changed the owner")
	}
	req := btRec("c")
	btWantErr(t, req.Retry(5, btAt), ErrInvalidTransition, "retry of a Requested call")
	d := btRec("c")
	btMust(t, d.Dispatch(btAt))
	btWantErr(t, d.Retry(5, btAt), ErrInvalidTransition, "retry of an attempt nobody entered")
}

func TestTransitionsStampTheTimeline(t *testing.T) {
	c := btRec("c")
	at := func(s int) time.Time { return btAt.Add(time.Duration(s) * time.Second) }
	btMust(t,
		c.Decide(&GateOutcome{Kind: GateRequireConfirmation, CorrelationID: "corr"}, "", at(1)),
		c.Park(WaitToolPermission, "corr", at(2)),
		c.Resolve(Resolver{By: "resume-1"}, at(3)),
		c.Resume(WaitToolPermission, "corr", at(4)),
		c.Enter(9, at(5)),
		c.Retry(9, at(6)),
		c.Complete(btText("c", "ok"), at(7)),
	)
	want := []string{StageDecided, StageAwaiting, StageResumed, StageExecuting, StageEntered, StageRecovered, StageCompleted}
	got := btStages(&c)
	if len(got) != len(want) {
		t.Fatalf("stages %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] || !c.Timeline[i].At.Equal(at(i+1)) {
			t.Fatalf("mark %d: %+v, want %s at %v", i, c.Timeline[i], want[i], at(i+1))
		}
	}
	// The stage names are part of the stored record and of the operator API.
	for stage, spelled := range map[string]string{
		StageDecided: "gate.decided", StageProbed: "gate.probed", StageExecuting: "executing", StageAwaiting: "awaiting",
		StageResumed: "resumed", StageEntered: "entered", StageRecovered: "recovered", StageCompleted: "completed",
		StageIndeterminate: "indeterminate",
	} {
		if stage != spelled {
			t.Fatalf("stage %q is stored as %q", spelled, stage)
		}
	}
	d := btRec("d")
	btMust(t, d.MarkIndeterminate("cancelled", at(1)))
	if s := btStages(&d); len(s) != 1 || s[0] != StageIndeterminate || !d.IndeterminateFor("cancelled") || d.IndeterminateFor("other") {
		t.Fatalf("indeterminate: %v %+v", s, d.Phase)
	}
}

func TestOneBatchAdmitsOnlyOneNonemptyDurableWait(t *testing.T) {
	// W1: the sole wait is established; W2: a second wait is refused by the batch check;
	// W3: an empty correlation is rejected.
	b, recs := btBatch("c1", "c2")
	btMust(t, recs[0].Park(WaitToolPermission, "corr-1", btAt))
	if err := b.CheckCalls(recs); err != nil {
		t.Fatalf("W1: %v", err)
	}
	btMust(t, recs[1].Park(WaitExternalResult, "corr-2", btAt))
	btWantErr(t, b.CheckCalls(recs), ErrMultipleAwaitingCalls, "W2")
	btWantErr(t, b.CheckTicket(recs, btTicket(ReasonPermission, "c1", "tool-c1", "corr-1")), ErrMultipleAwaitingCalls, "W2 blocks every resume")
	btWantErr(t, b.Finalize(recs), ErrMultipleAwaitingCalls, "W2 blocks finalization")
	// Re-awaiting the awaiting call itself is an invalid transition, not a second wait.
	btWantErr(t, recs[0].Park(WaitToolPermission, "corr-9", btAt), ErrInvalidTransition, "re-await")

	empty := btRec("c1")
	btWantErr(t, empty.Park(WaitToolPermission, "", btAt), ErrEmptyWaitCorrelation, "W3")
	if empty.Phase.Kind != PhaseRequested || len(empty.Timeline) != 0 {
		t.Fatal("W3 left a wait behind")
	}
}

func TestPersistedFinalizedBatchWithRequestedWorkIsRejected(t *testing.T) {
	b, recs := btBatch("c")
	for _, phase := range []BatchPhase{BatchPhaseFinalized, BatchPhasePublished} {
		b.Phase = phase
		btWantErr(t, b.CheckCalls(recs), ErrInvalidPersistedState, string(phase)+" with Requested work")
		_, err := b.Outputs(recs)
		btWantErr(t, err, ErrInvalidPersistedState, string(phase)+" outputs")
	}
	b.Phase = BatchPhaseOpen
	_, err := b.Outputs(recs)
	btWantErr(t, err, ErrIncomplete, "outputs of an open batch")
}

func TestResumeTicketMustMatchEveryDurableWaitAxis(t *testing.T) {
	// A1a..A1c: every ticket reason maps to its wait kind and validates without mutation.
	for _, tc := range []struct {
		rule   string
		reason TicketReason
		kind   ToolWaitKind
	}{
		{"A1a", ReasonPermission, WaitToolPermission},
		{"A1b", ReasonClientExecution, WaitExternalResult},
		{"A1c", ReasonScheduledAction, WaitScheduledAction},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			b, recs := btBatch("c1", "c2")
			btMust(t, recs[0].Park(tc.kind, "corr", btAt))
			before := btMustJSON(t, recs)
			if err := b.CheckTicket(recs, btTicket(tc.reason, "c1", "tool-c1", "corr")); err != nil {
				t.Fatalf("%s/E1: %v", tc.rule, err)
			}
			if !bytes.Equal(btMustJSON(t, recs), before) {
				t.Fatalf("%s/E1 mutated the records", tc.rule)
			}
			if WaitKindForReason(tc.reason) != tc.kind {
				t.Fatalf("WaitKindForReason(%s) = %s", tc.reason, WaitKindForReason(tc.reason))
			}
			if r, ok := ReasonForWaitKind(tc.kind); !ok || r != tc.reason {
				t.Fatalf("ReasonForWaitKind(%s) = %s, %v", tc.kind, r, ok)
			}
		})
	}
	if r, ok := ReasonForWaitKind(WaitDelegation); ok {
		t.Fatalf("delegation waits have no ticket reason, got %q", r)
	}

	b, recs := btBatch("c1", "c2")
	btMust(t, recs[0].Park(WaitToolPermission, "corr", btAt))
	exact := btTicket(ReasonPermission, "c1", "tool-c1", "corr")
	with := func(edit func(*ResumeTicket)) ResumeTicket {
		t := exact
		edit(&t)
		return t
	}
	otherThread := *b
	otherThread.Submission.ThreadID = "other"
	_, delegating := btBatch("c1", "c2")
	btMust(t, delegating[0].Park(WaitDelegation, "corr", btAt))
	_, noWait := btBatch("c1", "c2")
	finalized, done := btBatch("c1", "c2")
	for i := range done {
		btMust(t, done[i].CompleteImmediate(btText(done[i].CallID, "done"), btAt))
	}
	btMust(t, finalized.Finalize(done))
	for _, tc := range []struct {
		rule   string
		batch  *BatchRecord
		recs   []CallRecord
		ticket ResumeTicket
		want   error
	}{
		{"A2 run", b, recs, with(func(t *ResumeTicket) { t.RunID = "other" }), ErrTicketRunMismatch},
		{"A3 thread", b, recs, with(func(t *ResumeTicket) { t.ThreadID = "other" }), ErrTicketThreadMismatch},
		{"A3 run thread", &otherThread, recs, exact, ErrTicketThreadMismatch},
		{"A3b batch", b, recs, with(func(t *ResumeTicket) { t.BatchID = BatchID("r", 1) }), ErrTicketBatchMismatch},
		{"A4 not a tool call", b, recs, with(func(t *ResumeTicket) { t.Reason = "delegation" }), ErrTicketNotToolCall},
		{"A5 call", b, recs, btTicket(ReasonPermission, "c2", "tool-c2", "corr"), ErrTicketCallMismatch},
		{"A6 kind", b, recs, btTicket(ReasonClientExecution, "c1", "tool-c1", "corr"), ErrTicketKindMismatch},
		{"A6 delegation wait", b, delegating, exact, ErrTicketKindMismatch},
		{"A7 correlation", b, recs, btTicket(ReasonPermission, "c1", "tool-c1", "other"), ErrTicketCorrelationMismatch},
		{"A8 tool id", b, recs, btTicket(ReasonPermission, "c1", "other", "corr"), ErrTicketToolMismatch},
		{"A8 arguments", b, recs, with(func(t *ResumeTicket) { t.Arguments = json.RawMessage(`{"call":"c2"}`) }), ErrTicketToolMismatch},
		{"A8 arguments null", b, recs, with(func(t *ResumeTicket) { t.Arguments = nil }), ErrTicketToolMismatch},
		{"A9 missing wait", b, noWait, exact, ErrTicketMissingAwaitingCall},
		{"A10 finalized", finalized, done, exact, ErrTicketFinalized},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			before := btMustJSON(t, tc.recs)
			btWantErr(t, tc.batch.CheckTicket(tc.recs, tc.ticket), tc.want, tc.rule)
			if !bytes.Equal(btMustJSON(t, tc.recs), before) {
				t.Fatalf("%s mutated the records", tc.rule)
			}
		})
	}

	// Arguments are compared canonically: key order, whitespace and number spelling do not
	// matter.
	reordered, rr := btBatch("c1")
	reordered.Submission.Calls[0].Arguments = json.RawMessage(`{"b":[1,2.50],"a":{"x":true}}`)
	btMust(t, rr[0].Park(WaitToolPermission, "corr", btAt))
	canon := with(func(t *ResumeTicket) { t.Arguments = json.RawMessage(` { "a" : {"x":true}, "b":[1.0, 25e-1] } `) })
	if err := reordered.CheckTicket(rr, canon); err != nil {
		t.Fatalf("canonical argument equality: %v", err)
	}
}

func TestCheckAwaits(t *testing.T) {
	c := btRec("c1")
	call := btToolCall("c1")
	exact := btTicket(ReasonScheduledAction, "c1", "tool-c1", "corr")
	btWantErr(t, c.CheckAwaits(call, exact), ErrTicketMissingAwaitingCall, "Requested call")
	btMust(t, c.Park(WaitScheduledAction, "corr", btAt))
	if err := c.CheckAwaits(call, exact); err != nil {
		t.Fatalf("exact: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*ResumeTicket)
		want error
	}{
		{"reason", func(t *ResumeTicket) { t.Reason = "bogus" }, ErrTicketNotToolCall},
		{"call", func(t *ResumeTicket) { t.CallID = "c2" }, ErrTicketCallMismatch},
		{"kind", func(t *ResumeTicket) { t.Reason = ReasonPermission }, ErrTicketKindMismatch},
		{"correlation", func(t *ResumeTicket) { t.CorrelationID = "x" }, ErrTicketCorrelationMismatch},
		{"tool", func(t *ResumeTicket) { t.ToolID = "x" }, ErrTicketToolMismatch},
		{"arguments", func(t *ResumeTicket) { t.Arguments = json.RawMessage(`{"call":"c1","extra":1}`) }, ErrTicketToolMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := exact
			tc.edit(&tk)
			btWantErr(t, c.CheckAwaits(call, tk), tc.want, tc.name)
		})
	}
}

func TestRecordOfAnotherCallIsRefused(t *testing.T) {
	b, recs := btBatch("c1", "c2")
	if err := b.CheckCall(1, &recs[1]); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*CallRecord){
		"index":   func(r *CallRecord) { r.Index = 0 },
		"call id": func(r *CallRecord) { r.CallID = "c3" },
		"tool id": func(r *CallRecord) { r.ToolID = "other" },
	} {
		r := recs[1]
		edit(&r)
		btWantErr(t, b.CheckCall(1, &r), ErrCallMismatch, name)
	}
	btWantErr(t, b.CheckCall(5, &recs[1]), ErrCallMismatch, "index out of range")
}

func TestCompletedCallCannotHoldAnotherCallsOutput(t *testing.T) {
	c := btRec("c")
	btMust(t, c.Dispatch(btAt))
	btWantErr(t, c.Complete(btText("different-call", "ok"), btAt), ErrUnknownCall, "foreign output")
	if c.Phase.Kind != PhaseExecuting {
		t.Fatalf("a refused foreign output moved the call to %s", c.Phase.Kind)
	}
	// A stored record that holds one fails closed before any transition acts on it.
	stored := btRec("c")
	stored.Phase = CompletedPhase(btText("different-call", "ok"))
	btWantErr(t, stored.Validate(), ErrInvalidPersistedState, "persisted foreign output")
	btWantErr(t, stored.MarkIndeterminate("x", btAt), ErrInvalidPersistedState, "transition on it")
}

func TestStoredRecordRulesAreCheckedAfterDecode(t *testing.T) {
	valid := btRec("c")
	btMust(t, valid.Dispatch(btAt))
	for _, tc := range []struct {
		name string
		edit func(v map[string]any)
		want error
	}{
		{"attempt over budget", func(v map[string]any) { v["phase"] = map[string]any{"Executing": map[string]any{"attempt": 4}} }, ErrInvalidPersistedState},
		{"no policy", func(v map[string]any) { delete(v, "policy") }, ErrInvalidPersistedState},
		{"invalid call id", func(v map[string]any) { v["call_id"] = "a\x00b" }, ErrInvalidID},
		{"no call id", func(v map[string]any) { delete(v, "call_id") }, ErrInvalidID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v map[string]any
			if err := json.Unmarshal(btMustJSON(t, valid), &v); err != nil {
				t.Fatal(err)
			}
			tc.edit(v)
			var got CallRecord
			if err := json.Unmarshal(btMustJSON(t, v), &got); err != nil {
				t.Fatal(err)
			}
			err := got.Validate()
			btWantErr(t, err, ErrInvalidPersistedState, tc.name)
			btWantErr(t, err, tc.want, tc.name)
			btWantErr(t, got.MarkIndeterminate("x", btAt), ErrInvalidPersistedState, tc.name+": transition")
		})
	}
	// A malformed phase or policy never decodes at all.
	for _, raw := range []string{
		`{"index":0,"call_id":"c","tool_id":"t","phase":"Requested","policy":{"mode":"replay_safe","max_attempts":0}}`,
		`{"index":0,"call_id":"c","tool_id":"t","phase":"Requested","policy":{"mode":"sometimes","max_attempts":1}}`,
		`{"index":0,"call_id":"c","tool_id":"t","phase":{"Executing":{"attempt":0}},"policy":{"mode":"replay_safe","max_attempts":3}}`,
		`{"index":0,"call_id":"c","tool_id":"t","phase":{"Awaiting":{"wait":{"kind":"tool_permission","correlation_id":""}}},"policy":{"mode":"replay_safe","max_attempts":3}}`,
	} {
		var got CallRecord
		if err := json.Unmarshal([]byte(raw), &got); err == nil {
			t.Fatalf("decoded %s", raw)
		}
	}
}

// TestEveryPhaseOperationPairHasExactlyItsDocumentedPrecondition is the Go form of the
// original's Kani proofs over the transition kernel, run on the stored record: every
// (phase × operation) pair yields exactly the documented result and timeline mark, and a
// refused operation changes nothing.
func TestEveryPhaseOperationPairHasExactlyItsDocumentedPrecondition(t *testing.T) {
	done := btText("c", "done")
	other := btText("c", "other")
	entered := func(p ToolCallPhase) CallRecord {
		r := btRec("c")
		r.Phase, r.Entered, r.EnteredBy = p, true, 7
		return r
	}
	phases := map[string]CallRecord{
		"Requested":            btRec("c"),
		"Executing1":           func() CallRecord { r := btRec("c"); r.Phase = ExecutingPhase(1); return r }(),
		"Executing1Entered":    entered(ExecutingPhase(1)),
		"ExecutingMaxEntered":  entered(ExecutingPhase(3)),
		"Awaiting":             func() CallRecord { r := btRec("c"); r.Phase = AwaitingPhase(WaitToolPermission, "corr"); return r }(),
		"Completed":            func() CallRecord { r := btRec("c"); r.Phase = CompletedPhase(done); return r }(),
		"Indeterminate":        func() CallRecord { r := btRec("c"); r.Phase = IndeterminatePhase("lost"); return r }(),
		"DecidedRequested":     func() CallRecord { r := btRec("c"); r.Decision = &GateOutcome{Kind: GateAllow}; return r }(),
		"IndeterminateEntered": entered(IndeterminatePhase("lost")),
	}
	type want struct {
		err     error
		phase   *ToolCallPhase // result on success; nil = unchanged
		stage   string         // mark stamped on success; "" = none
		entered *bool          // Entered after success; nil = unchanged
	}
	yes, no := true, false
	to := func(p ToolCallPhase, stage string) want { return want{phase: &p, stage: stage} }
	toEx := func(p ToolCallPhase, stage string, e bool) want {
		w := to(p, stage)
		if e {
			w.entered = &yes
		} else {
			w.entered = &no
		}
		return w
	}
	fail := func(err error) want { return want{err: err} }
	inv := fail(ErrInvalidTransition)
	// every builds the expectations of an operation: def for every phase, then overrides.
	every := func(def want, overrides map[string]want) map[string]want {
		m := make(map[string]want, len(phases))
		for name := range phases {
			m[name] = def
		}
		for name, w := range overrides {
			m[name] = w
		}
		return m
	}
	exec1 := ExecutingPhase(1)
	awaiting2 := AwaitingPhase(WaitExternalResult, "corr-2")
	ind := IndeterminatePhase("why")
	ops := map[string]struct {
		apply func(*CallRecord) error
		want  map[string]want
	}{
		"decide": {func(c *CallRecord) error { return c.Decide(&GateOutcome{Kind: GateBlock}, "", btAt) },
			every(inv, map[string]want{"Requested": {stage: StageDecided}, "DecidedRequested": fail(ErrAlreadyDecided)})},
		"probe": {func(c *CallRecord) error { return c.Probe(&GateOutcome{Kind: GateAllow}, "", btAt) },
			every(inv, map[string]want{"Requested": {stage: StageProbed}, "DecidedRequested": fail(ErrAlreadyDecided)})},
		"dispatch": {func(c *CallRecord) error { return c.Dispatch(btAt) },
			every(inv, map[string]want{"Requested": toEx(exec1, StageExecuting, false), "DecidedRequested": toEx(exec1, StageExecuting, false)})},
		"enter": {func(c *CallRecord) error { return c.Enter(9, btAt) },
			every(inv, map[string]want{"Executing1": {stage: StageEntered, entered: &yes}})},
		"retry": {func(c *CallRecord) error { return c.Retry(7, btAt) },
			every(inv, map[string]want{"Executing1Entered": toEx(ExecutingPhase(2), StageRecovered, true), "ExecutingMaxEntered": fail(ErrAttemptsExhausted)})},
		"resume_match": {func(c *CallRecord) error { return c.Resume(WaitToolPermission, "corr", btAt) },
			every(inv, map[string]want{"Awaiting": toEx(exec1, StageExecuting, false)})},
		"resume_stale_correlation": {func(c *CallRecord) error { return c.Resume(WaitToolPermission, "stale", btAt) },
			every(inv, map[string]want{"Awaiting": fail(ErrWaitMismatch)})},
		"resume_wrong_kind": {func(c *CallRecord) error { return c.Resume(WaitScheduledAction, "corr", btAt) },
			every(inv, map[string]want{"Awaiting": fail(ErrWaitMismatch)})},
		"resolve": {func(c *CallRecord) error { return c.Resolve(Resolver{By: "resume-1"}, btAt) },
			every(inv, map[string]want{"Awaiting": {stage: StageResumed}})},
		"resolve_without_resolver": {func(c *CallRecord) error { return c.Resolve(Resolver{By: ""}, btAt) },
			every(inv, nil)},
		"park": {func(c *CallRecord) error { return c.Park(WaitExternalResult, "corr-2", btAt) },
			every(inv, map[string]want{"Requested": to(awaiting2, StageAwaiting), "DecidedRequested": to(awaiting2, StageAwaiting),
				"Executing1": to(awaiting2, StageAwaiting), "Executing1Entered": to(awaiting2, StageAwaiting), "ExecutingMaxEntered": to(awaiting2, StageAwaiting)})},
		"park_empty_correlation": {func(c *CallRecord) error { return c.Park(WaitExternalResult, "", btAt) },
			every(inv, map[string]want{"Requested": fail(ErrEmptyWaitCorrelation), "DecidedRequested": fail(ErrEmptyWaitCorrelation),
				"Executing1": fail(ErrEmptyWaitCorrelation), "Executing1Entered": fail(ErrEmptyWaitCorrelation), "ExecutingMaxEntered": fail(ErrEmptyWaitCorrelation)})},
		"park_unknown_kind": {func(c *CallRecord) error { return c.Park("approval", "corr", btAt) },
			every(inv, nil)},
		"complete_equal": {func(c *CallRecord) error { return c.Complete(done, btAt) },
			every(inv, map[string]want{"Executing1": to(CompletedPhase(done), StageCompleted), "Executing1Entered": to(CompletedPhase(done), StageCompleted),
				"ExecutingMaxEntered": to(CompletedPhase(done), StageCompleted), "Awaiting": to(CompletedPhase(done), StageCompleted), "Completed": {}})},
		"complete_different": {func(c *CallRecord) error { return c.Complete(other, btAt) },
			every(inv, map[string]want{"Executing1": to(CompletedPhase(other), StageCompleted), "Executing1Entered": to(CompletedPhase(other), StageCompleted),
				"ExecutingMaxEntered": to(CompletedPhase(other), StageCompleted), "Awaiting": to(CompletedPhase(other), StageCompleted)})},
		"complete_foreign_output": {func(c *CallRecord) error { return c.Complete(btText("x", "done"), btAt) },
			every(fail(ErrUnknownCall), nil)},
		"complete_immediate_equal": {func(c *CallRecord) error { return c.CompleteImmediate(done, btAt) },
			every(inv, map[string]want{"Requested": to(CompletedPhase(done), StageCompleted), "DecidedRequested": to(CompletedPhase(done), StageCompleted), "Completed": {}})},
		"complete_immediate_different": {func(c *CallRecord) error { return c.CompleteImmediate(other, btAt) },
			every(inv, map[string]want{"Requested": to(CompletedPhase(other), StageCompleted), "DecidedRequested": to(CompletedPhase(other), StageCompleted)})},
		"mark_indeterminate": {func(c *CallRecord) error { return c.MarkIndeterminate("why", btAt) },
			every(to(ind, StageIndeterminate), map[string]want{"Completed": inv})},
	}
	for opName, o := range ops {
		if len(o.want) != len(phases) {
			t.Fatalf("%s: %d expectations for %d phases", opName, len(o.want), len(phases))
		}
		for phaseName, start := range phases {
			w := o.want[phaseName]
			t.Run(opName+"/"+phaseName, func(t *testing.T) {
				c := start
				c.Phase = btPhaseCopy(start.Phase)
				before := btMustJSON(t, c)
				err := o.apply(&c)
				if w.err != nil {
					if !errors.Is(err, w.err) {
						t.Fatalf("error %v, want %v", err, w.err)
					}
					if !bytes.Equal(btMustJSON(t, c), before) {
						t.Fatalf("refused operation changed the record: %s", btMustJSON(t, c))
					}
					return
				}
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				wantPhase := start.Phase
				if w.phase != nil {
					wantPhase = *w.phase
				}
				if !btPhaseEqual(c.Phase, wantPhase) {
					t.Fatalf("phase %+v, want %+v", c.Phase, wantPhase)
				}
				switch stages := btStages(&c); {
				case w.stage == "" && len(stages) != 0:
					t.Fatalf("a no-op stamped %v", stages)
				case w.stage != "" && (len(stages) != 1 || stages[0] != w.stage || !c.Timeline[0].At.Equal(btAt)):
					t.Fatalf("stamped %v, want [%s]", stages, w.stage)
				}
				wantEntered := start.Entered
				if w.entered != nil {
					wantEntered = *w.entered
				}
				if c.Entered != wantEntered {
					t.Fatalf("entered %v, want %v", c.Entered, wantEntered)
				}
				if err := c.Validate(); err != nil {
					t.Fatalf("result is invalid: %v", err)
				}
			})
		}
	}
}

// btPhaseCopy deep-copies p so a test case cannot reach a shared fixture.
func btPhaseCopy(p ToolCallPhase) ToolCallPhase {
	if p.Wait != nil {
		w := *p.Wait
		p.Wait = &w
	}
	if p.Output != nil {
		o := batchCloneOutput(*p.Output)
		p.Output = &o
	}
	return p
}

func TestTransitionsRefuseAMalformedRecord(t *testing.T) {
	base := btRec("c")
	with := func(edit func(*CallRecord)) CallRecord {
		r := base
		edit(&r)
		return r
	}
	for name, c := range map[string]CallRecord{
		"unset phase":      with(func(r *CallRecord) { r.Phase = ToolCallPhase{} }),
		"awaiting no wait": with(func(r *CallRecord) { r.Phase = ToolCallPhase{Kind: PhaseAwaiting} }),
		"completed no out": with(func(r *CallRecord) { r.Phase = ToolCallPhase{Kind: PhaseCompleted} }),
		"zero budget":      with(func(r *CallRecord) { r.Policy = ToolRecoveryPolicy{} }),
		"attempt over max": with(func(r *CallRecord) { r.Policy = btPolicy(ModeNeverReplay, 1); r.Phase = ExecutingPhase(2) }),
		"bad call id":      with(func(r *CallRecord) { r.CallID = "c\n1" }),
	} {
		for opName, op := range map[string]func(*CallRecord) error{
			"decide":             func(c *CallRecord) error { return c.Decide(nil, "", btAt) },
			"dispatch":           func(c *CallRecord) error { return c.Dispatch(btAt) },
			"enter":              func(c *CallRecord) error { return c.Enter(1, btAt) },
			"retry":              func(c *CallRecord) error { return c.Retry(1, btAt) },
			"resume":             func(c *CallRecord) error { return c.Resume(WaitToolPermission, "x", btAt) },
			"resolve":            func(c *CallRecord) error { return c.Resolve(Resolver{By: "x"}, btAt) },
			"park":               func(c *CallRecord) error { return c.Park(WaitToolPermission, "x", btAt) },
			"complete":           func(c *CallRecord) error { return c.Complete(btText(c.CallID, "x"), btAt) },
			"complete immediate": func(c *CallRecord) error { return c.CompleteImmediate(btText(c.CallID, "x"), btAt) },
			"mark indeterminate": func(c *CallRecord) error { return c.MarkIndeterminate("x", btAt) },
		} {
			cp := c
			btWantErr(t, op(&cp), ErrInvalidPersistedState, name+"/"+opName)
		}
	}
	var nilRec *CallRecord
	btWantErr(t, nilRec.Validate(), ErrInvalidPersistedState, "nil record")
}

func TestAdoptPolicyFillsOnlyAMissingPolicy(t *testing.T) {
	r := btRec("c")
	if r.AdoptPolicy(btPolicy(ModeIdempotent, 9)) || r.Policy != btPolicy(ModeReplaySafe, 3) {
		t.Fatalf("a pinned policy was replaced: %+v", r.Policy)
	}
	r.Policy = ToolRecoveryPolicy{}
	if !r.AdoptPolicy(btPolicy(ModeIdempotent, 9)) || r.Policy != btPolicy(ModeIdempotent, 9) {
		t.Fatalf("a missing policy was not adopted: %+v", r.Policy)
	}
}

func TestOutputOfEachPhase(t *testing.T) {
	c := btRec("c")
	if _, ok := c.Output(); ok {
		t.Fatal("Requested has an output")
	}
	c.Phase = IndeterminatePhase("owner lease expired")
	out, ok := c.Output()
	want := ToolOutput{CallID: "c", Content: []ContentBlock{{Type: BlockText, Text: "tool outcome is indeterminate: owner lease expired"}}, IsError: true}
	if !ok || !batchOutputEqual(out, want) || c.Outcome() != OutcomeIndeterminate {
		t.Fatalf("indeterminate output %+v", out)
	}
	c.Phase = CompletedPhase(btText("c", "ok"))
	out, ok = c.Output()
	if !ok || !batchOutputEqual(out, btText("c", "ok")) || c.Outcome() != OutcomeCompleted {
		t.Fatalf("completed output %+v", out)
	}
	out.Content[0].Text = "tampered"
	if c.Phase.Output.Content[0].Text != "ok" {
		t.Fatal("Output aliases the record")
	}
}

func TestCloneSharesNothingATransitionWrites(t *testing.T) {
	r := btRec("c")
	btMust(t, r.Decide(&GateOutcome{Kind: GateAllow}, "", btAt), r.Dispatch(btAt))
	r.Timeline = r.Timeline[:1:2] // spare capacity: an append on a shallow copy would write into it
	before := btMustJSON(t, r)
	cp := r.Clone()
	btMust(t, cp.Enter(1, btAt))
	cp.Decision.Reason = "changed"
	if !bytes.Equal(btMustJSON(t, r), before) || len(r.Timeline[:2]) != 2 || r.Timeline[:2][1].Stage == StageEntered {
		t.Fatalf("a transition on the clone reached the original: %s", btMustJSON(t, r))
	}
}
