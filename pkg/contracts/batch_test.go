package contracts

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Test fixtures of the batch state machine. Names carry a "bt" prefix because other files
// of this package are written in parallel.

func btPolicy(mode ToolRecoveryMode, max uint16) ToolRecoveryPolicy {
	return ToolRecoveryPolicy{Mode: mode, MaxAttempts: max}
}

func btText(callID, text string) ToolOutput {
	return ToolOutput{CallID: callID, Content: []ContentBlock{{Type: BlockText, Text: text}}}
}

// btCall is a fresh Requested call with tool "tool-{id}" and arguments {"call": id}, like
// the original's two_call_batch.
func btCall(id string) DurableToolCall {
	return DurableToolCall{
		Call:           ToolCall{CallID: id, ToolID: "tool-" + id, Arguments: json.RawMessage(`{"call":"` + id + `"}`)},
		RecoveryPolicy: btPolicy(ModeReplaySafe, 3),
		Phase:          RequestedPhase(),
	}
}

func btBatch(t testing.TB, ids ...string) *ToolBatch {
	t.Helper()
	calls := make([]DurableToolCall, len(ids))
	for i, id := range ids {
		calls[i] = btCall(id)
	}
	b, err := NewToolBatch("r", 0, calls)
	if err != nil {
		t.Fatalf("NewToolBatch: %v", err)
	}
	return b
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

// btPatch marshals b to a generic value, lets edit change it, and returns the bytes: the
// Go form of the original's serde_json::to_value / value[...] = ... corruptions.
func btPatch(t testing.TB, b *ToolBatch, edit func(v map[string]any)) []byte {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(btMustJSON(t, b), &v); err != nil {
		t.Fatal(err)
	}
	edit(v)
	return btMustJSON(t, v)
}

func btCalls(v map[string]any) []any { return v["calls"].([]any) }

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

func TestOperationIdentityIsOwnedByTheBatchCoordinate(t *testing.T) {
	// O1: same run, step and call id reconstruct the same operation id; O2: another call
	// id of the same batch cannot collide.
	c := btCall("call-1")
	b, err := NewToolBatch("run-7", 3, []DurableToolCall{c})
	if err != nil {
		t.Fatal(err)
	}
	op := b.OperationID("call-1")
	if op != "tool-batch:run-7:3:call-1" {
		t.Fatalf("O1: operation id %q", op)
	}
	if op != OperationID("run-7", 3, "call-1") {
		t.Fatalf("O1: reconstruction from the durable coordinate differs: %q", OperationID("run-7", 3, "call-1"))
	}
	if op == b.OperationID("call-2") {
		t.Fatal("O2: distinct calls share an operation id")
	}
	if b.ID() != "tool-batch:run-7:3" || b.RunID() != "run-7" || b.Step() != 3 || b.Phase() != ToolBatchOpen {
		t.Fatalf("identity: id %q run %q step %d phase %q", b.ID(), b.RunID(), b.Step(), b.Phase())
	}
}

func TestTerminalOutputIsIdempotentAndFinalizationRequiresCompletion(t *testing.T) {
	b := btBatch(t, "c")
	btWantErr(t, b.Finalize(), ErrIncomplete, "finalize of a Requested call")
	if err := b.MarkExecuting("c"); err != nil {
		t.Fatal(err)
	}
	out := btText("c", "done")
	if err := b.Complete(out); err != nil {
		t.Fatal(err)
	}
	// An equal output spelled differently in its raw JSON is still equal.
	again := btText("c", "done")
	if err := b.Complete(again); err != nil {
		t.Fatalf("idempotent re-complete: %v", err)
	}
	btWantErr(t, b.Complete(btText("c", "different")), ErrInvalidTransition, "re-complete with another output")
	if err := b.Finalize(); err != nil {
		t.Fatal(err)
	}
	if b.Phase() != ToolBatchFinalized {
		t.Fatalf("phase %q", b.Phase())
	}
	btWantErr(t, b.MarkExecuting("c"), ErrBatchFinalized, "mutation after finalize")
	btWantErr(t, b.Complete(out), ErrBatchFinalized, "even an idempotent complete after finalize")
	btWantErr(t, b.Finalize(), ErrBatchFinalized, "second finalize")
	outs, err := b.Outputs()
	if err != nil || len(outs) != 1 || !batchOutputEqual(outs[0], out) {
		t.Fatalf("outputs %v, %v", outs, err)
	}
}

func TestAttemptBudgetIsEnforced(t *testing.T) {
	b := btBatch(t, "c")
	for want := uint16(1); want <= 3; want++ {
		if err := b.MarkExecuting("c"); err != nil {
			t.Fatalf("attempt %d: %v", want, err)
		}
		c, _ := b.Call("c")
		if c.Phase.Kind != PhaseExecuting || c.Phase.Attempt != want {
			t.Fatalf("attempt %d: phase %+v", want, c.Phase)
		}
	}
	before := btMustJSON(t, b)
	btWantErr(t, b.MarkExecuting("c"), ErrAttemptsExhausted, "fourth attempt of three")
	if string(btMustJSON(t, b)) != string(before) {
		t.Fatal("an exhausted attempt changed the batch")
	}

	// The u16 counter never wraps, whatever the budget.
	max := DurableToolCall{Call: btCall("m").Call, RecoveryPolicy: btPolicy(ModeReplaySafe, 65535), Phase: ExecutingPhase(65535)}
	btWantErr(t, max.MarkExecuting(), ErrAttemptsExhausted, "u16 overflow")
	if max.Phase.Attempt != 65535 {
		t.Fatalf("overflow changed the attempt to %d", max.Phase.Attempt)
	}
}

func TestApprovalMustMatchTheCommittedWait(t *testing.T) {
	b := btBatch(t, "c")
	if err := b.MarkAwaiting("c", WaitToolPermission, "approval-1"); err != nil {
		t.Fatal(err)
	}
	btWantErr(t, b.ResumeExecuting("c", WaitToolPermission, "stale"), ErrWaitMismatch, "stale correlation")
	btWantErr(t, b.ResumeExecuting("c", WaitDelegation, "approval-1"), ErrWaitMismatch, "wrong kind")
	if c, _ := b.Call("c"); c.Phase.Kind != PhaseAwaiting {
		t.Fatalf("a mismatched approval moved the call to %s", c.Phase.Kind)
	}
	if err := b.ResumeExecuting("c", WaitToolPermission, "approval-1"); err != nil {
		t.Fatal(err)
	}
	if c, _ := b.Call("c"); c.Phase.Kind != PhaseExecuting || c.Phase.Attempt != 1 {
		t.Fatalf("exact approval: phase %+v, want Executing{1}", c.Phase)
	}
}

func TestOneBatchAdmitsOnlyOneNonemptyDurableWait(t *testing.T) {
	// W1: the sole wait is established; W2: a parallel wait is rejected; W3: an empty
	// correlation is rejected.
	b := btBatch(t, "c1", "c2")
	if err := b.MarkAwaiting("c1", WaitToolPermission, "corr-1"); err != nil {
		t.Fatalf("W1: %v", err)
	}
	if a, ok := b.Awaiting(); !ok || a.Call.CallID != "c1" || *a.Phase.Wait != (ToolWait{Kind: WaitToolPermission, CorrelationID: "corr-1"}) {
		t.Fatalf("W1: awaiting call %+v, %v", a, ok)
	}
	btWantErr(t, b.MarkAwaiting("c2", WaitExternalResult, "corr-2"), ErrMultipleAwaitingCalls, "W2")
	// The rule holds even when the second call would otherwise be refused for its phase.
	if err := b.CompleteImmediate(btText("c2", "x")); err != nil {
		t.Fatal(err)
	}
	btWantErr(t, b.MarkAwaiting("c2", WaitExternalResult, "corr-2"), ErrMultipleAwaitingCalls, "W2 on a terminal call")
	// Re-awaiting the awaiting call itself is an invalid transition, not a second wait.
	btWantErr(t, b.MarkAwaiting("c1", WaitToolPermission, "corr-9"), ErrInvalidTransition, "re-await")

	empty := btBatch(t, "c1", "c2")
	btWantErr(t, empty.MarkAwaiting("c1", WaitToolPermission, ""), ErrEmptyWaitCorrelation, "W3")
	if _, ok := empty.Awaiting(); ok {
		t.Fatal("W3 left a wait behind")
	}
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
			b := btBatch(t, "c1", "c2")
			if err := b.MarkAwaiting("c1", tc.kind, "corr"); err != nil {
				t.Fatal(err)
			}
			before := btMustJSON(t, b)
			if err := b.ValidateAwaitingTicket("thread", btTicket(tc.reason, "c1", "tool-c1", "corr")); err != nil {
				t.Fatalf("%s/E1: %v", tc.rule, err)
			}
			if string(btMustJSON(t, b)) != string(before) {
				t.Fatalf("%s/E1 mutated the batch", tc.rule)
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

	b := btBatch(t, "c1", "c2")
	if err := b.MarkAwaiting("c1", WaitToolPermission, "corr"); err != nil {
		t.Fatal(err)
	}
	exact := btTicket(ReasonPermission, "c1", "tool-c1", "corr")
	with := func(edit func(*ResumeTicket)) ResumeTicket {
		t := exact
		edit(&t)
		return t
	}
	delegating := btBatch(t, "c1", "c2")
	if err := delegating.MarkAwaiting("c1", WaitDelegation, "corr"); err != nil {
		t.Fatal(err)
	}
	noWait := btBatch(t, "c1", "c2")
	finalized := btBatch(t, "c1", "c2")
	for _, id := range []string{"c1", "c2"} {
		if err := finalized.CompleteImmediate(btText(id, "done")); err != nil {
			t.Fatal(err)
		}
	}
	if err := finalized.Finalize(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rule   string
		batch  *ToolBatch
		thread string
		ticket ResumeTicket
		want   error
	}{
		{"A2 run", b, "thread", with(func(t *ResumeTicket) { t.RunID = "other" }), ErrTicketRunMismatch},
		{"A3 thread", b, "thread", with(func(t *ResumeTicket) { t.ThreadID = "other" }), ErrTicketThreadMismatch},
		{"A3 run thread", b, "other", exact, ErrTicketThreadMismatch},
		{"A3b batch", b, "thread", with(func(t *ResumeTicket) { t.BatchID = BatchID("r", 1) }), ErrTicketBatchMismatch},
		{"A4 not a tool call", b, "thread", with(func(t *ResumeTicket) { t.Reason = "delegation" }), ErrTicketNotToolCall},
		{"A5 call", b, "thread", btTicket(ReasonPermission, "c2", "tool-c2", "corr"), ErrTicketCallMismatch},
		{"A6 kind", b, "thread", btTicket(ReasonClientExecution, "c1", "tool-c1", "corr"), ErrTicketKindMismatch},
		{"A6 delegation wait", delegating, "thread", exact, ErrTicketKindMismatch},
		{"A7 correlation", b, "thread", btTicket(ReasonPermission, "c1", "tool-c1", "other"), ErrTicketCorrelationMismatch},
		{"A8 tool id", b, "thread", btTicket(ReasonPermission, "c1", "other", "corr"), ErrTicketToolMismatch},
		{"A8 arguments", b, "thread", with(func(t *ResumeTicket) { t.Arguments = json.RawMessage(`{"call":"c2"}`) }), ErrTicketToolMismatch},
		{"A8 arguments null", b, "thread", with(func(t *ResumeTicket) { t.Arguments = nil }), ErrTicketToolMismatch},
		{"A9 missing wait", noWait, "thread", exact, ErrTicketMissingAwaitingCall},
		{"A10 finalized", finalized, "thread", exact, ErrTicketFinalized},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			before := btMustJSON(t, tc.batch)
			btWantErr(t, tc.batch.ValidateAwaitingTicket(tc.thread, tc.ticket), tc.want, tc.rule)
			if string(btMustJSON(t, tc.batch)) != string(before) {
				t.Fatalf("%s mutated the batch", tc.rule)
			}
		})
	}

	// Arguments are compared canonically: key order, whitespace and number spelling do not
	// matter.
	reordered := btBatch(t, "c1")
	reordered.calls[0].Call.Arguments = json.RawMessage(`{"b":[1,2.50],"a":{"x":true}}`)
	if err := reordered.MarkAwaiting("c1", WaitToolPermission, "corr"); err != nil {
		t.Fatal(err)
	}
	canon := with(func(t *ResumeTicket) { t.Arguments = json.RawMessage(` { "a" : {"x":true}, "b":[1.0, 25e-1] } `) })
	if err := reordered.ValidateAwaitingTicket("thread", canon); err != nil {
		t.Fatalf("canonical argument equality: %v", err)
	}
}

