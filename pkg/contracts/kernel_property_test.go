package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// Property tests of the durable state machine on the stored records: random operation
// sequences on a random batch record and its call records, checked after every step
// against the invariants the original proves with Kani.

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
	if rapid.Bool().Draw(t, "with_structured") {
		out.StructuredContent = json.RawMessage(rapid.SampledFrom([]string{`{"a":1}`, `{ "a" : 1.0 }`, `{}`, `{"b":[null,"x"]}`}).Draw(t, "structured"))
	}
	if rapid.Bool().Draw(t, "with_state") {
		n := rapid.IntRange(0, 2).Draw(t, "n_commands")
		for i := 0; i < n; i++ {
			v := rapid.SampledFrom([]string{`1`, `1.0`, `{"x":"y"}`}).Draw(t, "value")
			out.State = append(out.State, Command{Key: fmt.Sprintf("k%d", i), Scope: ScopeRun, Merge: MergeDisjoint, Action: Action{Kind: ActionSet, Value: json.RawMessage(v)}})
		}
	}
	return out
}

// ptBatch draws an open batch record of 1–4 calls with random pinned policies and the
// fresh Requested record of each call.
func ptBatch(t *rapid.T) (*BatchRecord, []CallRecord) {
	n := rapid.IntRange(1, 4).Draw(t, "n_calls")
	modes := []ToolRecoveryMode{ModeNeverReplay, ModeReplaySafe, ModeIdempotent, ModeDurableRequest}
	b := &BatchRecord{Submission: BatchSubmission{
		RunID:    rapid.StringMatching(`[A-Za-z0-9_-]{1,12}`).Draw(t, "run"),
		ThreadID: "thread",
		Step:     rapid.Int64Range(0, 1<<40).Draw(t, "step"),
	}, Phase: BatchPhaseOpen}
	recs := make([]CallRecord, n)
	for i := range recs {
		c := btToolCall(fmt.Sprintf("c%d", i))
		p := btPolicy(rapid.SampledFrom(modes).Draw(t, "mode"), uint16(rapid.IntRange(1, 4).Draw(t, "max_attempts")))
		b.Submission.Calls = append(b.Submission.Calls, c)
		b.Pinned = append(b.Pinned, PinnedCall{Known: true, Policy: p})
		recs[i] = NewCallRecord(i, c, p)
	}
	return b, recs
}

// ptOp is one drawn operation: its description and its application to the batch record
// and its call records, as a service applies it (call-level operations to one record).
type ptOp struct {
	name  string
	index int // the call the operation targets; -1 for a batch-level operation
	// resume is set for Resume: the kind and correlation it presents.
	resume *ToolWait
	apply  func(*BatchRecord, []CallRecord) error
}

func ptDrawOp(t *rapid.T, recs []CallRecord) ptOp {
	i := rapid.IntRange(0, len(recs)-1).Draw(t, "call")
	id := recs[i].CallID
	seq := uint64(rapid.IntRange(1, 3).Draw(t, "seq"))
	call := func(name string, f func(*CallRecord) error) ptOp {
		return ptOp{name: name, index: i, apply: func(_ *BatchRecord, r []CallRecord) error { return f(&r[i]) }}
	}
	switch rapid.IntRange(0, 12).Draw(t, "op") {
	case 0:
		return call("Dispatch", func(c *CallRecord) error { return c.Dispatch(btAt) })
	case 1:
		return call("Enter", func(c *CallRecord) error { return c.Enter(seq, btAt) })
	case 2:
		return call("Retry", func(c *CallRecord) error { return c.Retry(seq, btAt) })
	case 3:
		w := ToolWait{Kind: rapid.SampledFrom(ptKinds).Draw(t, "kind"), CorrelationID: rapid.SampledFrom(ptCorrs).Draw(t, "corr")}
		if c := recs[i]; c.Phase.Kind == PhaseAwaiting && rapid.Bool().Draw(t, "matching") {
			w = *c.Phase.Wait // make matching approvals common, not lucky
		}
		op := call("Resume", func(c *CallRecord) error { return c.Resume(w.Kind, w.CorrelationID, btAt) })
		op.resume = &w
		return op
	case 4:
		kind, corr := rapid.SampledFrom(ptKinds).Draw(t, "kind"), rapid.SampledFrom(ptCorrs).Draw(t, "corr")
		return call("Park", func(c *CallRecord) error { return c.Park(kind, corr, btAt) })
	case 5, 6:
		out := ptOutput(t, rapid.SampledFrom([]string{id, id, "x"}).Draw(t, "out_call"))
		if c := recs[i]; c.Phase.Kind == PhaseCompleted && rapid.Bool().Draw(t, "repeat") {
			out = *c.Phase.Output // exercise idempotent re-completion
		}
		return call("Complete", func(c *CallRecord) error { return c.Complete(out, btAt) })
	case 7:
		out := ptOutput(t, id)
		return call("CompleteImmediate", func(c *CallRecord) error { return c.CompleteImmediate(out, btAt) })
	case 8:
		reason := rapid.SampledFrom([]string{"lost", "owner lease expired"}).Draw(t, "reason")
		return call("MarkIndeterminate", func(c *CallRecord) error { return c.MarkIndeterminate(reason, btAt) })
	case 9:
		by := rapid.SampledFrom([]string{"", "resume-1"}).Draw(t, "by")
		return call("Resolve", func(c *CallRecord) error { return c.Resolve(Resolver{By: by}, btAt) })
	case 10:
		o := &GateOutcome{Kind: rapid.SampledFrom([]GateOutcomeKind{GateAllow, GateBlock}).Draw(t, "decision")}
		return call("Decide", func(c *CallRecord) error { return c.Decide(o, "", btAt) })
	case 11:
		return ptOp{name: "Finalize", index: -1, apply: func(b *BatchRecord, r []CallRecord) error { return b.Finalize(r) }}
	default:
		return ptOp{name: "MarkPublished", index: -1, apply: func(b *BatchRecord, _ []CallRecord) error { return b.MarkPublished() }}
	}
}

