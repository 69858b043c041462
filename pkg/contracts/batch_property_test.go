package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"
)

// Property tests of the batch state machine: random operation sequences on random batches,
// checked after every step against the invariants the original proves with Kani.

var (
	ptKinds = []ToolWaitKind{WaitToolPermission, WaitDelegation, WaitScheduledAction, WaitExternalResult}
	ptCorrs = []string{"", "corr-a", "corr-b"}
	ptTexts = []string{"done", "other", ""}
)

// ptOutput draws an output for callID whose raw JSON may be spelled in several equivalent
// ways, so idempotent re-completion is exercised with canonically equal outputs.
func ptOutput(t *rapid.T, callID string) ToolOutput {
	out := ToolOutput{CallID: callID, IsError: rapid.Bool().Draw(t, "is_error")}
	out.Content = []ContentBlock{{Type: BlockText, Text: rapid.SampledFrom(ptTexts).Draw(t, "text")}}
	if rapid.Bool().Draw(t, "with_tool_use") {
		in := rapid.SampledFrom([]string{`{"a":1,"b":[true]}`, `{"b":[true],"a":1.0}`, ` { "a" : 10e-1 , "b" : [ true ] } `, `{"a":2}`}).Draw(t, "input")
		out.Content = append(out.Content, ContentBlock{Type: BlockToolUse, ID: "u", Name: "n", Input: json.RawMessage(in)})
	}
	if rapid.Bool().Draw(t, "with_state") {
		out.State = ptCommands(t)
	}
	return out
}

func ptCommands(t *rapid.T) []Command {
	n := rapid.IntRange(0, 2).Draw(t, "n_commands")
	var cmds []Command
	for i := 0; i < n; i++ {
		v := rapid.SampledFrom([]string{`1`, `1.0`, `{"x":"y"}`}).Draw(t, "value")
		cmds = append(cmds, Command{Key: fmt.Sprintf("k%d", i), Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet, Value: json.RawMessage(v)}})
	}
	return cmds
}