func TestValidateCallAwaitsTicket(t *testing.T) {
	c := btCall("c1")
	exact := btTicket(ReasonScheduledAction, "c1", "tool-c1", "corr")
	btWantErr(t, ValidateCallAwaitsTicket(c, exact), ErrTicketMissingAwaitingCall, "Requested call")
	if err := c.MarkAwaiting(WaitScheduledAction, "corr"); err != nil {
		t.Fatal(err)
	}
	if err := ValidateCallAwaitsTicket(c, exact); err != nil {
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
			btWantErr(t, ValidateCallAwaitsTicket(c, tk), tc.want, tc.name)
		})
	}
}

func TestPersistedBatchWithMultipleWaitsIsRejectedBeforeRecovery(t *testing.T) {
	one := btBatch(t, "c1", "c2")
	if err := one.MarkAwaiting("c1", WaitToolPermission, "corr-1"); err != nil {
		t.Fatal(err)
	}
	var ok ToolBatch
	if err := json.Unmarshal(btMustJSON(t, one), &ok); err != nil {
		t.Fatalf("P1: one wait must decode: %v", err)
	}
	two := btPatch(t, one, func(v map[string]any) {
		btCalls(v)[1].(map[string]any)["phase"] = map[string]any{
			"Awaiting": map[string]any{"wait": map[string]any{"kind": "external_result", "correlation_id": "corr-2"}},
		}
	})
	var got ToolBatch
	err := json.Unmarshal(two, &got)
	btWantErr(t, err, ErrInvalidPersistedState, "P2")
	btWantErr(t, err, ErrMultipleAwaitingCalls, "P2 names the rule")
}

