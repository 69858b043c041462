package gate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Timeline stages the gate writes on a call record.
const (
	// stageDecided marks a decision made by the sequential path, which publishes its
	// audit record; stageProbed one made by a parallel-delegation probe, which published
	// the audit itself before anything else could apply it. Keeping them apart is what lets
	// the sequential path apply a probe's decision without auditing it a second time — a
	// re-publish minutes later, outside the stream's duplicate window, would be stored.
	stageDecided       = "gate.decided"
	stageProbed        = "gate.probed"
	stageExecuting     = "executing"
	stageAwaiting      = "awaiting"
	stageCompleted     = "completed"
	stageIndeterminate = "indeterminate"
	stageResumed       = "resumed"
)

// errCallMismatch reports a call record that does not belong to the call of the batch it
// is keyed under: a corrupted or foreign record the gate must not act on.
var errCallMismatch = errors.New("call record does not match its batch")

// newCallRecord is the record of call i of b as it is first written: Requested, with the
// recovery policy the batcher pinned from the trusted configuration.
func newCallRecord(b *contracts.BatchRecord, i int) contracts.CallRecord {
	c := b.Submission.Calls[i]
	return contracts.CallRecord{
		Index:  i,
		CallID: c.CallID,
		ToolID: c.ToolID,
		Phase:  contracts.RequestedPhase(),
		Policy: b.Pinned[i].Policy,
	}
}

// checkRecord verifies that rec is the record of call i of b.
func checkRecord(b *contracts.BatchRecord, i int, rec *contracts.CallRecord) error {
	c := b.Submission.Calls[i]
	if rec.Index != i || rec.CallID != c.CallID || rec.ToolID != c.ToolID {
		return fmt.Errorf("%w: %s holds call %d %q (%s), batch has call %d %q (%s)", errCallMismatch,
			contracts.OperationID(b.Submission.RunID, b.Submission.Step, c.CallID), rec.Index, rec.CallID, rec.ToolID, i, c.CallID, c.ToolID)
	}
	return nil
}

// durable views rec as the kernel's [contracts.DurableToolCall] so the per-call
// transitions of reference §2.1 apply to it; [storeDurable] copies the result back.
func durable(b *contracts.BatchRecord, i int, rec *contracts.CallRecord) contracts.DurableToolCall {
	return contracts.DurableToolCall{
		Call:           b.Submission.Calls[i],
		RecoveryPolicy: rec.Policy,
		Phase:          rec.Phase,
	}
}

// storeDurable copies the phase of d back into rec and stamps the stage it reached.
func (s *Service) storeDurable(rec *contracts.CallRecord, d contracts.DurableToolCall) {
	rec.Phase = d.Phase
	switch d.Phase.Kind {
	case contracts.PhaseExecuting:
		rec.Entered = false
		rec.EnteredBy = 0
		s.env.Mark(rec, stageExecuting)
	case contracts.PhaseAwaiting:
		s.env.Mark(rec, stageAwaiting)
	case contracts.PhaseCompleted:
		s.env.Mark(rec, stageCompleted)
	case contracts.PhaseIndeterminate:
		s.env.Mark(rec, stageIndeterminate)
	}
}

// decidedAt returns when the gate decided rec, by either path.
func decidedAt(rec *contracts.CallRecord) (time.Time, bool) {
	if at, ok := markTime(rec, stageDecided); ok {
		return at, true
	}
	return markTime(rec, stageProbed)
}

// markTime returns the time of the last timeline mark of stage on rec.
func markTime(rec *contracts.CallRecord, stage string) (time.Time, bool) {
	for i := len(rec.Timeline) - 1; i >= 0; i-- {
		if rec.Timeline[i].Stage == stage {
			return rec.Timeline[i].At, true
		}
	}
	return time.Time{}, false
}

// callOutcome is the terminal kind of a terminal call.
func callOutcome(p contracts.ToolCallPhase) contracts.Outcome {
	if p.Kind == contracts.PhaseIndeterminate {
		return contracts.OutcomeIndeterminate
	}
	return contracts.OutcomeCompleted
}

// isExecutingUnentered reports whether the gate committed an executor entry that no
// executor has taken yet: the executor request is the gate's to (re-)publish.
func isExecutingUnentered(rec *contracts.CallRecord) bool {
	return rec.Phase.Kind == contracts.PhaseExecuting && !rec.Entered
}

// withCall adds the batch, call and run of call i of b to the logger of ctx.
func withCall(ctx context.Context, b *contracts.BatchRecord, i int) context.Context {
	sub := &b.Submission
	log := zerolog.Ctx(ctx).With().Str("run_id", sub.RunID).Str("batch_id", sub.BatchID()).
		Str("call_id", sub.Calls[i].CallID).Logger()
	return log.WithContext(ctx)
}
