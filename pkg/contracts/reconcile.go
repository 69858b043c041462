package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ReconcileOutcome is what a tool's reconcile function found out about a call whose
// executor was entered and died before it committed an outcome.
type ReconcileOutcome string

const (
	// ReconcileRan: the call's effect happened; [Reconciled.Output] is its output.
	ReconcileRan ReconcileOutcome = "ran"
	// ReconcileNotRun: the call's effect did not happen (and will not: the reconcile must
	// only say so when the external system can no longer perform it).
	ReconcileNotRun ReconcileOutcome = "not_run"
	// ReconcileUnknown: the reconcile could not tell; the call stays indeterminate.
	ReconcileUnknown ReconcileOutcome = "unknown"
)

// Valid reports whether o is one of the three outcomes.
func (o ReconcileOutcome) Valid() bool {
	switch o {
	case ReconcileRan, ReconcileNotRun, ReconcileUnknown:
		return true
	}
	return false
}

// ErrInvalidReconcile is wrapped by [Reconciled.Validate] failures.
var ErrInvalidReconcile = errors.New("invalid reconcile answer")

// Reconciled is a reconcile function's answer: the outcome, and for [ReconcileRan] the
// output the call produced (what the model then reads, exactly as if the body had
// returned it).
type Reconciled struct {
	Outcome ReconcileOutcome `json:"outcome"`
	Output  *ToolOutput      `json:"output,omitempty"`
}

// Ran is the answer "the call ran and produced out".
func Ran(out ToolOutput) Reconciled { return Reconciled{Outcome: ReconcileRan, Output: &out} }

// NotRun is the answer "the call's effect did not happen".
func NotRun() Reconciled { return Reconciled{Outcome: ReconcileNotRun} }

// Unknown is the answer "cannot tell".
func Unknown() Reconciled { return Reconciled{Outcome: ReconcileUnknown} }

// Validate checks that the outcome is known and that an output comes with ran, and only
// with ran. It wraps [ErrInvalidReconcile].
func (r Reconciled) Validate() error {
	switch {
	case !r.Outcome.Valid():
		return fmt.Errorf("%w: outcome %q (want ran, not_run or unknown)", ErrInvalidReconcile, r.Outcome)
	case r.Outcome == ReconcileRan && r.Output == nil:
		return fmt.Errorf("%w: outcome ran without an output", ErrInvalidReconcile)
	case r.Outcome != ReconcileRan && r.Output != nil:
		return fmt.Errorf("%w: outcome %s with an output", ErrInvalidReconcile, r.Outcome)
	}
	return nil
}

// CallReconcile is the audit, on the call record, of one reconcile of the call: the
// attempt it reconciled, who ran it (the stream sequence of the executor delivery), when
// it began and ended, how many times the reconcile function was called, its outcome and
// the last failure. Outcome empty means the reconcile is in progress: the call stays
// Executing meanwhile, so the publisher's barrier waits for it (bounded by the executor's
// executors.reconcile.bound, past which the call is sealed indeterminate).
type CallReconcile struct {
	Attempt   uint16           `json:"attempt"`
	By        uint64           `json:"by"`
	StartedAt time.Time        `json:"started_at"`
	EndedAt   *time.Time       `json:"ended_at,omitempty"`
	Calls     int              `json:"calls,omitempty"`
	Outcome   ReconcileOutcome `json:"outcome,omitempty"`
	Error     string           `json:"error,omitempty"`
	// Phase is the phase the outcome led to: Completed, Executing (not_run: the next
	// attempt runs the body) or Indeterminate.
	Phase PhaseKind `json:"phase,omitempty"`
}

// Timeline stages of a reconcile.
const (
	// StageReconciling: the executor began reconciling an entered attempt.
	StageReconciling = "reconciling"
	// StageReconciled: the reconcile ended (its outcome is in [CallRecord.Reconciles]).
	StageReconciled = "reconciled"
)