func TestEndingARunSealsEveryUnfinishedCallIdempotently(t *testing.T) {
	b := btBatch(t, "done", "exec", "wait", "req", "lost")
	steps := []error{
		b.CompleteImmediate(btText("done", "ok")),
		b.MarkExecuting("exec"),
		b.MarkAwaiting("wait", WaitToolPermission, "corr"),
		b.MarkIndeterminate("lost", "earlier"),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("setup %d: %v", i, err)
		}
	}
	sealed, err := b.SealOnRunEnd("run ended")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sealed, []string{"exec", "wait", "req"}) {
		t.Fatalf("sealed %v, want exactly the non-terminal calls in model order", sealed)
	}
	if b.Phase() != ToolBatchFinalized {
		t.Fatalf("phase %q", b.Phase())
	}
	want := map[string]ToolCallPhase{
		"done": CompletedPhase(btText("done", "ok")),
		"exec": IndeterminatePhase("run ended"),
		"wait": IndeterminatePhase("run ended"),
		"req":  IndeterminatePhase("run ended"),
		"lost": IndeterminatePhase("earlier"),
	}
	for id, p := range want {
		c, _ := b.Call(id)
		if !btPhaseEqual(c.Phase, p) {
			t.Fatalf("call %s: phase %+v, want %+v", id, c.Phase, p)
		}
	}
	snapshot := btMustJSON(t, b)
	again, err := b.SealOnRunEnd("different retry reason")
	if err != nil || again != nil {
		t.Fatalf("second seal: %v, %v", again, err)
	}
	if string(btMustJSON(t, b)) != string(snapshot) {
		t.Fatal("second seal changed the batch")
	}
	outs, err := b.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	if o := outs[1]; !o.IsError || o.CallID != "exec" || o.Content[0].Text != "tool outcome is indeterminate: run ended" {
		t.Fatalf("indeterminate output %+v", o)
	}
}

func TestPersistedFinalizedBatchWithRequestedWorkIsRejectedAtDecode(t *testing.T) {
	data := btPatch(t, btBatch(t, "c"), func(v map[string]any) { v["phase"] = "finalized" })
	var b ToolBatch
	btWantErr(t, json.Unmarshal(data, &b), ErrInvalidPersistedState, "finalized with Requested work")
}

func TestPersistedEmptyOrDuplicateBatchesNeverConstructTheAggregate(t *testing.T) {
	empty := btPatch(t, btBatch(t, "c"), func(v map[string]any) { v["calls"] = []any{} })
	var b ToolBatch
	err := json.Unmarshal(empty, &b)
	btWantErr(t, err, ErrInvalidPersistedState, "empty")
	btWantErr(t, err, ErrEmptyBatch, "empty names the rule")
	dup := btPatch(t, btBatch(t, "c"), func(v map[string]any) { v["calls"] = []any{btCalls(v)[0], btCalls(v)[0]} })
	err = json.Unmarshal(dup, &b)
	btWantErr(t, err, ErrDuplicateCall, "duplicate")
	if b.phase != "" || b.calls != nil {
		t.Fatal("a failed decode wrote into the target")
	}

	_, err = NewToolBatch("r", 0, nil)
	btWantErr(t, err, ErrEmptyBatch, "constructor: empty")
	_, err = NewToolBatch("r", 0, []DurableToolCall{btCall("c"), btCall("c")})
	btWantErr(t, err, ErrDuplicateCall, "constructor: duplicate")
}

