package tickets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Timer kinds of [contracts.TicketTimer].
const (
	TimerDue      = "due"
	TimerDeadline = "deadline"
)

// TicketFor builds the ticket of parked call i from the committed record alone, so that a
// redelivery rebuilds exactly the same ticket: OpenedAt is the time the Awaiting phase was
// committed, DueAt is OpenedAt + the schedule's delay, Deadline is OpenedAt + the approval
// timeout when the rule set one.
func (h *Handler) TicketFor(b *contracts.BatchRecord, i int, rec *contracts.CallRecord) (*contracts.ResumeTicket, error) {
	w := rec.Phase.Wait
	reason, ok := contracts.ReasonForWaitKind(w.Kind)
	if !ok {
		return nil, fmt.Errorf("gate: call %s Awaits %s, which has no ticket", rec.CallID, w.Kind)
	}
	opened, ok := rec.MarkTime(contracts.StageAwaiting)
	if !ok {
		opened = h.env.Now()
	}
	sub := &b.Submission
	c := sub.Calls[i]
	t := &contracts.ResumeTicket{
		CorrelationID: w.CorrelationID,
		RunID:         sub.RunID,
		ThreadID:      sub.ThreadID,
		SnapshotID:    sub.Agent.SnapshotID,
		BatchID:       sub.BatchID(),
		CallID:        c.CallID,
		ToolID:        c.ToolID,
		Arguments:     c.Arguments,
		Reason:        reason,
		OpenedAt:      opened,
		// The digest of the arguments the call was proposed with: an approval names it
		// to say it approves exactly these.
		ArgumentsDigest: contracts.ArgumentsDigest(c.Arguments),
	}
	if d := rec.Decision; d != nil {
		t.PolicyDigest = d.PolicyDigest
		if d.Kind == contracts.GateRequireConfirmation && d.Approvals > 1 {
			t.ApprovalsRequired = d.Approvals
		}
		switch {
		case d.Kind == contracts.GateSchedule:
			due := opened.Add(d.Delay.D())
			if d.Until != nil && d.Until.After(due) {
				due = d.Until.UTC() // deferred by a waiting rate limit (services/gate/limits ratewait.go)
			}
			t.DueAt = &due
		case d.Kind == contracts.GateRequireConfirmation && d.Timeout > 0:
			deadline := opened.Add(d.Timeout.D())
			t.Deadline = &deadline
		}
	}
	return t, nil
}

// EnsureTicket creates t unless it exists and reports whether it is live. A freshly created
// ticket is checked against the call again: if a resume or a cancellation moved the call
// between our read and the create, the ticket would be an orphan that lists a call nobody
// can resume, so it is deleted again and reported dead.
func (h *Handler) EnsureTicket(ctx context.Context, b *contracts.BatchRecord, i int, t *contracts.ResumeTicket) (bool, error) {
	rev, err := h.env.Tickets.Create(ctx, t.CorrelationID, *t)
	switch {
	case errors.Is(err, state.ErrExists):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("gate: create ticket %s: %w", t.CorrelationID, err)
	}
	rec, _, err := h.dispatch.LoadCall(ctx, b, i)
	if err != nil {
		return false, err
	}
	// The call was Awaiting when t was built, and a call never goes back: a read that shows
	// it missing or Requested was answered by a replica of the calls bucket behind that
	// write (any replica answers a get), not by a call that moved on. Deleting the ticket
	// then left the call Awaiting with no ticket to resume it (make chaos-cluster).
	if Awaits(&rec, t.CorrelationID) || rec.Phase.Kind == contracts.PhaseRequested {
		return true, nil
	}
	if err := h.DeleteTicket(ctx, t.CorrelationID, rev); err != nil {
		return false, err
	}
	return false, nil
}

// Awaits reports whether rec is parked on correlation corr.
func Awaits(rec *contracts.CallRecord, corr string) bool {
	return rec.Phase.Kind == contracts.PhaseAwaiting && rec.Phase.Wait != nil && rec.Phase.Wait.CorrelationID == corr
}