// Reconciling returns the reconcile in progress of the call's current attempt, if any.
func (r *CallRecord) Reconciling() (*CallReconcile, bool) {
	if n := len(r.Reconciles); n > 0 {
		last := &r.Reconciles[n-1]
		if last.Outcome == "" && r.Phase.Kind == PhaseExecuting && last.Attempt == r.Phase.Attempt {
			return last, true
		}
	}
	return nil, false
}

// BeginReconcile records that the delivery seq, which entered the current attempt and
// died, reconciles it instead of sealing it indeterminate. Only an Executing call entered
// by seq with no reconcile in progress can begin one ([ErrInvalidTransition] otherwise).
func (r *CallRecord) BeginReconcile(seq uint64, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if !r.HeldBy(r.Phase.Attempt, seq) {
		return r.badTransition("begin reconcile", "Executing and entered by this delivery")
	}
	if _, ok := r.Reconciling(); ok {
		return r.badTransition("begin reconcile", "no reconcile in progress")
	}
	r.Reconciles = append(r.Reconciles, CallReconcile{Attempt: r.Phase.Attempt, By: seq, StartedAt: at})
	r.stamp(StageReconciling, at)
	return nil
}

// EndReconcile records the end of the reconcile in progress (outcome, reconcile function
// calls, last failure), then applies next, the transition the outcome leads to (Complete,
// Retry or MarkIndeterminate), and records the phase it led to. Without a reconcile in
// progress it fails with [ErrInvalidTransition]; an error of next is returned as is.
func (r *CallRecord) EndReconcile(outcome ReconcileOutcome, calls int, failure string, at time.Time, next func() error) error {
	cur, ok := r.Reconciling()
	if !ok {
		return r.badTransition("end reconcile", "a reconcile in progress")
	}
	i := len(r.Reconciles) - 1
	end := at
	cur.EndedAt, cur.Calls, cur.Outcome, cur.Error = &end, calls, outcome, failure
	r.stamp(StageReconciled, at)
	if err := next(); err != nil {
		return err
	}
	r.Reconciles[i].Phase = r.Phase.Kind
	return nil
}

// ReconcileAudit is the audit record of one ended reconcile, published by the executor
// on [Names.ReconcileAuditSubject] (type [TypeReconcileAudit]) once the outcome is
// committed on the call record: the call, the attempt reconciled, the outcome and the
// phase it led to, how many times the reconcile was asked and its last error.
type ReconcileAudit struct {
	RunID   string           `json:"run_id"`
	BatchID string           `json:"batch_id"`
	CallID  string           `json:"call_id"`
	ToolID  string           `json:"tool_id"`
	Attempt uint16           `json:"attempt"`
	Outcome ReconcileOutcome `json:"outcome"`
	// Phase is the call's phase the outcome led to: Completed (ran, or not_run with no
	// attempt left), Executing (not_run: the body runs again) or Indeterminate.
	Phase     PhaseKind `json:"phase"`
	Calls     int       `json:"calls"`
	Error     string    `json:"error,omitempty"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
}

// ReconcileAnswer is the wire form of a reconcile answered by another program — an MCP
// companion tool's result, a WebAssembly reconcile module's stdout: the outcome, and for
// ran the text the model reads as the call's output.
type ReconcileAnswer struct {
	Outcome ReconcileOutcome `json:"outcome"`
	Output  *string          `json:"output,omitempty"`
}

// DecodeReconcileAnswer reads a [ReconcileAnswer] strictly (one JSON object, no unknown
// field) into the answer for call callID. A malformed answer wraps [ErrInvalidReconcile].
func DecodeReconcileAnswer(callID string, data []byte) (Reconciled, error) {
	var a ReconcileAnswer
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimSpace(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return Reconciled{}, fmt.Errorf("%w: want {\"outcome\": ran|not_run|unknown, \"output\"?: text}: %v", ErrInvalidReconcile, err)
	}
	if dec.More() {
		return Reconciled{}, fmt.Errorf("%w: data after the answer", ErrInvalidReconcile)
	}
	res := Reconciled{Outcome: a.Outcome}
	if a.Output != nil {
		o := TextOutput(callID, *a.Output)
		res.Output = &o
	}
	return res, res.Validate()
}
