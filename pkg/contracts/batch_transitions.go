package contracts

import (
	"fmt"
)

// This file holds the batch-level rules of the durable state machine, as methods of the
// batch record the services store, applied to the batch's call records in model order:
// a record belongs to its call, at most one call awaits, a batch finalizes only once every
// call is terminal and publishes only once finalized, and a resume ticket must name
// exactly the wait the batch holds.
//
//	open ──Finalize (every call terminal)──▶ finalized ──MarkPublished──▶ published

// CheckCall verifies that rec is the record of call i of b: same index, call id and tool
// id ([ErrCallMismatch] otherwise). It does not validate rec itself: every transition does.
func (b *BatchRecord) CheckCall(i int, rec *CallRecord) error {
	sub := &b.Submission
	if i < 0 || i >= len(sub.Calls) {
		return fmt.Errorf("%w: batch %s has no call %d", ErrCallMismatch, sub.BatchID(), i)
	}
	c := sub.Calls[i]
	if rec.Index != i || rec.CallID != c.CallID || rec.ToolID != c.ToolID {
		return fmt.Errorf("%w: %s holds call %d %q (%s), batch has call %d %q (%s)", ErrCallMismatch,
			OperationID(sub.RunID, sub.Step, c.CallID), rec.Index, rec.CallID, rec.ToolID, i, c.CallID, c.ToolID)
	}
	return nil
}

// CheckCalls verifies the records of every call of b, in model order: one per call, each
// the valid record of its call ([BatchRecord.CheckCall], [CallRecord.Validate]), at most one awaiting
// ([ErrMultipleAwaitingCalls]: a run owns at most one ticket, so its batch owns at most one
// wait), and, once the batch is finalized or published, every call terminal
// ([ErrInvalidPersistedState]).
func (b *BatchRecord) CheckCalls(calls []CallRecord) error {
	if err := b.checkPhase(); err != nil {
		return err
	}
	if len(calls) != len(b.Submission.Calls) {
		return fmt.Errorf("%w: batch %s has %d calls, %d records given", ErrCallMismatch, b.Submission.BatchID(), len(b.Submission.Calls), len(calls))
	}
	awaiting := 0
	for i := range calls {
		if err := b.CheckCall(i, &calls[i]); err != nil {
			return err
		}
		if err := calls[i].Validate(); err != nil {
			return err
		}
		if calls[i].Phase.Kind == PhaseAwaiting {
			awaiting++
		}
		if b.Phase != BatchPhaseOpen && !calls[i].Phase.IsTerminal() {
			return fmt.Errorf("%w: %s batch %s holds non-terminal call %q", ErrInvalidPersistedState, b.Phase, b.Submission.BatchID(), calls[i].CallID)
		}
	}
	if awaiting > 1 {
		return fmt.Errorf("%w: %d calls of %s await", ErrMultipleAwaitingCalls, awaiting, b.Submission.BatchID())
	}
	return nil
}

// Finalize closes an open batch for publication once calls — the records of its calls in
// model order — are all terminal ([ErrIncomplete] otherwise, or the error of
// [BatchRecord.CheckCalls]). A batch already finalized fails with [ErrBatchFinalized], a
// published one with [ErrBatchPublished] (test those two with errors.Is: a redelivery
// finds the work done).
func (b *BatchRecord) Finalize(calls []CallRecord) error {
	if err := b.checkPhase(); err != nil {
		return err
	}
	switch b.Phase {
	case BatchPhaseFinalized:
		return fmt.Errorf("%w: %s", ErrBatchFinalized, b.Submission.BatchID())
	case BatchPhasePublished:
		return fmt.Errorf("%w: %w: %s", ErrBatchFinalized, ErrBatchPublished, b.Submission.BatchID())
	}
	if err := b.CheckCalls(calls); err != nil {
		return err
	}
	for i := range calls {
		if !calls[i].Phase.IsTerminal() {
			return fmt.Errorf("%w: call %q is %s", ErrIncomplete, calls[i].CallID, calls[i].Phase.Kind)
		}
	}
	b.Phase = BatchPhaseFinalized
	return nil
}