func TestBatchIdentityIsDerivedFromAndBoundToANonEmptyRun(t *testing.T) {
	for _, run := range []string{"", "   "} {
		_, err := NewToolBatch(run, 0, []DurableToolCall{btCall("c")})
		btWantErr(t, err, ErrEmptyRunID, "run "+run)
	}
	_, err := NewToolBatch("a:b", 0, []DurableToolCall{btCall("c")})
	btWantErr(t, err, ErrInvalidBatchID, "run id that cannot form a batch id")
	_, err = NewToolBatch("r", -1, []DurableToolCall{btCall("c")})
	btWantErr(t, err, ErrInvalidBatchID, "negative step")

	for _, tc := range []struct {
		name string
		edit func(map[string]any)
		want error
	}{
		{"another run", func(v map[string]any) { v["id"] = "tool-batch:another-run:0" }, ErrInvalidBatchID},
		{"no prefix", func(v map[string]any) { v["id"] = "r:0" }, ErrInvalidBatchID},
		{"no step", func(v map[string]any) { v["id"] = "tool-batch:r" }, ErrInvalidBatchID},
		{"empty run", func(v map[string]any) { v["run_id"] = ""; v["id"] = "tool-batch::0" }, ErrEmptyRunID},
		{"unknown phase", func(v map[string]any) { v["phase"] = "published" }, ErrInvalidPersistedState},
		{"unknown field", func(v map[string]any) { v["extra"] = 1 }, ErrInvalidPersistedState},
		{"missing field", func(v map[string]any) { delete(v, "phase") }, ErrInvalidPersistedState},
		{"null calls", func(v map[string]any) { v["calls"] = nil }, ErrInvalidPersistedState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b ToolBatch
			err := json.Unmarshal(btPatch(t, btBatch(t, "c"), tc.edit), &b)
			btWantErr(t, err, ErrInvalidPersistedState, tc.name)
			btWantErr(t, err, tc.want, tc.name)
		})
	}
	var step7 ToolBatch
	good, _ := NewToolBatch("run-1", 7, []DurableToolCall{btCall("c")})
	if err := json.Unmarshal(btMustJSON(t, good), &step7); err != nil || step7.Step() != 7 || step7.RunID() != "run-1" {
		t.Fatalf("decode derives the step from the id: %v %d", err, step7.Step())
	}
}

func TestPersistedCompletedCallCannotContainAnotherCallsOutput(t *testing.T) {
	b := btBatch(t, "c")
	if err := b.MarkExecuting("c"); err != nil {
		t.Fatal(err)
	}
	if err := b.Complete(btText("c", "ok")); err != nil {
		t.Fatal(err)
	}
	data := btPatch(t, b, func(v map[string]any) {
		btCalls(v)[0].(map[string]any)["phase"].(map[string]any)["Completed"].(map[string]any)["call_id"] = "different-call"
	})
	var got ToolBatch
	btWantErr(t, json.Unmarshal(data, &got), ErrInvalidPersistedState, "foreign output")

	// The transitions refuse to write it in the first place.
	c := btCall("c")
	if err := c.MarkExecuting(); err != nil {
		t.Fatal(err)
	}
	btWantErr(t, c.Complete(btText("different-call", "ok")), ErrUnknownCall, "call-level foreign output")
	if c.Phase.Kind != PhaseExecuting {
		t.Fatalf("a refused foreign output moved the call to %s", c.Phase.Kind)
	}
}

func TestPersistedStateRulesAtDecode(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*ToolBatch) error
		edit  func(call map[string]any)
		want  error
	}{
		{"attempt zero", (*ToolBatch).mbExec, func(c map[string]any) { c["phase"] = map[string]any{"Executing": map[string]any{"attempt": 0}} }, ErrInvalidPersistedState},
		{"attempt over budget", (*ToolBatch).mbExec, func(c map[string]any) { c["phase"] = map[string]any{"Executing": map[string]any{"attempt": 4}} }, ErrInvalidPersistedState},
		{"empty correlation", nil, func(c map[string]any) {
			c["phase"] = map[string]any{"Awaiting": map[string]any{"wait": map[string]any{"kind": "tool_permission", "correlation_id": ""}}}
		}, ErrEmptyWaitCorrelation},
		{"staged state before a result", nil, func(c map[string]any) {
			c["result_state"] = []any{map[string]any{"key": "k", "scope": "run", "merge": "disjoint", "action": map[string]any{"kind": "remove"}}}
		}, ErrInvalidPersistedState},
		{"zero max attempts", nil, func(c map[string]any) {
			c["recovery_policy"] = map[string]any{"mode": "replay_safe", "max_attempts": 0}
		}, ErrInvalidPersistedState},
		{"unknown mode", nil, func(c map[string]any) { c["recovery_policy"] = map[string]any{"mode": "sometimes", "max_attempts": 1} }, ErrInvalidPersistedState},
		{"invalid call id", nil, func(c map[string]any) { c["call"].(map[string]any)["call_id"] = "a.b" }, ErrInvalidID},
		{"unknown call field", nil, func(c map[string]any) { c["extra"] = true }, ErrInvalidPersistedState},
		{"missing phase", nil, func(c map[string]any) { delete(c, "phase") }, ErrInvalidPersistedState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := btBatch(t, "c")
			if tc.setup != nil {
				if err := tc.setup(b); err != nil {
					t.Fatal(err)
				}
			}
			data := btPatch(t, b, func(v map[string]any) { tc.edit(btCalls(v)[0].(map[string]any)) })
			var got ToolBatch
			err := json.Unmarshal(data, &got)
			btWantErr(t, err, ErrInvalidPersistedState, tc.name)
			btWantErr(t, err, tc.want, tc.name)
		})
	}
}

func (b *ToolBatch) mbExec() error { return b.MarkExecuting(b.calls[0].Call.CallID) }

func TestNewToolBatchRefusesCallsThatAreNotFresh(t *testing.T) {
	staged := btCall("c")
	staged.ResultState = []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionRemove}}}
	executing := btCall("c")
	executing.Phase = ExecutingPhase(1)
	stray := btCall("c")
	stray.Phase.Reason = "x"
	noPolicy := btCall("c")
	noPolicy.RecoveryPolicy = ToolRecoveryPolicy{}
	badID := btCall("c")
	badID.Call.CallID = "c:1"
	for name, c := range map[string]DurableToolCall{
		"staged": staged, "executing": executing, "stray field": stray, "no policy": noPolicy, "bad id": badID,
	} {
		_, err := NewToolBatch("r", 0, []DurableToolCall{c})
		btWantErr(t, err, ErrInvalidCall, name)
	}
	// The batch owns its calls: later changes by the caller cannot reach it.
	in := []DurableToolCall{btCall("c")}
	b, err := NewToolBatch("r", 0, in)
	if err != nil {
		t.Fatal(err)
	}
	in[0].Call.Arguments[2] = 'X'
	in[0].Phase = ExecutingPhase(1)
	if c, _ := b.Call("c"); c.Phase.Kind != PhaseRequested || string(c.Call.Arguments) != `{"call":"c"}` {
		t.Fatalf("batch aliased its input: %+v", c)
	}
}