// ptState is the JSON of the batch record and its call records, the form they are stored
// in.
func ptState(t interface{ Fatalf(string, ...any) }, b *BatchRecord, recs []CallRecord) []byte {
	data, err := json.Marshal(struct {
		Batch *BatchRecord
		Calls []CallRecord
	}{b, recs})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return data
}

func ptClone(t *rapid.T, b *BatchRecord, recs []CallRecord) (*BatchRecord, []CallRecord) {
	var back struct {
		Batch *BatchRecord
		Calls []CallRecord
	}
	data := ptState(t, b, recs)
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("stored records do not decode: %v\n%s", err, data)
	}
	if again := ptState(t, back.Batch, back.Calls); !bytes.Equal(again, data) {
		t.Fatalf("re-encoding differs:\n%s\n%s", data, again)
	}
	return back.Batch, back.Calls
}

func TestPropertyRandomOperationSequencesKeepTheBatchInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, recs := ptBatch(t)
		steps := rapid.IntRange(1, 40).Draw(t, "steps")
		for s := 0; s < steps; s++ {
			op := ptDrawOp(t, recs)
			// The clone is a decode of the stored form: every state the transitions reach
			// round-trips through JSON unchanged.
			beforeB, before := ptClone(t, b, recs)
			beforeJSON := ptState(t, b, recs)
			err := op.apply(b, recs)
			afterJSON := ptState(t, b, recs)

			// A refused operation changes nothing.
			if err != nil {
				if !bytes.Equal(beforeJSON, afterJSON) {
					t.Fatalf("%s(%d) failed with %v but changed the records", op.name, op.index, err)
				}
				continue
			}
			// Every record stays valid after every successful operation.
			for i := range recs {
				if verr := recs[i].Validate(); verr != nil {
					t.Fatalf("%s(%d) left an invalid record: %v", op.name, op.index, verr)
				}
			}
			// The batch moves only forward, and only at the barrier.
			switch {
			case op.name == "Finalize":
				if beforeB.Phase != BatchPhaseOpen || b.Phase != BatchPhaseFinalized {
					t.Fatalf("finalize moved %s to %s", beforeB.Phase, b.Phase)
				}
				for i := range recs {
					if !recs[i].Phase.IsTerminal() {
						t.Fatalf("finalized with non-terminal call %d", i)
					}
				}
				if cerr := b.CheckCalls(recs); cerr != nil {
					t.Fatalf("finalized batch fails its check: %v", cerr)
				}
			case op.name == "MarkPublished":
				if beforeB.Phase != BatchPhaseFinalized || b.Phase != BatchPhasePublished {
					t.Fatalf("publish moved %s to %s", beforeB.Phase, b.Phase)
				}
			case b.Phase != beforeB.Phase:
				t.Fatalf("%s moved the batch", op.name)
			}
			for i := range recs {
				was, is := before[i], recs[i]
				// A terminal call is never moved, and a Completed output never changes (an
				// equal re-complete is a no-op).
				if was.Phase.IsTerminal() {
					if is.Phase.Kind != was.Phase.Kind {
						t.Fatalf("%s moved terminal call %d from %s to %s", op.name, i, was.Phase.Kind, is.Phase.Kind)
					}
					if was.Phase.Kind == PhaseCompleted && !btPhaseEqual(was.Phase, is.Phase) {
						t.Fatalf("%s replaced the output of completed call %d", op.name, i)
					}
				}
				// Only the matching approval enters execution from Awaiting.
				if was.Phase.Kind == PhaseAwaiting && is.Phase.Kind == PhaseExecuting {
					if op.name != "Resume" || op.index != i || *op.resume != *was.Phase.Wait {
						t.Fatalf("%s moved awaiting call %d into execution without its exact approval", op.name, i)
					}
					if is.Phase.Attempt != 1 || is.Entered {
						t.Fatalf("resume entered attempt %d (entered %v), want 1, not entered", is.Phase.Attempt, is.Entered)
					}
				}
				// An attempt only ever advances by one, within the budget.
				if was.Phase.Kind == PhaseExecuting && is.Phase.Kind == PhaseExecuting && is.Phase.Attempt != was.Phase.Attempt {
					if is.Phase.Attempt != was.Phase.Attempt+1 || is.Phase.Attempt > is.Policy.MaxAttempts {
						t.Fatalf("attempt jumped from %d to %d", was.Phase.Attempt, is.Phase.Attempt)
					}
				}
				// A decision, once recorded, never changes.
				if was.Decision != nil && (is.Decision == nil || !reflect.DeepEqual(*is.Decision, *was.Decision)) {
					t.Fatalf("%s changed the decision of call %d", op.name, i)
				}
				// Untargeted calls do not change at all; the targeted one gains at most
				// one timeline mark, never loses one.
				if op.index != i {
					if wj, ij := ptState(t, nil, []CallRecord{was}), ptState(t, nil, []CallRecord{is}); !bytes.Equal(wj, ij) {
						t.Fatalf("%s(%d) changed call %d", op.name, op.index, i)
					}
				} else if n := len(is.Timeline) - len(was.Timeline); n < 0 || n > 1 {
					t.Fatalf("%s changed the timeline by %d marks", op.name, n)
				}
			}
			// At most one call awaits is the batch's rule: the check names it exactly
			// when two do.
			awaiting := 0
			for i := range recs {
				if recs[i].Phase.Kind == PhaseAwaiting {
					awaiting++
				}
			}
			if cerr := b.CheckCalls(recs); (awaiting > 1) != errors.Is(cerr, ErrMultipleAwaitingCalls) {
				t.Fatalf("%d awaiting calls, batch check says %v", awaiting, cerr)
			}
		}
	})
}