// MarkPublished records that a finalized batch's results are on the results stream. A
// published batch fails with [ErrBatchPublished], an open one with
// [ErrInvalidTransition]: nothing is published before the barrier.
func (b *BatchRecord) MarkPublished() error {
	if err := b.checkPhase(); err != nil {
		return err
	}
	switch b.Phase {
	case BatchPhaseOpen:
		return fmt.Errorf("%w: batch %s is not finalized", ErrInvalidTransition, b.Submission.BatchID())
	case BatchPhasePublished:
		return fmt.Errorf("%w: %s", ErrBatchPublished, b.Submission.BatchID())
	}
	b.Phase = BatchPhasePublished
	return nil
}

// Outputs returns the model-visible output of every call in model order (see
// [CallRecord.Output]). Results publish only at the barrier, so an open batch fails with
// [ErrIncomplete].
func (b *BatchRecord) Outputs(calls []CallRecord) ([]ToolOutput, error) {
	if err := b.CheckCalls(calls); err != nil {
		return nil, err
	}
	if b.Phase == BatchPhaseOpen {
		return nil, fmt.Errorf("%w: batch %s is not finalized", ErrIncomplete, b.Submission.BatchID())
	}
	outs := make([]ToolOutput, len(calls))
	for i := range calls {
		out, _ := calls[i].Output() // CheckCalls guarantees every call is terminal
		outs[i] = out
	}
	return outs, nil
}

// CheckTicket checks that this batch, with the records of its calls, is exactly the
// execution truth a committed ticket names, in this order: the batch is open
// ([ErrTicketFinalized]), the ticket's run ([ErrTicketRunMismatch]), thread — the
// submission's thread — ([ErrTicketThreadMismatch]) and batch ([ErrTicketBatchMismatch])
// match, the reason is a tool-call reason ([ErrTicketNotToolCall]), some call awaits
// ([ErrTicketMissingAwaitingCall]), then [CallRecord.CheckAwaits] on that call. It changes
// nothing.
func (b *BatchRecord) CheckTicket(calls []CallRecord, t ResumeTicket) error {
	if err := b.CheckCalls(calls); err != nil {
		return err
	}
	sub := &b.Submission
	if b.Phase != BatchPhaseOpen {
		return fmt.Errorf("%w: %s", ErrTicketFinalized, sub.BatchID())
	}
	if t.RunID != sub.RunID {
		return fmt.Errorf("%w: ticket run %q, batch run %q", ErrTicketRunMismatch, t.RunID, sub.RunID)
	}
	if t.ThreadID != sub.ThreadID {
		return fmt.Errorf("%w: ticket thread %q, run thread %q", ErrTicketThreadMismatch, t.ThreadID, sub.ThreadID)
	}
	if t.BatchID != sub.BatchID() {
		return fmt.Errorf("%w: ticket batch %q, batch %q", ErrTicketBatchMismatch, t.BatchID, sub.BatchID())
	}
	if WaitKindForReason(t.Reason) == "" {
		return fmt.Errorf("%w: reason %q", ErrTicketNotToolCall, t.Reason)
	}
	for i := range calls {
		if calls[i].Phase.Kind == PhaseAwaiting {
			return calls[i].CheckAwaits(sub.Calls[i], t)
		}
	}
	return fmt.Errorf("%w: batch %s", ErrTicketMissingAwaitingCall, sub.BatchID())
}

// checkPhase refuses a batch record of unknown phase (written by a newer version, or
// corrupted).
func (b *BatchRecord) checkPhase() error {
	if b == nil {
		return fmt.Errorf("%w: nil batch record", ErrInvalidPersistedState)
	}
	switch b.Phase {
	case BatchPhaseOpen, BatchPhaseFinalized, BatchPhasePublished:
		return nil
	}
	return fmt.Errorf("%w: batch %s has unknown phase %q", ErrInvalidPersistedState, b.Submission.BatchID(), b.Phase)
}