// OpenTicket reads ticket corr and its revision: nil when there is none (never opened,
// or resolved, expired or cleared since).
func (h *Handler) OpenTicket(ctx context.Context, corr string) (*contracts.ResumeTicket, uint64, error) {
	ticket, rev, err := h.env.Tickets.Get(ctx, corr)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("gate: read ticket %s: %w", corr, err)
	}
	return &ticket, rev, nil
}

// DeleteTicket deletes ticket corr if it is still at revision rev (0: whatever revision).
// A ticket already gone is not an error: deleting is how a ticket is resolved, and a
// redelivered resolution deletes again.
func (h *Handler) DeleteTicket(ctx context.Context, corr string, rev uint64) error {
	err := h.env.Tickets.Delete(ctx, corr, rev)
	if err != nil && !errors.Is(err, state.ErrNotFound) && !errors.Is(err, state.ErrConflict) {
		return fmt.Errorf("gate: delete ticket %s: %w", corr, err)
	}
	return nil
}

// ScheduleTimers publishes the JetStream message schedule of t's due time or deadline: it
// is held on the ticket's schedule subject and delivered once, at that time, on the timer
// subject the gate consumes. The schedule's id is deterministic, so re-publishing it is
// deduplicated; past the duplicate window it replaces the schedule with one at the same
// time, which delivers at once if the time has passed — the timer handler then finds the
// ticket resolved, or resolves it, which is what the time demands.
func (h *Handler) ScheduleTimers(ctx context.Context, t *contracts.ResumeTicket) error {
	var kind string
	var at time.Time
	switch {
	case t.DueAt != nil:
		kind, at = TimerDue, *t.DueAt
	case t.Deadline != nil:
		kind, at = TimerDeadline, *t.Deadline
	default:
		return nil
	}
	ev, err := h.timer(t.CorrelationID, kind)
	if err != nil {
		return err
	}
	names := h.env.Names
	return h.env.Pub.PublishScheduled(ctx, names.TicketScheduleSubject(t.CorrelationID), names.TicketExpireSubject(), CeilSecond(at), ev)
}

// CeilSecond rounds t up to a whole second. Message schedules have second resolution and
// the client truncates, which would fire a timer up to a second early: a scheduled call
// would run before its due_at, and an approval sent just before its deadline would find the
// call already expired. Rounding up makes every timer fire at or after its time.
func CeilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// Correlation is what a correlation id names: "{kind}.{run_id}.{step}.{call_id}"
// (see [contracts.CorrelationID]).
type Correlation struct {
	reason contracts.TicketReason
	runID  string
	step   int64
	callID string
}

// ErrBadCorrelation means a correlation id was not made by [contracts.CorrelationID].
var ErrBadCorrelation = errors.New("malformed correlation id")

// ParseCorrelation inverts [contracts.CorrelationID] (see [contracts.ParseCorrelationID]).
func ParseCorrelation(corr string) (Correlation, error) {
	reason, runID, step, callID, err := contracts.ParseCorrelationID(corr)
	if err != nil {
		return Correlation{}, fmt.Errorf("%w: %w", ErrBadCorrelation, err)
	}
	return Correlation{reason: reason, runID: runID, step: step, callID: callID}, nil
}

// Locate finds the batch record and the index of the call a correlation id names. ok is
// false when there is no such batch or call (a forged or stale correlation id).
func (h *Handler) Locate(ctx context.Context, p Correlation) (b *contracts.BatchRecord, i int, ok bool, err error) {
	b, err = h.env.Batch(ctx, p.runID, p.step)
	if err != nil {
		if errors.Is(err, pipeline.ErrBatchNotFound) {
			return nil, 0, false, nil
		}
		return nil, 0, false, err
	}
	for i, c := range b.Submission.Calls {
		if c.CallID == p.callID {
			return b, i, true, nil
		}
	}
	return nil, 0, false, nil
}