func TestPropertyOnlyTheMatchingApprovalEntersExecution(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		committed := ToolWait{Kind: rapid.SampledFrom(ptKinds).Draw(t, "kind"), CorrelationID: rapid.SampledFrom(ptCorrs[1:]).Draw(t, "corr")}
		presented := ToolWait{Kind: rapid.SampledFrom(ptKinds).Draw(t, "presented_kind"), CorrelationID: rapid.SampledFrom(ptCorrs).Draw(t, "presented_corr")}
		c := btRec("c")
		c.Policy.MaxAttempts = uint16(rapid.IntRange(1, 65535).Draw(t, "max"))
		if rapid.Bool().Draw(t, "from_executing") {
			c.Phase, c.Entered = ExecutingPhase(c.Policy.MaxAttempts), true
		}
		if err := c.Park(committed.Kind, committed.CorrelationID, btAt); err != nil {
			t.Fatal(err)
		}
		err := c.Resume(presented.Kind, presented.CorrelationID, btAt)
		entered := c.Phase.Kind == PhaseExecuting
		if entered != (presented == committed) || entered != (err == nil) {
			t.Fatalf("committed %+v presented %+v: entered %v, err %v", committed, presented, entered, err)
		}
		if !entered && !errors.Is(err, ErrWaitMismatch) {
			t.Fatalf("refusal %v, want ErrWaitMismatch", err)
		}
		if entered && (c.Phase.Attempt != 1 || c.Entered) {
			t.Fatalf("attempt %d, entered %v", c.Phase.Attempt, c.Entered)
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

// FuzzCallRecordDecode feeds arbitrary bytes to the stored call record's decoder: it must
// never panic, a record it accepts must re-encode to a fixed point, and a record that
// passes Validate must be one every transition either moves to another valid record or
// refuses.
func FuzzCallRecordDecode(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "golden", "call_record_*.json"))
	for _, path := range seeds {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"index":0,"call_id":"c","tool_id":"t","phase":"Requested","policy":{"mode":"never_replay","max_attempts":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r CallRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return
		}
		first, err := json.Marshal(r)
		if err != nil {
			return // a decoded phase the encoder refuses cannot occur: the decoder checks it
		}
		var back CallRecord
		if err := json.Unmarshal(first, &back); err != nil {
			t.Fatalf("re-encoding does not decode: %v\n%s", err, first)
		}
		if second, _ := json.Marshal(back); !bytes.Equal(first, second) {
			t.Fatalf("encoding is not a fixed point:\n%s\n%s", first, second)
		}
		if r.Validate() != nil {
			return
		}
		for _, op := range []func(*CallRecord) error{
			func(c *CallRecord) error { return c.Dispatch(btAt) },
			func(c *CallRecord) error { return c.Enter(1, btAt) },
			func(c *CallRecord) error { return c.Retry(1, btAt) },
			func(c *CallRecord) error { return c.Requeue(btAt) },
			func(c *CallRecord) error { return c.Complete(btText(c.CallID, "x"), btAt) },
			func(c *CallRecord) error { return c.MarkIndeterminate("x", btAt) },
		} {
			c := back
			c.Timeline = append([]TimelineMark(nil), back.Timeline...)
			if op(&c) == nil {
				if err := c.Validate(); err != nil {
					t.Fatalf("a transition produced an invalid record: %v", err)
				}
			}
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