func TestAccessorsReturnCopies(t *testing.T) {
	b := btBatch(t, "c")
	if err := b.MarkExecuting("c"); err != nil {
		t.Fatal(err)
	}
	if err := b.Complete(btText("c", "ok")); err != nil {
		t.Fatal(err)
	}
	before := btMustJSON(t, b)
	calls := b.Calls()
	calls[0].Phase.Output.Content[0].Text = "tampered"
	calls[0].Call.Arguments[0] = ' '
	c, _ := b.Call("c")
	c.Phase.Output.CallID = "x"
	out, _ := c.Output()
	out.Content[0].Text = "tampered"
	clone := b.Clone()
	if err := clone.Finalize(); err != nil {
		t.Fatal(err)
	}
	if string(btMustJSON(t, b)) != string(before) || b.Phase() != ToolBatchOpen {
		t.Fatal("a returned copy aliased the batch")
	}
	if _, err := b.Outputs(); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("outputs of an open batch: %v", err)
	}
}

func TestZeroValueBatchFailsClosed(t *testing.T) {
	var b ToolBatch
	btWantErr(t, b.MarkExecuting("c"), ErrInvalidPersistedState, "mutator")
	_, err := b.SealOnRunEnd("x")
	btWantErr(t, err, ErrInvalidPersistedState, "seal")
	btWantErr(t, b.Validate(), ErrEmptyRunID, "validate")
	_, err = json.Marshal(b)
	btWantErr(t, err, ErrEmptyRunID, "marshal")
	btWantErr(t, b.ValidateAwaitingTicket("thread", btTicket(ReasonPermission, "c", "t", "x")), ErrInvalidPersistedState, "ticket check")
	var nilBatch *ToolBatch
	btWantErr(t, nilBatch.Validate(), ErrInvalidPersistedState, "nil validate")
}

