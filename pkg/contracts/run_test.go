package contracts

import (
	"errors"
	"testing"
	"time"
)

// TestRunRecordHoldsTheOpenBatch walks a run through two batches: Open claims the run and
// records the batch in one change, FinalizeBatch finalizes it and releases the run in one
// more (recording the end a batch decided), the run then takes the next batch, and a
// finalized batch cannot be finalized again nor replaced while open.
func TestRunRecordHoldsTheOpenBatch(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	batch := func(step int64) BatchRecord {
		return BatchRecord{Submission: BatchSubmission{RunID: "r", Step: step, Calls: []ToolCall{{CallID: "c", ToolID: "echo"}}},
			Phase: BatchPhaseOpen}
	}
	done := []CallRecord{{Index: 0, CallID: "c", ToolID: "echo", Phase: CompletedPhase(TextOutput("c", "ok")), Policy: DefaultRecoveryPolicy()}}
	r := RunRecord{RunID: "r"}
	if !r.MayHaveRecorded(1) {
		t.Fatal("a run without last_step must look at the archive")
	}
	if err := r.Open(batch(1)); err != nil {
		t.Fatal(err)
	}
	if r.Holds(1) == nil || r.ActiveStep == nil || *r.ActiveStep != 1 || *r.LastStep != 1 || r.MayHaveRecorded(2) {
		t.Fatalf("after Open: %+v", r)
	}
	if rej := r.RejectionForNewBatch(2); rej == nil || rej.Code != RejectRunBusy {
		t.Fatalf("step 2 while step 1 is open: %v, want run_busy", rej)
	}
	if err := r.Open(batch(2)); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("Open over an open batch: %v", err)
	}
	if err := r.FinalizeBatch(2, done, nil, at); !errors.Is(err, ErrBatchNotHeld) {
		t.Fatalf("finalize a batch the run does not hold: %v", err)
	}
	ended := &RunEnded{Reason: RunEndStateConflict, Keys: []string{"k"}}
	if err := r.FinalizeBatch(1, done, ended, at); err != nil {
		t.Fatal(err)
	}
	if r.ActiveStep != nil || r.Holds(1).Phase != BatchPhaseFinalized || r.Ended == nil || r.Ended.Reason != RunEndStateConflict {
		t.Fatalf("after FinalizeBatch: %+v", r)
	}
	if err := r.FinalizeBatch(1, done, nil, at); !errors.Is(err, ErrBatchFinalized) {
		t.Fatalf("second finalize: %v, want ErrBatchFinalized", err)
	}

	r = RunRecord{RunID: "r"}
	_ = r.Open(batch(1))
	_ = r.FinalizeBatch(1, done, nil, at)
	if rej := r.RejectionForNewBatch(2); rej != nil {
		t.Fatalf("step 2 after step 1 finalized: %v", rej)
	}
	if err := r.Open(batch(2)); err != nil {
		t.Fatal(err)
	}
	if r.Holds(1) != nil || r.Holds(2) == nil || *r.LastStep != 2 || !r.MayHaveRecorded(1) {
		t.Fatalf("after the next Open: %+v", r)
	}
}