func ptBatch(t *rapid.T) *ToolBatch {
	n := rapid.IntRange(1, 4).Draw(t, "n_calls")
	calls := make([]DurableToolCall, n)
	modes := []ToolRecoveryMode{ModeNeverReplay, ModeReplaySafe, ModeIdempotent, ModeDurableRequest}
	for i := range calls {
		calls[i] = btCall(fmt.Sprintf("c%d", i))
		calls[i].RecoveryPolicy = btPolicy(rapid.SampledFrom(modes).Draw(t, "mode"), uint16(rapid.IntRange(1, 4).Draw(t, "max_attempts")))
	}
	run := rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`).Draw(t, "run")
	step := rapid.Int64Range(0, 1<<40).Draw(t, "step")
	b, err := NewToolBatch(run, step, calls)
	if err != nil {
		t.Fatalf("NewToolBatch: %v", err)
	}
	return b
}

// ptOp is one drawn operation: its description and its application to a batch.
type ptOp struct {
	name   string
	callID string
	// resume is set for ResumeExecuting: the kind and correlation it presents.
	resume *ToolWait
	apply  func(*ToolBatch) error
}

func ptDrawOp(t *rapid.T, b *ToolBatch) ptOp {
	ids := make([]string, 0, len(b.calls)+1)
	for _, c := range b.calls {
		ids = append(ids, c.Call.CallID)
	}
	ids = append(ids, "unknown")
	id := rapid.SampledFrom(ids).Draw(t, "call")
	switch rapid.IntRange(0, 9).Draw(t, "op") {
	case 0:
		return ptOp{name: "MarkExecuting", callID: id, apply: func(b *ToolBatch) error { return b.MarkExecuting(id) }}
	case 1:
		w := ToolWait{Kind: rapid.SampledFrom(ptKinds).Draw(t, "kind"), CorrelationID: rapid.SampledFrom(ptCorrs).Draw(t, "corr")}
		if c, ok := b.Call(id); ok && c.Phase.Kind == PhaseAwaiting && rapid.Bool().Draw(t, "matching") {
			w = *c.Phase.Wait // make matching approvals common, not lucky
		}
		return ptOp{name: "ResumeExecuting", callID: id, resume: &w, apply: func(b *ToolBatch) error { return b.ResumeExecuting(id, w.Kind, w.CorrelationID) }}
	case 2:
		kind, corr := rapid.SampledFrom(ptKinds).Draw(t, "kind"), rapid.SampledFrom(ptCorrs).Draw(t, "corr")
		return ptOp{name: "MarkAwaiting", callID: id, apply: func(b *ToolBatch) error { return b.MarkAwaiting(id, kind, corr) }}
	case 3, 4:
		out := ptOutput(t, id)
		if c, ok := b.Call(id); ok && c.Phase.Kind == PhaseCompleted && rapid.Bool().Draw(t, "repeat") {
			out = *c.Phase.Output // exercise idempotent re-completion
		}
		return ptOp{name: "Complete", callID: id, apply: func(b *ToolBatch) error { return b.Complete(out) }}
	case 5:
		out := ptOutput(t, id)
		return ptOp{name: "CompleteImmediate", callID: id, apply: func(b *ToolBatch) error { return b.CompleteImmediate(out) }}
	case 6:
		reason := rapid.SampledFrom([]string{"lost", "owner lease expired"}).Draw(t, "reason")
		return ptOp{name: "MarkIndeterminate", callID: id, apply: func(b *ToolBatch) error { return b.MarkIndeterminate(id, reason) }}
	case 7:
		cmds := ptCommands(t)
		return ptOp{name: "SetResultState", callID: id, apply: func(b *ToolBatch) error { return b.SetResultState(id, cmds) }}
	case 8:
		return ptOp{name: "Finalize", apply: func(b *ToolBatch) error { return b.Finalize() }}
	default:
		reason := rapid.SampledFrom([]string{"run cancelled", "run failed"}).Draw(t, "reason")
		return ptOp{name: "SealOnRunEnd", apply: func(b *ToolBatch) error { _, err := b.SealOnRunEnd(reason); return err }}
	}
}

func ptEncode(t interface{ Fatalf(string, ...any) }, b *ToolBatch) []byte {
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return data
}

// ptRoundTrip decodes data and requires the decoded batch to be semantically equal to b and
// to encode to the very same bytes.
func ptRoundTrip(t *rapid.T, b *ToolBatch, data []byte) {
	var back ToolBatch
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("a valid batch does not decode: %v\n%s", err, data)
	}
	if back.id != b.id || back.runID != b.runID || back.step != b.step || back.phase != b.phase || len(back.calls) != len(b.calls) {
		t.Fatalf("round trip changed the batch identity or phase")
	}
	for i := range b.calls {
		x, y := b.calls[i], back.calls[i]
		if x.Call.CallID != y.Call.CallID || x.Call.ToolID != y.Call.ToolID || !batchJSONEqual(x.Call.Arguments, y.Call.Arguments) ||
			x.RecoveryPolicy != y.RecoveryPolicy || !btPhaseEqual(x.Phase, y.Phase) || !batchCommandsEqual(x.ResultState, y.ResultState) {
			t.Fatalf("round trip changed call %d:\n%+v\n%+v", i, x, y)
		}
	}
	if again := ptEncode(t, &back); !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs:\n%s\n%s", data, again)
	}
}

func TestPropertyRandomOperationSequencesKeepTheBatchInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := ptBatch(t)
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for s := 0; s < steps; s++ {
			op := ptDrawOp(t, b)
			before := b.Clone()
			beforeJSON := ptEncode(t, b)
			err := op.apply(b)
			afterJSON := ptEncode(t, b)

			// A refused operation changes nothing.
			if err != nil {
				if !bytes.Equal(beforeJSON, afterJSON) {
					t.Fatalf("%s(%s) failed with %v but changed the batch", op.name, op.callID, err)
				}
				if before.phase == ToolBatchFinalized && op.name != "SealOnRunEnd" && !errors.Is(err, ErrBatchFinalized) {
					t.Fatalf("%s on a finalized batch failed with %v, want ErrBatchFinalized", op.name, err)
				}
				continue
			}
			// Validate holds after every successful operation.
			if verr := b.Validate(); verr != nil {
				t.Fatalf("%s(%s) left an invalid batch: %v", op.name, op.callID, verr)
			}
			if before.phase == ToolBatchFinalized && !bytes.Equal(beforeJSON, afterJSON) {
				t.Fatalf("%s changed a finalized batch", op.name)
			}
			for i := range b.calls {
				was, is := before.calls[i], b.calls[i]
				// A terminal call is never moved; only its staged state may change, and a
				// Completed output never changes (an equal re-complete is a no-op).
				if was.Phase.IsTerminal() {
					if is.Phase.Kind != was.Phase.Kind {
						t.Fatalf("%s moved terminal call %s from %s to %s", op.name, is.Call.CallID, was.Phase.Kind, is.Phase.Kind)
					}
					if was.Phase.Kind == PhaseCompleted && !btPhaseEqual(was.Phase, is.Phase) {
						t.Fatalf("%s replaced the output of completed call %s", op.name, is.Call.CallID)
					}
				}
				// Only the matching approval enters execution from Awaiting.
				if was.Phase.Kind == PhaseAwaiting && is.Phase.Kind == PhaseExecuting {
					if op.name != "ResumeExecuting" || op.callID != is.Call.CallID || *op.resume != *was.Phase.Wait {
						t.Fatalf("%s moved awaiting call %s into execution without its exact approval", op.name, is.Call.CallID)
					}
					if is.Phase.Attempt != 1 {
						t.Fatalf("resume entered attempt %d, want 1", is.Phase.Attempt)
					}
				}
				// An attempt only ever advances by one.
				if was.Phase.Kind == PhaseExecuting && is.Phase.Kind == PhaseExecuting && is.Phase.Attempt != was.Phase.Attempt+1 && !btPhaseEqual(was.Phase, is.Phase) {
					t.Fatalf("attempt jumped from %d to %d", was.Phase.Attempt, is.Phase.Attempt)
				}
				// Untargeted calls do not move, except under the batch-wide seal.
				if op.name != "SealOnRunEnd" && op.callID != is.Call.CallID && !btPhaseEqual(was.Phase, is.Phase) {
					t.Fatalf("%s(%s) moved call %s", op.name, op.callID, is.Call.CallID)
				}
			}
			if op.name == "SealOnRunEnd" || op.name == "Finalize" {
				if b.phase != ToolBatchFinalized || !b.IsComplete() {
					t.Fatalf("%s left phase %s, complete %v", op.name, b.phase, b.IsComplete())
				}
			}
			// Every valid aggregate round-trips through JSON unchanged.
			ptRoundTrip(t, b, afterJSON)
		}
	})
}

func TestPropertyOnlyTheMatchingApprovalEntersExecution(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		committed := ToolWait{Kind: rapid.SampledFrom(ptKinds).Draw(t, "kind"), CorrelationID: rapid.SampledFrom(ptCorrs[1:]).Draw(t, "corr")}
		presented := ToolWait{Kind: rapid.SampledFrom(ptKinds).Draw(t, "presented_kind"), CorrelationID: rapid.SampledFrom(ptCorrs).Draw(t, "presented_corr")}
		c := btCall("c")
		c.RecoveryPolicy.MaxAttempts = uint16(rapid.IntRange(1, 65535).Draw(t, "max"))
		if rapid.Bool().Draw(t, "from_executing") {
			c.Phase = ExecutingPhase(c.RecoveryPolicy.MaxAttempts)
		}
		if err := c.MarkAwaiting(committed.Kind, committed.CorrelationID); err != nil {
			t.Fatal(err)
		}
		err := c.ResumeExecuting(presented.Kind, presented.CorrelationID)
		entered := c.Phase.Kind == PhaseExecuting
		if entered != (presented == committed) || entered != (err == nil) {
			t.Fatalf("committed %+v presented %+v: entered %v, err %v", committed, presented, entered, err)
		}
		if !entered && !errors.Is(err, ErrWaitMismatch) {
			t.Fatalf("refusal %v, want ErrWaitMismatch", err)
		}
		if entered && c.Phase.Attempt != 1 {
			t.Fatalf("attempt %d", c.Phase.Attempt)
		}
	})
}

func TestPropertyCallLevelTransitionsNeverMoveATerminalCall(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := btCall("c")
		c.RecoveryPolicy.MaxAttempts = uint16(rapid.IntRange(1, 3).Draw(t, "max"))
		for s := rapid.IntRange(1, 30).Draw(t, "steps"); s > 0; s-- {
			before := batchCloneCall(c)
			var err error
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 0:
				err = c.MarkExecuting()
			case 1:
				err = c.ResumeExecuting(rapid.SampledFrom(ptKinds).Draw(t, "kind"), rapid.SampledFrom(ptCorrs).Draw(t, "corr"))
			case 2:
				err = c.MarkAwaiting(rapid.SampledFrom(ptKinds).Draw(t, "kind"), rapid.SampledFrom(ptCorrs).Draw(t, "corr"))
			case 3:
				err = c.Complete(ptOutput(t, rapid.SampledFrom([]string{"c", "x"}).Draw(t, "out_call")))
			case 4:
				err = c.CompleteImmediate(ptOutput(t, "c"))
			case 5:
				err = c.MarkIndeterminate("why")
			default:
				err = c.SetResultState(ptCommands(t))
			}
			if err != nil {
				if !btPhaseEqual(before.Phase, c.Phase) || !batchCommandsEqual(before.ResultState, c.ResultState) {
					t.Fatalf("a refused transition (%v) changed the call", err)
				}
				continue
			}
			if verr := c.Validate(); verr != nil {
				t.Fatalf("invalid call after success: %v", verr)
			}
			if before.Phase.IsTerminal() && (c.Phase.Kind != before.Phase.Kind ||
				(before.Phase.Kind == PhaseCompleted && !btPhaseEqual(before.Phase, c.Phase))) {
				t.Fatalf("terminal %+v moved to %+v", before.Phase, c.Phase)
			}
			data, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back DurableToolCall
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatalf("a valid call does not decode: %v\n%s", err, data)
			}
			if !btPhaseEqual(back.Phase, c.Phase) || !batchCommandsEqual(back.ResultState, c.ResultState) {
				t.Fatalf("call round trip changed it:\n%+v\n%+v", c, back)
			}
		}
	})
}

func TestPropertyPhasesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var p ToolCallPhase
		switch rapid.IntRange(0, 4).Draw(t, "kind") {
		case 0:
			p = RequestedPhase()
		case 1:
			p = ExecutingPhase(uint16(rapid.IntRange(1, 65535).Draw(t, "attempt")))
		case 2:
			p = AwaitingPhase(rapid.SampledFrom(ptKinds).Draw(t, "wait"), rapid.String().Filter(func(s string) bool { return s != "" }).Draw(t, "corr"))
		case 3:
			p = CompletedPhase(ptOutput(t, rapid.StringMatching(`[a-z0-9]{1,8}`).Draw(t, "call")))
		default:
			p = IndeterminatePhase(rapid.String().Draw(t, "reason"))
		}
		data, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var back ToolCallPhase
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s does not decode: %v", data, err)
		}
		if !btPhaseEqual(p, back) {
			t.Fatalf("round trip of %s changed it: %+v", data, back)
		}
	})
}

// FuzzToolBatchDecode feeds arbitrary bytes to the persisted-batch decoder: it must never
// panic, and whatever it accepts must be valid and re-encode to bytes that decode to the
// same encoding (a fixed point after one round).
func FuzzToolBatchDecode(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "golden", "tool_batch_*.json"))
	for _, path := range seeds {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"id":"tool-batch:r:0","run_id":"r","calls":[{"call":{"call_id":"c","tool_id":"t","arguments":{}},"recovery_policy":{"mode":"never_replay","max_attempts":1},"phase":"Requested"}],"phase":"open"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var b ToolBatch
		if err := json.Unmarshal(data, &b); err != nil {
			if !errors.Is(err, ErrInvalidPersistedState) {
				var syn *json.SyntaxError
				if !errors.As(err, &syn) {
					t.Fatalf("decode error does not wrap ErrInvalidPersistedState: %v", err)
				}
			}
			return
		}
		if err := b.Validate(); err != nil {
			t.Fatalf("accepted an invalid batch: %v", err)
		}
		first := ptEncode(t, &b)
		var back ToolBatch
		if err := json.Unmarshal(first, &back); err != nil {
			t.Fatalf("re-encoding does not decode: %v\n%s", err, first)
		}
		if second := ptEncode(t, &back); !bytes.Equal(first, second) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", first, second)
		}
	})
}

// FuzzToolCallPhaseDecode checks the phase decoder the same way.
func FuzzToolCallPhaseDecode(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "golden", "phase_*.json"))
	for _, path := range seeds {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p ToolCallPhase
		if err := json.Unmarshal(data, &p); err != nil {
			return
		}
		if err := p.check(); err != nil {
			t.Fatalf("accepted a malformed phase %+v: %v", p, err)
		}
		first, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("accepted phase does not encode: %v", err)
		}
		var back ToolCallPhase
		if err := json.Unmarshal(first, &back); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		if second, _ := json.Marshal(back); !bytes.Equal(first, second) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", first, second)
		}
	})
}
