package contracts

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// An operator resolves an indeterminate call: someone who checked the outside world says
// what happened to it (the effect ran, with its output; or it did not run). awaken never
// runs the call again. Where the resolution lands depends on the batch:
//
//   - the batch is not finalized yet: the resolution is recorded on the open batch in the
//     run record ([BatchRecord.RecordResolution]) and the call record moves Indeterminate →
//     Completed ([CallRecord.ResolveIndeterminate]). The publisher's finalize is a
//     compare-and-swap on the same run record, so it either sees the resolution (and
//     publishes the resolved output) or commits first (and the resolution becomes a
//     correction) — never neither;
//   - the batch is finalized: its results, published or about to be, never change. The
//     resolution is recorded on the call record as a correction ([CallRecord.RecordCorrection],
//     the call stays Indeterminate) and published as io.awaken.tool.result.corrected.v1
//     ([ResultCorrected]) on the run's results subject, once the batch is published.

// Resolution outcomes an operator may give: the reconcile outcomes that decide
// ([ReconcileRan], [ReconcileNotRun]).

// ErrInvalidResolution is wrapped by [CallResolve.Validate] failures.
var ErrInvalidResolution = errors.New("invalid call resolution")

// MaxResolutionNoteLength bounds a resolution's note, which a not_run output carries to
// the model.
const MaxResolutionNoteLength = 4096

// NotRunPrefix starts the model-visible error text of an indeterminate call an operator
// resolved as not run.
const NotRunPrefix = "tool did not run (resolved by operator): "

// CallResolve is the command that resolves an indeterminate call, named by its operation id.
type CallResolve struct {
	OperationID string `json:"operation_id"`
	// Outcome is ran (Output is the call's output) or not_run (the model reads the error
	// "tool did not run (resolved by operator): {note}").
	Outcome ReconcileOutcome `json:"outcome"`
	Output  *ToolOutput      `json:"output,omitempty"`
	Note    string           `json:"note,omitempty"`
	// Actor and Role are who resolved it and with which role: the api's authenticated
	// actor and the role its token carries.
	Actor string `json:"actor,omitempty"`
	Role  string `json:"role,omitempty"`
}

// Validate checks the command on its own: a valid operation id, an outcome that decides,
// an output exactly for ran (for the named call, valid as a tool output), a bounded note.
func (c *CallResolve) Validate() error {
	_, _, callID, err := ParseOperationID(c.OperationID)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidResolution, err)
	}
	switch c.Outcome {
	case ReconcileRan:
		if c.Output == nil {
			return fmt.Errorf("%w: outcome ran needs the call's output", ErrInvalidResolution)
		}
		if c.Output.CallID != callID {
			return fmt.Errorf("%w: output for call %q offered to call %q", ErrInvalidResolution, c.Output.CallID, callID)
		}
		if err := c.Output.Validate(); err != nil {
			return fmt.Errorf("%w: output: %w", ErrInvalidResolution, err)
		}
		if len(c.Output.State) > 0 {
			// The batch's staged state was checked and may be published already: a
			// resolution cannot stage more.
			return fmt.Errorf("%w: a resolution's output stages no state", ErrInvalidResolution)
		}
	case ReconcileNotRun:
		if c.Output != nil {
			return fmt.Errorf("%w: outcome not_run takes no output (the model reads the note)", ErrInvalidResolution)
		}
	default:
		return fmt.Errorf("%w: outcome %q (want ran or not_run)", ErrInvalidResolution, c.Outcome)
	}
	if len(c.Note) > MaxResolutionNoteLength || !utf8.ValidString(c.Note) {
		return fmt.Errorf("%w: note must be valid UTF-8 of at most %d bytes", ErrInvalidResolution, MaxResolutionNoteLength)
	}
	return nil
}

// ResolvedOutput is the output the call gets: the operator's for ran, the model-visible
// not-run error otherwise. c must be valid.
func (c *CallResolve) ResolvedOutput() ToolOutput {
	if c.Outcome == ReconcileRan {
		return c.Output.Normalize()
	}
	_, _, callID, _ := ParseOperationID(c.OperationID)
	note := c.Note
	if note == "" {
		note = "the operator found its effect did not happen"
	}
	return ErrorOutput(callID, NotRunPrefix+note)
}

// DecodeCallResolve decodes and validates the payload of io.awaken.call.resolve.v1.
func DecodeCallResolve(data []byte) (*CallResolve, error) {
	var c CallResolve
	if rej := decodeWirePayload(data, &c); rej != nil {
		return nil, rej
	}
	if err := c.Validate(); err != nil {
		return nil, rejectWire(RejectInvalidField, "%v", err)
	}
	return &c, nil
}

// How a resolution was applied, as [CallResolution.Applied] and the api's answer.
const (
	// ResolutionResolved: before the batch was finalized; the resolved output is in the
	// batch's published results.
	ResolutionResolved = "resolved"
	// ResolutionCorrected: after; the published results keep the indeterminate result and
	// a [ResultCorrected] event carries the resolved one.
	ResolutionCorrected = "corrected"
)

// CallResolution records on a call record that an operator resolved it: the command (its
// event id, so a redelivery finds its own write), who, with which role and note, the
// outcome and output, and whether it went into the results or became a correction.
type CallResolution struct {
	CommandID string           `json:"command_id"`
	Outcome   ReconcileOutcome `json:"outcome"`
	Output    ToolOutput       `json:"output"`
	Note      string           `json:"note,omitempty"`
	Actor     string           `json:"actor,omitempty"`
	Role      string           `json:"role,omitempty"`
	Applied   string           `json:"applied"`
	At        time.Time        `json:"at"`
}

// StageResolved is the timeline stage of an operator's resolution.
const StageResolved = "resolved"

