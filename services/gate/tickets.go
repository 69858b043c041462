package gate

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
	timerDue      = "due"
	timerDeadline = "deadline"
)

// ticketFor builds the ticket of parked call i from the committed record alone, so that a
// redelivery rebuilds exactly the same ticket: OpenedAt is the time the Awaiting phase was
// committed, DueAt is OpenedAt + the schedule's delay, Deadline is OpenedAt + the approval
// timeout when the rule set one.
func (s *Service) ticketFor(b *contracts.BatchRecord, i int, rec *contracts.CallRecord) (*contracts.ResumeTicket, error) {
	w := rec.Phase.Wait
	reason, ok := contracts.ReasonForWaitKind(w.Kind)
	if !ok {
		return nil, fmt.Errorf("gate: call %s awaits %s, which has no ticket", rec.CallID, w.Kind)
	}
	opened, ok := rec.MarkTime(contracts.StageAwaiting)
	if !ok {
		opened = s.env.Now()
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

// ensureTicket creates t unless it exists and reports whether it is live. A freshly created
// ticket is checked against the call again: if a resume or a cancellation moved the call
// between our read and the create, the ticket would be an orphan that lists a call nobody
// can resume, so it is deleted again and reported dead.
func (s *Service) ensureTicket(ctx context.Context, b *contracts.BatchRecord, i int, t *contracts.ResumeTicket) (bool, error) {
	rev, err := s.env.Tickets.Create(ctx, t.CorrelationID, *t)
	switch {
	case errors.Is(err, state.ErrExists):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("gate: create ticket %s: %w", t.CorrelationID, err)
	}
	rec, _, err := s.loadCall(ctx, b, i)
	if err != nil {
		return false, err
	}
	// The call was Awaiting when t was built, and a call never goes back: a read that shows
	// it missing or Requested was answered by a replica of the calls bucket behind that
	// write (any replica answers a get), not by a call that moved on. Deleting the ticket
	// then left the call Awaiting with no ticket to resume it (make chaos-cluster).
	if awaits(&rec, t.CorrelationID) || rec.Phase.Kind == contracts.PhaseRequested {
		return true, nil
	}
	if err := s.deleteTicket(ctx, t.CorrelationID, rev); err != nil {
		return false, err
	}
	return false, nil
}

// awaits reports whether rec is parked on correlation corr.
func awaits(rec *contracts.CallRecord, corr string) bool {
	return rec.Phase.Kind == contracts.PhaseAwaiting && rec.Phase.Wait != nil && rec.Phase.Wait.CorrelationID == corr
}

// openTicket reads ticket corr and its revision: nil when there is none (never opened,
// or resolved, expired or cleared since).
func (s *Service) openTicket(ctx context.Context, corr string) (*contracts.ResumeTicket, uint64, error) {
	ticket, rev, err := s.env.Tickets.Get(ctx, corr)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("gate: read ticket %s: %w", corr, err)
	}
	return &ticket, rev, nil
}

// deleteTicket deletes ticket corr if it is still at revision rev (0: whatever revision).
// A ticket already gone is not an error: deleting is how a ticket is resolved, and a
// redelivered resolution deletes again.
func (s *Service) deleteTicket(ctx context.Context, corr string, rev uint64) error {
	err := s.env.Tickets.Delete(ctx, corr, rev)
	if err != nil && !errors.Is(err, state.ErrNotFound) && !errors.Is(err, state.ErrConflict) {
		return fmt.Errorf("gate: delete ticket %s: %w", corr, err)
	}
	return nil
}

// scheduleTimers publishes the JetStream message schedule of t's due time or deadline: it
// is held on the ticket's schedule subject and delivered once, at that time, on the timer
// subject the gate consumes. The schedule's id is deterministic, so re-publishing it is
// deduplicated; past the duplicate window it replaces the schedule with one at the same
// time, which delivers at once if the time has passed — the timer handler then finds the
// ticket resolved, or resolves it, which is what the time demands.
func (s *Service) scheduleTimers(ctx context.Context, t *contracts.ResumeTicket) error {
	var kind string
	var at time.Time
	switch {
	case t.DueAt != nil:
		kind, at = timerDue, *t.DueAt
	case t.Deadline != nil:
		kind, at = timerDeadline, *t.Deadline
	default:
		return nil
	}
	ev, err := s.timer(t.CorrelationID, kind)
	if err != nil {
		return err
	}
	names := s.env.Names
	return s.env.Pub.PublishScheduled(ctx, names.TicketScheduleSubject(t.CorrelationID), names.TicketExpireSubject(), ceilSecond(at), ev)
}

// ceilSecond rounds t up to a whole second. Message schedules have second resolution and
// the client truncates, which would fire a timer up to a second early: a scheduled call
// would run before its due_at, and an approval sent just before its deadline would find the
// call already expired. Rounding up makes every timer fire at or after its time.
func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// parsedCorrelation is what a correlation id names: "{kind}.{run_id}.{step}.{call_id}"
// (see [contracts.CorrelationID]).
type parsedCorrelation struct {
	reason contracts.TicketReason
	runID  string
	step   int64
	callID string
}

// errBadCorrelation means a correlation id was not made by [contracts.CorrelationID].
var errBadCorrelation = errors.New("malformed correlation id")

// parseCorrelation inverts [contracts.CorrelationID] (see [contracts.ParseCorrelationID]).
func parseCorrelation(corr string) (parsedCorrelation, error) {
	reason, runID, step, callID, err := contracts.ParseCorrelationID(corr)
	if err != nil {
		return parsedCorrelation{}, fmt.Errorf("%w: %w", errBadCorrelation, err)
	}
	return parsedCorrelation{reason: reason, runID: runID, step: step, callID: callID}, nil
}

// locate finds the batch record and the index of the call a correlation id names. ok is
// false when there is no such batch or call (a forged or stale correlation id).
func (s *Service) locate(ctx context.Context, p parsedCorrelation) (b *contracts.BatchRecord, i int, ok bool, err error) {
	b, err = s.env.Batch(ctx, p.runID, p.step)
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
