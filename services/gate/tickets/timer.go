package tickets

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// HandleTimer is the handler of the ticket timers that JetStream message scheduling
// delivers on the timer subject. A timer of a ticket that no
// longer exists (resolved, cancelled) is acknowledged and ignored.
func (h *Handler) HandleTimer(ctx context.Context, d bus.Delivery) error {
	tm, err := bus.Decode[contracts.TicketTimer](d.Event.Data)
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: decode ticket timer: %w", err))
	}
	if tm.Kind != TimerDue && tm.Kind != TimerDeadline {
		return bus.Permanent(fmt.Errorf("gate: ticket timer %s has unknown kind %q", tm.CorrelationID, tm.Kind))
	}
	log := zerolog.Ctx(ctx).With().Str("correlation_id", tm.CorrelationID).Str("timer", tm.Kind).Logger()
	ctx = log.WithContext(ctx)
	return retryRaced("timer "+tm.CorrelationID, func() error { return h.fire(ctx, tm) })
}

// fire is one attempt at handling timer tm: a due time runs the scheduled call with no human
// (audit "scheduled"); a deadline completes a call still awaiting approval with
// "blocked: approval timed out" (audit "expired"). The call is marked ResolvedBy the timer,
// so a redelivered timer re-publishes instead of acting twice, and a later human resume
// finds no ticket (not_waiting).
func (h *Handler) fire(ctx context.Context, tm contracts.TicketTimer) error {
	p, err := ParseCorrelation(tm.CorrelationID)
	if err != nil {
		return bus.Permanent(err)
	}
	b, i, ok, err := h.Locate(ctx, p)
	if err != nil || !ok {
		return err // no batch or call: nothing to resolve
	}
	ctx = withCall(ctx, b, i)
	tp, ticketRev, err := h.OpenTicket(ctx, tm.CorrelationID)
	if err != nil {
		return err
	}
	rec, rev, err := h.dispatch.LoadCall(ctx, b, i)
	if err != nil {
		return err
	}
	by := TimerResolver(tm.CorrelationID, tm.Kind)
	if rec.ResolvedBy == by {
		return h.dispatch.RedeliveredResolution(ctx, b, i, &rec, timerResolution(tm))
	}
	if tp == nil {
		zerolog.Ctx(ctx).Debug().Msg("timer of a resolved or cancelled ticket ignored")
		return nil
	}
	if err := rec.CheckAwaits(b.Submission.Calls[i], *tp); err != nil {
		// The call no longer Awaits this ticket: an orphan left by a race with a
		// cancellation. Nobody can resume it; remove it.
		zerolog.Ctx(ctx).Info().Err(err).Msg("orphan ticket removed")
		return h.DeleteTicket(ctx, tm.CorrelationID, ticketRev)
	}
	due := tm.Kind == TimerDue && tp.Reason == contracts.ReasonScheduledAction && tp.DueAt != nil
	if !due && (tm.Kind != TimerDeadline || tp.Deadline == nil) {
		zerolog.Ctx(ctx).Warn().Str("reason", string(tp.Reason)).Msg("timer does not apply to its ticket; ignored")
		return nil
	}
	pause, err := h.env.ToolPaused(ctx, b.Submission.Calls[i].ToolID)
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	// The approvals a ticket that needs several had so far are kept for the audit; they
	// never decide: the deadline ends the ticket as an expiry by the timer.
	err = rec.Resolve(contracts.Resolver{By: by, Actor: contracts.ActorTimer, Approvals: tp.Approvals}, h.env.Now())
	switch {
	case err != nil:
	case due:
		err = h.dispatch.EnterUnlessPaused(b, i, &rec, pause)
	default:
		err = rec.Complete(contracts.ErrorOutput(rec.CallID, contracts.BlockedPrefix+ApprovalTimedOut), h.env.Now())
	}
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: timer %s: %w", by, err))
	}
	return h.dispatch.CommitResolution(ctx, b, i, &rec, rev, ticketRev, timerResolution(tm))
}

// expire applies the deadline of ticket t to call i as its deadline timer would, for a
// resume command that arrived after the deadline but before the timer. It does nothing if
// the call no longer Awaits t.
func (h *Handler) expire(ctx context.Context, b *contracts.BatchRecord, i int, t *contracts.ResumeTicket, ticketRev uint64) error {
	rec, rev, err := h.dispatch.LoadCall(ctx, b, i)
	if err != nil {
		return err
	}
	if rec.CheckAwaits(b.Submission.Calls[i], *t) != nil {
		return nil
	}
	tm := contracts.TicketTimer{CorrelationID: t.CorrelationID, Kind: TimerDeadline}
	now := h.env.Now()
	if err := rec.Resolve(contracts.Resolver{By: TimerResolver(tm.CorrelationID, tm.Kind), Actor: contracts.ActorTimer, Approvals: t.Approvals}, now); err != nil {
		return bus.Permanent(fmt.Errorf("gate: expire call %s: %w", rec.CallID, err))
	}
	if err := rec.Complete(contracts.ErrorOutput(rec.CallID, contracts.BlockedPrefix+ApprovalTimedOut), now); err != nil {
		return bus.Permanent(fmt.Errorf("gate: expire call %s: %w", rec.CallID, err))
	}
	return h.dispatch.CommitResolution(ctx, b, i, &rec, rev, ticketRev, timerResolution(tm))
}

// timerResolution is what a fired timer publishes.
func timerResolution(tm contracts.TicketTimer) Resolution {
	if tm.Kind == TimerDue {
		return Resolution{Corr: tm.CorrelationID, Code: ResolvedApproved, Message: "scheduled action is due", Audit: AuditScheduled,
			Actor: contracts.ActorTimer}
	}
	return Resolution{Corr: tm.CorrelationID, Code: ResolvedExpired, Message: ApprovalTimedOut,
		Audit: contracts.AuditDecisionExpired, AuditReason: ApprovalTimedOut, Actor: contracts.ActorTimer}
}