func TestUnknownCallIsRefusedByEveryMutator(t *testing.T) {
	b := btBatch(t, "c")
	for name, err := range map[string]error{
		"mark executing":     b.MarkExecuting("x"),
		"resume executing":   b.ResumeExecuting("x", WaitToolPermission, "corr"),
		"mark awaiting":      b.MarkAwaiting("x", WaitToolPermission, "corr"),
		"complete":           b.Complete(btText("x", "ok")),
		"complete immediate": b.CompleteImmediate(btText("x", "ok")),
		"mark indeterminate": b.MarkIndeterminate("x", "why"),
		"set result state":   b.SetResultState("x", nil),
	} {
		btWantErr(t, err, ErrUnknownCall, name)
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

// TestEveryPhaseOperationPairHasExactlyItsDocumentedPrecondition is the Go form of the
// original's Kani proofs over the transition kernel: every (phase × operation) pair, at the
// call level and through the batch, yields exactly the documented result, and a refused
// operation changes nothing.
func TestEveryPhaseOperationPairHasExactlyItsDocumentedPrecondition(t *testing.T) {
	done := btText("c", "done")
	other := btText("c", "other")
	state := []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet, Value: json.RawMessage(`1`)}}}
	phases := map[string]ToolCallPhase{
		"Requested":     RequestedPhase(),
		"Executing1":    ExecutingPhase(1),
		"ExecutingMax":  ExecutingPhase(3),
		"Awaiting":      AwaitingPhase(WaitToolPermission, "corr"),
		"Completed":     CompletedPhase(done),
		"Indeterminate": IndeterminatePhase("lost"),
	}
	type want struct {
		err   error
		phase *ToolCallPhase // result on success; nil = unchanged
		state bool           // result state staged on success
	}
	to := func(p ToolCallPhase) want { return want{phase: &p} }
	fail := func(err error) want { return want{err: err} }
	same := want{}
	inv := fail(ErrInvalidTransition)
	type op struct {
		call  func(*DurableToolCall) error
		batch func(*ToolBatch) error
		want  map[string]want
	}
	ops := map[string]op{
		"mark_executing": {
			func(c *DurableToolCall) error { return c.MarkExecuting() },
			func(b *ToolBatch) error { return b.MarkExecuting("c") },
			map[string]want{"Requested": to(ExecutingPhase(1)), "Executing1": to(ExecutingPhase(2)), "ExecutingMax": fail(ErrAttemptsExhausted),
				"Awaiting": inv, "Completed": inv, "Indeterminate": inv},
		},
		"resume_executing_match": {
			func(c *DurableToolCall) error { return c.ResumeExecuting(WaitToolPermission, "corr") },
			func(b *ToolBatch) error { return b.ResumeExecuting("c", WaitToolPermission, "corr") },
			map[string]want{"Requested": inv, "Executing1": inv, "ExecutingMax": inv, "Awaiting": to(ExecutingPhase(1)), "Completed": inv, "Indeterminate": inv},
		},
		"resume_executing_stale_correlation": {
			func(c *DurableToolCall) error { return c.ResumeExecuting(WaitToolPermission, "stale") },
			func(b *ToolBatch) error { return b.ResumeExecuting("c", WaitToolPermission, "stale") },
			map[string]want{"Requested": inv, "Executing1": inv, "ExecutingMax": inv, "Awaiting": fail(ErrWaitMismatch), "Completed": inv, "Indeterminate": inv},
		},
		"resume_executing_wrong_kind": {
			func(c *DurableToolCall) error { return c.ResumeExecuting(WaitScheduledAction, "corr") },
			func(b *ToolBatch) error { return b.ResumeExecuting("c", WaitScheduledAction, "corr") },
			map[string]want{"Requested": inv, "Executing1": inv, "ExecutingMax": inv, "Awaiting": fail(ErrWaitMismatch), "Completed": inv, "Indeterminate": inv},
		},
		"mark_awaiting": {
			func(c *DurableToolCall) error { return c.MarkAwaiting(WaitExternalResult, "corr-2") },
			func(b *ToolBatch) error { return b.MarkAwaiting("c", WaitExternalResult, "corr-2") },
			map[string]want{"Requested": to(AwaitingPhase(WaitExternalResult, "corr-2")), "Executing1": to(AwaitingPhase(WaitExternalResult, "corr-2")),
				"ExecutingMax": to(AwaitingPhase(WaitExternalResult, "corr-2")), "Awaiting": inv, "Completed": inv, "Indeterminate": inv},
		},
		"mark_awaiting_empty_correlation": {
			func(c *DurableToolCall) error { return c.MarkAwaiting(WaitExternalResult, "") },
			func(b *ToolBatch) error { return b.MarkAwaiting("c", WaitExternalResult, "") },
			map[string]want{"Requested": fail(ErrEmptyWaitCorrelation), "Executing1": fail(ErrEmptyWaitCorrelation), "ExecutingMax": fail(ErrEmptyWaitCorrelation),
				"Awaiting": inv, "Completed": inv, "Indeterminate": inv},
		},
		"mark_awaiting_unknown_kind": {
			func(c *DurableToolCall) error { return c.MarkAwaiting("approval", "corr") },
			func(b *ToolBatch) error { return b.MarkAwaiting("c", "approval", "corr") },
			map[string]want{"Requested": inv, "Executing1": inv, "ExecutingMax": inv, "Awaiting": inv, "Completed": inv, "Indeterminate": inv},
		},
		"complete_equal": {
			func(c *DurableToolCall) error { return c.Complete(done) },
			func(b *ToolBatch) error { return b.Complete(done) },
			map[string]want{"Requested": inv, "Executing1": to(CompletedPhase(done)), "ExecutingMax": to(CompletedPhase(done)),
				"Awaiting": to(CompletedPhase(done)), "Completed": same, "Indeterminate": inv},
		},
		"complete_different": {
			func(c *DurableToolCall) error { return c.Complete(other) },
			func(b *ToolBatch) error { return b.Complete(other) },
			map[string]want{"Requested": inv, "Executing1": to(CompletedPhase(other)), "ExecutingMax": to(CompletedPhase(other)),
				"Awaiting": to(CompletedPhase(other)), "Completed": inv, "Indeterminate": inv},
		},
		"complete_foreign_output": {
			func(c *DurableToolCall) error { return c.Complete(btText("x", "done")) },
			func(b *ToolBatch) error { return b.Complete(btText("x", "done")) },
			map[string]want{"Requested": fail(ErrUnknownCall), "Executing1": fail(ErrUnknownCall), "ExecutingMax": fail(ErrUnknownCall),
				"Awaiting": fail(ErrUnknownCall), "Completed": fail(ErrUnknownCall), "Indeterminate": fail(ErrUnknownCall)},
		},
		"complete_immediate_equal": {
			func(c *DurableToolCall) error { return c.CompleteImmediate(done) },
			func(b *ToolBatch) error { return b.CompleteImmediate(done) },
			map[string]want{"Requested": to(CompletedPhase(done)), "Executing1": inv, "ExecutingMax": inv, "Awaiting": inv, "Completed": same, "Indeterminate": inv},
		},
		"complete_immediate_different": {
			func(c *DurableToolCall) error { return c.CompleteImmediate(other) },
			func(b *ToolBatch) error { return b.CompleteImmediate(other) },
			map[string]want{"Requested": to(CompletedPhase(other)), "Executing1": inv, "ExecutingMax": inv, "Awaiting": inv, "Completed": inv, "Indeterminate": inv},
		},
		"mark_indeterminate": {
			func(c *DurableToolCall) error { return c.MarkIndeterminate("why") },
			func(b *ToolBatch) error { return b.MarkIndeterminate("c", "why") },
			map[string]want{"Requested": to(IndeterminatePhase("why")), "Executing1": to(IndeterminatePhase("why")), "ExecutingMax": to(IndeterminatePhase("why")),
				"Awaiting": to(IndeterminatePhase("why")), "Completed": inv, "Indeterminate": to(IndeterminatePhase("why"))},
		},
		"set_result_state": {
			func(c *DurableToolCall) error { return c.SetResultState(state) },
			func(b *ToolBatch) error { return b.SetResultState("c", state) },
			map[string]want{"Requested": inv, "Executing1": inv, "ExecutingMax": inv, "Awaiting": inv,
				"Completed": {state: true}, "Indeterminate": {state: true}},
		},
	}
	for opName, o := range ops {
		if len(o.want) != len(phases) {
			t.Fatalf("%s: %d expectations for %d phases", opName, len(o.want), len(phases))
		}
		for phaseName, start := range phases {
			w, ok := o.want[phaseName]
			if !ok {
				t.Fatalf("%s: no expectation for %s", opName, phaseName)
			}
			check := func(t *testing.T, got DurableToolCall, err error) {
				t.Helper()
				if w.err != nil {
					if !errors.Is(err, w.err) {
						t.Fatalf("error %v, want %v", err, w.err)
					}
					if !btPhaseEqual(got.Phase, start) || got.ResultState != nil {
						t.Fatalf("refused operation changed the call: %+v", got)
					}
					return
				}
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				wantPhase := start
				if w.phase != nil {
					wantPhase = *w.phase
				}
				if !btPhaseEqual(got.Phase, wantPhase) {
					t.Fatalf("phase %+v, want %+v", got.Phase, wantPhase)
				}
				if w.state != (got.ResultState != nil) {
					t.Fatalf("result state %v, want staged=%v", got.ResultState, w.state)
				}
				if err := got.Validate(); err != nil {
					t.Fatalf("result is invalid: %v", err)
				}
			}
			t.Run(opName+"/"+phaseName+"/call", func(t *testing.T) {
				c := btCall("c")
				c.Phase = batchCloneCall(DurableToolCall{Phase: start}).Phase
				err := o.call(&c)
				check(t, c, err)
			})
			t.Run(opName+"/"+phaseName+"/batch", func(t *testing.T) {
				b := btBatch(t, "c")
				b.calls[0].Phase = batchCloneCall(DurableToolCall{Phase: start}).Phase
				err := o.batch(b)
				got, _ := b.Call("c")
				check(t, got, err)
				if err == nil {
					if verr := b.Validate(); verr != nil {
						t.Fatalf("batch invalid after success: %v", verr)
					}
				}
			})
			t.Run(opName+"/"+phaseName+"/finalized", func(t *testing.T) {
				if !start.IsTerminal() {
					return // only a batch of terminal calls can be finalized
				}
				b := btBatch(t, "c")
				b.calls[0].Phase = batchCloneCall(DurableToolCall{Phase: start}).Phase
				if err := b.Finalize(); err != nil {
					t.Fatal(err)
				}
				before := btMustJSON(t, b)
				btWantErr(t, o.batch(b), ErrBatchFinalized, "finalized")
				if string(btMustJSON(t, b)) != string(before) {
					t.Fatal("refused operation changed a finalized batch")
				}
			})
		}
	}
}

