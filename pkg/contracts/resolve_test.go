package contracts

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCallResolveValidate(t *testing.T) {
	op := OperationID("run-1", 1, "c1")
	ok := TextOutput("c1", "sent")
	bad := ToolOutput{CallID: "c1", Content: []ContentBlock{{Type: "nonsense"}}}
	staged := TextOutput("c1", "sent").WithState(Command{Scope: ScopeRun, Key: "k", Merge: MergeExclusive})
	other := TextOutput("c2", "sent")
	for name, tc := range map[string]struct {
		c     CallResolve
		valid bool
	}{
		"ran with output":      {CallResolve{OperationID: op, Outcome: ReconcileRan, Output: &ok}, true},
		"not_run":              {CallResolve{OperationID: op, Outcome: ReconcileNotRun, Note: "no charge"}, true},
		"ran without output":   {CallResolve{OperationID: op, Outcome: ReconcileRan}, false},
		"unknown is no answer": {CallResolve{OperationID: op, Outcome: ReconcileUnknown}, false},
		"bad operation id":     {CallResolve{OperationID: "nope", Outcome: ReconcileNotRun}, false},
		"invalid output":       {CallResolve{OperationID: op, Outcome: ReconcileRan, Output: &bad}, false},
		"staged state":         {CallResolve{OperationID: op, Outcome: ReconcileRan, Output: &staged}, false},
		"another call's":       {CallResolve{OperationID: op, Outcome: ReconcileRan, Output: &other}, false},
		"not_run with output":  {CallResolve{OperationID: op, Outcome: ReconcileNotRun, Output: &ok}, false},
		"note too long":        {CallResolve{OperationID: op, Outcome: ReconcileNotRun, Note: strings.Repeat("x", MaxResolutionNoteLength+1)}, false},
	} {
		err := tc.c.Validate()
		if tc.valid != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidResolution)) {
			t.Errorf("%s: Validate = %v, want valid %v", name, err, tc.valid)
		}
	}
	c := CallResolve{OperationID: op, Outcome: ReconcileNotRun, Note: "no charge"}
	if out := c.ResolvedOutput(); !out.IsError || out.Text() != NotRunPrefix+"no charge" || out.CallID != "c1" {
		t.Errorf("not_run output = %+v", out)
	}
}

func TestResolveTransitions(t *testing.T) {
	at := time.Unix(1, 0).UTC()
	fresh := func() CallRecord {
		r := CallRecord{Index: 0, CallID: "c1", ToolID: "echo", Phase: IndeterminatePhase("executor_lost"),
			Policy: ToolRecoveryPolicy{Mode: ModeNeverReplay, MaxAttempts: 1}}
		return r
	}
	res := CallResolution{CommandID: "cmd-1", Outcome: ReconcileRan, Output: TextOutput("c1", "sent")}

	r := fresh()
	if err := r.ResolveIndeterminate(res, at); err != nil {
		t.Fatal(err)
	}
	if out, _ := r.Output(); r.Phase.Kind != PhaseCompleted || out.Text() != "sent" || r.Resolution.Applied != ResolutionResolved {
		t.Fatalf("resolved = %+v %+v", r.Phase, r.Resolution)
	}
	if err := r.ResolveIndeterminate(res, at); err != nil {
		t.Errorf("the same command again: %v, want no change", err)
	}
	other := res
	other.CommandID = "cmd-2"
	if err := r.ResolveIndeterminate(other, at); !errors.Is(err, ErrInvalidTransition) {
		t.Errorf("another resolution: %v, want ErrInvalidTransition", err)
	}

	r = fresh()
	if err := r.RecordCorrection(res, at); err != nil {
		t.Fatal(err)
	}
	if r.Phase.Kind != PhaseIndeterminate || r.Resolution.Applied != ResolutionCorrected {
		t.Fatalf("corrected = %+v %+v", r.Phase, r.Resolution)
	}

	done := fresh()
	done.Phase = CompletedPhase(TextOutput("c1", "x"))
	if err := done.ResolveIndeterminate(res, at); !errors.Is(err, ErrInvalidTransition) {
		t.Errorf("resolve a completed call: %v", err)
	}

	b := BatchRecord{Submission: BatchSubmission{RunID: "run-1", Step: 1, Calls: []ToolCall{{CallID: "c1", ToolID: "echo"}}}, Phase: BatchPhaseOpen}
	br := BatchResolution{Index: 0, CallID: "c1", CommandID: "cmd-1", Output: res.Output}
	if changed, err := b.RecordResolution(br); err != nil || !changed {
		t.Fatalf("record: %v %v", changed, err)
	}
	if changed, err := b.RecordResolution(br); err != nil || changed {
		t.Errorf("record again: %v %v, want no change", changed, err)
	}
	b2 := BatchRecord{Submission: b.Submission, Phase: BatchPhaseFinalized}
	if _, err := b2.RecordResolution(br); !errors.Is(err, ErrBatchNotOpen) {
		t.Errorf("record on a finalized batch: %v, want ErrBatchNotOpen", err)
	}
	if _, err := b.RecordResolution(BatchResolution{Index: 0, CallID: "c1", CommandID: "cmd-2"}); !errors.Is(err, ErrInvalidTransition) {
		t.Errorf("a second resolution: %v", err)
	}
}

// TestChargeCost: only a Completed call takes a reported cost, a finite amount ≥ 0; nil
// records nothing.
func TestChargeCost(t *testing.T) {
	done := func() CallRecord {
		r := CallRecord{CallID: "c1", ToolID: "echo", Phase: ToolCallPhase{Kind: PhaseCompleted, Output: &ToolOutput{CallID: "c1"}}}
		return r
	}
	for _, tc := range []struct {
		name string
		rec  CallRecord
		cost *float64
		ok   bool
	}{
		{"completed", done(), ptr(0.5), true},
		{"zero", done(), ptr(0.0), true},
		{"nil", done(), nil, true},
		{"negative", done(), ptr(-1.0), false},
		{"not a number", done(), ptr(math.NaN()), false},
		{"infinite", done(), ptr(math.Inf(1)), false},
		{"executing", CallRecord{CallID: "c1", ToolID: "echo", Phase: ToolCallPhase{Kind: PhaseExecuting, Attempt: 1}}, ptr(1.0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rec
			err := r.ChargeCost(tc.cost)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrInvalidTransition) || r.Cost != nil) {
				t.Fatalf("refusal %v changed the record (cost %v)", err, r.Cost)
			}
			if tc.ok && tc.cost != nil && (r.Cost == nil || *r.Cost != *tc.cost) {
				t.Fatalf("cost %v, want %v", r.Cost, *tc.cost)
			}
		})
	}
}