// ResolveIndeterminate moves an Indeterminate call to Completed with res.Output, the
// resolution recorded (applied "resolved"). A call already resolved by the same command
// is unchanged; any other call is refused.
func (r *CallRecord) ResolveIndeterminate(res CallResolution, at time.Time) error {
	if done, err := r.admitResolution(res, ResolutionResolved, "resolve"); done || err != nil {
		return err
	}
	res.Applied = ResolutionResolved
	r.Phase = CompletedPhase(res.Output)
	r.Resolution = &res
	r.stamp(StageResolved, at)
	return nil
}

// RecordCorrection records on an Indeterminate call whose batch was finalized that an
// operator resolved it afterwards (applied "corrected"): the call stays Indeterminate, as
// its published result says. A call already corrected by the same command is unchanged.
func (r *CallRecord) RecordCorrection(res CallResolution, at time.Time) error {
	if done, err := r.admitResolution(res, ResolutionCorrected, "correct"); done || err != nil {
		return err
	}
	res.Applied = ResolutionCorrected
	r.Resolution = &res
	r.stamp(StageResolved, at)
	return nil
}

// admitResolution is the check [CallRecord.ResolveIndeterminate] and
// [CallRecord.RecordCorrection] share before recording res as applied (op names the
// operation in a refusal): done when the same command was already recorded so (a
// redelivery, nothing to change); an error when another resolution was, when the call is
// not Indeterminate, or when the output is another call's.
func (r *CallRecord) admitResolution(res CallResolution, applied, op string) (done bool, err error) {
	if r.Resolution != nil && r.Resolution.CommandID == res.CommandID && r.Resolution.Applied == applied {
		return true, nil
	}
	if r.Resolution != nil {
		return false, fmt.Errorf("%w: call %q was resolved by %s already", ErrInvalidTransition, r.CallID, r.Resolution.CommandID)
	}
	if r.Phase.Kind != PhaseIndeterminate {
		return false, r.badTransition(op, "Indeterminate")
	}
	if res.Output.CallID != r.CallID {
		return false, fmt.Errorf("%w: output for call %q offered to call %q", ErrUnknownCall, res.Output.CallID, r.CallID)
	}
	return false, nil
}

// BatchResolution is an operator's resolution recorded on an open batch: the publisher
// publishes Output for the call at Index instead of its indeterminate result.
type BatchResolution struct {
	Index     int        `json:"index"`
	CallID    string     `json:"call_id"`
	CommandID string     `json:"command_id"`
	Output    ToolOutput `json:"output"`
}

// ErrBatchNotOpen reports a resolution offered to a batch already finalized: it must be a
// correction.
var ErrBatchNotOpen = errors.New("batch is not open")

// RecordResolution records res on an open batch. The same command again is no change
// (it reports false); another resolution of the same call is refused; a finalized or
// published batch fails with [ErrBatchNotOpen].
func (b *BatchRecord) RecordResolution(res BatchResolution) (bool, error) {
	for _, r := range b.Resolutions {
		if r.Index == res.Index {
			if r.CommandID == res.CommandID {
				return false, nil
			}
			return false, fmt.Errorf("%w: call %q of %s was resolved by %s already", ErrInvalidTransition, r.CallID, b.Submission.BatchID(), r.CommandID)
		}
	}
	if b.Phase != BatchPhaseOpen {
		return false, fmt.Errorf("%w: %s is %s", ErrBatchNotOpen, b.Submission.BatchID(), b.Phase)
	}
	if res.Index < 0 || res.Index >= len(b.Submission.Calls) || b.Submission.Calls[res.Index].CallID != res.CallID {
		return false, fmt.Errorf("%w: call %d %q is not a call of %s", ErrUnknownCall, res.Index, res.CallID, b.Submission.BatchID())
	}
	b.Resolutions = append(b.Resolutions, res)
	return true, nil
}

// AdoptResolutions replaces b's resolutions with committed, the ones a finalize committed
// on the run record: a copy of the batch read before it may lack one recorded since.
func (b *BatchRecord) AdoptResolutions(committed []BatchResolution) {
	b.Resolutions = append([]BatchResolution(nil), committed...)
}

// AnchorAudit sets b's [BatchRecord.AuditHead] to h: the run's audit chain head a
// finalize records on the batch, or, on a copy of the batch read before it, the head that
// finalize committed.
func (b *BatchRecord) AnchorAudit(h *AuditHead) { b.AuditHead = h }

// Resolved returns the operator's resolution recorded for call index, if any.
func (b *BatchRecord) Resolved(index int) (BatchResolution, bool) {
	for _, r := range b.Resolutions {
		if r.Index == index {
			return r, true
		}
	}
	return BatchResolution{}, false
}

// ResultCorrected is the payload of io.awaken.tool.result.corrected.v1: the result a
// batch published for a call (indeterminate) and the operator's correction of it. Its id
// is "{operation_id}:corrected" (one per call). A platform that keeps a transcript shows
// the correction beside the result; the published batch itself never changes.
type ResultCorrected struct {
	OperationID string           `json:"operation_id"`
	RunID       string           `json:"run_id"`
	BatchID     string           `json:"batch_id"`
	CallID      string           `json:"call_id"`
	Index       int              `json:"index"`
	Published   ToolOutput       `json:"published"`
	Corrected   ToolOutput       `json:"corrected"`
	Outcome     ReconcileOutcome `json:"outcome"`
	Note        string           `json:"note,omitempty"`
	Actor       string           `json:"actor,omitempty"`
	Role        string           `json:"role,omitempty"`
	At          time.Time        `json:"at"`
}

// ResultCorrectedID is the event id of the correction of call op.
func ResultCorrectedID(op string) string { return op + ":corrected" }