func TestTransitionsRefuseAMalformedCall(t *testing.T) {
	for name, c := range map[string]DurableToolCall{
		"unset phase":       {Call: btCall("c").Call, RecoveryPolicy: btPolicy(ModeNeverReplay, 3)},
		"awaiting no wait":  {Call: btCall("c").Call, RecoveryPolicy: btPolicy(ModeNeverReplay, 3), Phase: ToolCallPhase{Kind: PhaseAwaiting}},
		"completed no out":  {Call: btCall("c").Call, RecoveryPolicy: btPolicy(ModeNeverReplay, 3), Phase: ToolCallPhase{Kind: PhaseCompleted}},
		"zero budget":       {Call: btCall("c").Call, Phase: RequestedPhase()},
		"attempt over max":  {Call: btCall("c").Call, RecoveryPolicy: btPolicy(ModeNeverReplay, 1), Phase: ExecutingPhase(2)},
		"staged, requested": {Call: btCall("c").Call, RecoveryPolicy: btPolicy(ModeNeverReplay, 1), Phase: RequestedPhase(), ResultState: []Command{{Key: "k"}}},
	} {
		for opName, op := range map[string]func(*DurableToolCall) error{
			"mark executing":     (*DurableToolCall).MarkExecuting,
			"resume executing":   func(c *DurableToolCall) error { return c.ResumeExecuting(WaitToolPermission, "x") },
			"mark awaiting":      func(c *DurableToolCall) error { return c.MarkAwaiting(WaitToolPermission, "x") },
			"complete":           func(c *DurableToolCall) error { return c.Complete(btText("c", "x")) },
			"complete immediate": func(c *DurableToolCall) error { return c.CompleteImmediate(btText("c", "x")) },
			"mark indeterminate": func(c *DurableToolCall) error { return c.MarkIndeterminate("x") },
			"set result state":   func(c *DurableToolCall) error { return c.SetResultState(nil) },
		} {
			cp := c
			btWantErr(t, op(&cp), ErrInvalidPersistedState, name+"/"+opName)
		}
	}
}

func TestPhaseJSONDecodingFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want error
	}{
		{"null", `null`, ErrInvalidPersistedState},
		{"number", `1`, ErrInvalidPersistedState},
		{"unknown unit variant", `"Executing"`, ErrInvalidPersistedState},
		{"lower-case unit", `"requested"`, ErrInvalidPersistedState},
		{"unit as object", `{"Requested":null}`, ErrInvalidPersistedState},
		{"unknown variant", `{"Running":{}}`, ErrInvalidPersistedState},
		{"two variants", `{"Executing":{"attempt":1},"Indeterminate":{"reason":"x"}}`, ErrInvalidPersistedState},
		{"duplicate variant", `{"Executing":{"attempt":1},"Executing":{"attempt":2}}`, ErrInvalidPersistedState},
		{"empty object", `{}`, ErrInvalidPersistedState},
		{"attempt zero", `{"Executing":{"attempt":0}}`, ErrInvalidPersistedState},
		{"attempt missing", `{"Executing":{}}`, ErrInvalidPersistedState},
		{"attempt null", `{"Executing":{"attempt":null}}`, ErrInvalidPersistedState},
		{"attempt negative", `{"Executing":{"attempt":-1}}`, ErrInvalidPersistedState},
		{"attempt overflow", `{"Executing":{"attempt":65536}}`, ErrInvalidPersistedState},
		{"attempt wrong case", `{"Executing":{"Attempt":1}}`, ErrInvalidPersistedState},
		{"attempt extra field", `{"Executing":{"attempt":1,"x":1}}`, ErrInvalidPersistedState},
		{"wait missing", `{"Awaiting":{}}`, ErrInvalidPersistedState},
		{"wait kind unknown", `{"Awaiting":{"wait":{"kind":"ToolPermission","correlation_id":"c"}}}`, ErrInvalidPersistedState},
		{"wait correlation missing", `{"Awaiting":{"wait":{"kind":"tool_permission"}}}`, ErrInvalidPersistedState},
		{"wait correlation empty", `{"Awaiting":{"wait":{"kind":"tool_permission","correlation_id":""}}}`, ErrEmptyWaitCorrelation},
		{"completed null", `{"Completed":null}`, ErrInvalidPersistedState},
		{"completed missing call id", `{"Completed":{"content":[],"is_error":false}}`, ErrInvalidPersistedState},
		{"completed unknown field", `{"Completed":{"call_id":"c","content":[],"is_error":false,"x":1}}`, ErrInvalidPersistedState},
		{"indeterminate reason missing", `{"Indeterminate":{}}`, ErrInvalidPersistedState},
		{"indeterminate reason null", `{"Indeterminate":{"reason":null}}`, ErrInvalidPersistedState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ExecutingPhase(2)
			err := json.Unmarshal([]byte(tc.in), &p)
			btWantErr(t, err, tc.want, tc.in)
			if p.Kind != PhaseExecuting || p.Attempt != 2 {
				t.Fatalf("a failed decode changed the target to %+v", p)
			}
		})
	}
	var p ToolCallPhase
	if err := json.Unmarshal([]byte(`{"Awaiting":{"wait":{"kind":"approval","correlation_id":"c"}}}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Wait.Kind != WaitToolPermission {
		t.Fatalf("alias decoded as %q", p.Wait.Kind)
	}
	if b := btMustJSON(t, p); string(b) != `{"Awaiting":{"wait":{"kind":"tool_permission","correlation_id":"c"}}}` {
		t.Fatalf("alias re-encoded as %s", b)
	}
	for name, bad := range map[string]ToolCallPhase{
		"unset":            {},
		"attempt zero":     ExecutingPhase(0),
		"stray reason":     {Kind: PhaseRequested, Reason: "x"},
		"stray attempt":    {Kind: PhaseCompleted, Attempt: 1, Output: &ToolOutput{CallID: "c"}},
		"awaiting no wait": {Kind: PhaseAwaiting},
		"bad wait kind":    AwaitingPhase("later", "c"),
	} {
		if _, err := json.Marshal(bad); !errors.Is(err, ErrInvalidPersistedState) {
			t.Fatalf("marshal %s: %v", name, err)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	for p, want := range map[PhaseKind]bool{
		PhaseRequested: false, PhaseExecuting: false, PhaseAwaiting: false, PhaseCompleted: true, PhaseIndeterminate: true, "": false,
	} {
		if (ToolCallPhase{Kind: p}).IsTerminal() != want {
			t.Fatalf("%q terminal != %v", p, want)
		}
	}
}

func TestOutputOfEachPhase(t *testing.T) {
	c := btCall("c")
	if _, ok := c.Output(); ok {
		t.Fatal("Requested has an output")
	}
	c.Phase = IndeterminatePhase("owner lease expired")
	out, ok := c.Output()
	want := ToolOutput{CallID: "c", Content: []ContentBlock{{Type: BlockText, Text: "tool outcome is indeterminate: owner lease expired"}}, IsError: true}
	if !ok || !batchOutputEqual(out, want) {
		t.Fatalf("indeterminate output %+v", out)
	}
	c.Phase = CompletedPhase(btText("c", "ok"))
	if out, ok := c.Output(); !ok || !batchOutputEqual(out, btText("c", "ok")) {
		t.Fatalf("completed output %+v", out)
	}
}

func TestCanonicalJSONEquality(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{` {"a" : [1, 2]} `, `{"a":[1,2]}`, true},
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`100`, `1e2`, true},
		{`0.25`, `25e-2`, true},
		{`-0`, `0`, true},
		{`0.0`, `0e10`, true},
		{`9007199254740993`, `9007199254740992`, false},
		{`1`, `-1`, false},
		{`1`, `10`, false},
		{`0.1`, `1`, false},
		{`1e2`, `1e3`, false},
		{`1e400`, `1e400`, true},
		{`1e400`, `10e399`, true},
		{`1e9223372036854775807`, `10e9223372036854775807`, false},
		{`"a\u0062"`, `"ab"`, true},
		{`""`, `null`, false},
		{``, `null`, true},
		{`{}`, `null`, false},
		{`[1,2]`, `[2,1]`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`{"a":true}`, `{"a":"true"}`, false},
		{`{not json`, `{not json`, true},
		{`{not json`, `{not  json`, false},
	} {
		if got := batchJSONEqual(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("batchJSONEqual(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := batchJSONEqual(json.RawMessage(tc.b), json.RawMessage(tc.a)); got != tc.want {
			t.Errorf("batchJSONEqual(%s, %s) = %v, want %v (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestOutputEqualityCoversEveryField(t *testing.T) {
	// The equality helper compares fields by name; this guard fails when a field is added to
	// one of the compared types so that the helper is updated with it.
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[ToolOutput]():   4,
		reflect.TypeFor[ContentBlock](): 8,
		reflect.TypeFor[ImageSource]():  4,
		reflect.TypeFor[Command]():      5,
		reflect.TypeFor[Action]():       2,
	} {
		if typ.NumField() != n {
			t.Fatalf("%s has %d fields, batchOutputEqual and batchClone* know %d: update them", typ, typ.NumField(), n)
		}
	}
	base := ToolOutput{
		CallID: "c",
		Content: []ContentBlock{
			{Type: BlockText, Text: "t"},
			{Type: BlockImage, Source: &ImageSource{Type: "url", URL: "u"}},
			{Type: BlockToolUse, ID: "i", Name: "n", Input: json.RawMessage(`{"a":1}`)},
			{Type: BlockToolResult, ToolUseID: "i", Content: []ContentBlock{{Type: BlockText, Text: "nested"}}},
		},
		State: []Command{{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint, RunID: "r", Action: Action{Kind: ActionSet, Value: json.RawMessage(`[1]`)}}},
	}
	if !batchOutputEqual(base, batchCloneOutput(base)) {
		t.Fatal("a clone is not equal")
	}
	respelled := batchCloneOutput(base)
	respelled.Content[2].Input = json.RawMessage(` { "a" : 1.0 } `)
	respelled.State[0].Action.Value = json.RawMessage(`[ 1 ]`)
	if !batchOutputEqual(base, respelled) {
		t.Fatal("canonically equal JSON is not equal")
	}
	empty := ToolOutput{CallID: "c", Content: []ContentBlock{}, State: []Command{}}
	if !batchOutputEqual(empty, ToolOutput{CallID: "c"}) {
		t.Fatal("nil and empty slices differ")
	}
	mutations := map[string]func(*ToolOutput){
		"call id":       func(o *ToolOutput) { o.CallID = "d" },
		"is error":      func(o *ToolOutput) { o.IsError = true },
		"text":          func(o *ToolOutput) { o.Content[0].Text = "u" },
		"type":          func(o *ToolOutput) { o.Content[0].Type = BlockToolUse },
		"source":        func(o *ToolOutput) { o.Content[1].Source.URL = "v" },
		"source nil":    func(o *ToolOutput) { o.Content[1].Source = nil },
		"input":         func(o *ToolOutput) { o.Content[2].Input = json.RawMessage(`{"a":2}`) },
		"input absent":  func(o *ToolOutput) { o.Content[2].Input = nil },
		"id":            func(o *ToolOutput) { o.Content[2].ID = "j" },
		"name":          func(o *ToolOutput) { o.Content[2].Name = "m" },
		"tool use id":   func(o *ToolOutput) { o.Content[3].ToolUseID = "j" },
		"nested":        func(o *ToolOutput) { o.Content[3].Content[0].Text = "x" },
		"block count":   func(o *ToolOutput) { o.Content = o.Content[:3] },
		"state key":     func(o *ToolOutput) { o.State[0].Key = "l" },
		"state scope":   func(o *ToolOutput) { o.State[0].Scope = ScopeThread },
		"state merge":   func(o *ToolOutput) { o.State[0].Merge = MergeExclusive },
		"state run":     func(o *ToolOutput) { o.State[0].RunID = "s" },
		"state action":  func(o *ToolOutput) { o.State[0].Action.Kind = ActionRemove },
		"state value":   func(o *ToolOutput) { o.State[0].Action.Value = json.RawMessage(`[2]`) },
		"state missing": func(o *ToolOutput) { o.State = nil },
	}
	for name, mutate := range mutations {
		m := batchCloneOutput(base)
		mutate(&m)
		if batchOutputEqual(base, m) {
			t.Errorf("%s: a different output compares equal", name)
		}
		if !batchOutputEqual(base, batchCloneOutput(base)) || strings.Contains(base.Content[0].Text, "u") {
			t.Fatalf("%s: mutating a clone changed the original", name)
		}
	}
}
