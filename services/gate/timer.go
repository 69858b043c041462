package gate

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// handleTimer is the handler of the ticket timers that JetStream message scheduling
// delivers on the timer subject. A timer of a ticket that no
// longer exists (resolved, cancelled) is acknowledged and ignored.
func (s *Service) handleTimer(ctx context.Context, d bus.Delivery) error {
	tm, err := bus.Decode[contracts.TicketTimer](d.Event.Data)
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: decode ticket timer: %w", err))
	}
	if tm.Kind != timerDue && tm.Kind != timerDeadline {
		return bus.Permanent(fmt.Errorf("gate: ticket timer %s has unknown kind %q", tm.CorrelationID, tm.Kind))
	}
	log := zerolog.Ctx(ctx).With().Str("correlation_id", tm.CorrelationID).Str("timer", tm.Kind).Logger()
	ctx = log.WithContext(ctx)
	return retryRaced("timer "+tm.CorrelationID, func() error { return s.fire(ctx, tm) })
}

// fire is one attempt at handling timer tm: a due time runs the scheduled call with no human
// (audit "scheduled"); a deadline completes a call still awaiting approval with
// "blocked: approval timed out" (audit "expired"). The call is marked ResolvedBy the timer,
// so a redelivered timer re-publishes instead of acting twice, and a later human resume
// finds no ticket (not_waiting).
func (s *Service) fire(ctx context.Context, tm contracts.TicketTimer) error {
	p, err := parseCorrelation(tm.CorrelationID)
	if err != nil {
		return bus.Permanent(err)
	}
	b, i, ok, err := s.locate(ctx, p)
	if err != nil || !ok {
		return err // no batch or call: nothing to resolve
	}
	ctx = withCall(ctx, b, i)
	tp, ticketRev, err := s.openTicket(ctx, tm.CorrelationID)
	if err != nil {
		return err
	}
	rec, rev, err := s.loadCall(ctx, b, i)
	if err != nil {
		return err
	}
	by := timerResolver(tm.CorrelationID, tm.Kind)
	if rec.ResolvedBy == by {
		return s.redeliveredResolution(ctx, b, i, &rec, timerResolution(tm))
	}
	if tp == nil {
		zerolog.Ctx(ctx).Debug().Msg("timer of a resolved or cancelled ticket ignored")
		return nil
	}
	if err := rec.CheckAwaits(b.Submission.Calls[i], *tp); err != nil {
		// The call no longer awaits this ticket: an orphan left by a race with a
		// cancellation. Nobody can resume it; remove it.
		zerolog.Ctx(ctx).Info().Err(err).Msg("orphan ticket removed")
		return s.deleteTicket(ctx, tm.CorrelationID, ticketRev)
	}
	due := tm.Kind == timerDue && tp.Reason == contracts.ReasonScheduledAction && tp.DueAt != nil
	if !due && (tm.Kind != timerDeadline || tp.Deadline == nil) {
		zerolog.Ctx(ctx).Warn().Str("reason", string(tp.Reason)).Msg("timer does not apply to its ticket; ignored")
		return nil
	}
	pause, err := s.env.ToolPaused(ctx, b.Submission.Calls[i].ToolID)
	if err != nil {
		return fmt.Errorf("gate: %w", err)
	}
	// The approvals a ticket that needs several had so far are kept for the audit; they
	// never decide: the deadline ends the ticket as an expiry by the timer.
	err = rec.Resolve(contracts.Resolver{By: by, Actor: contracts.ActorTimer, Approvals: tp.Approvals}, s.env.Now())
	switch {
	case err != nil:
	case due:
		err = s.enterUnlessPaused(b, i, &rec, pause)
	default:
		err = rec.Complete(contracts.ErrorOutput(rec.CallID, contracts.BlockedPrefix+approvalTimedOut), s.env.Now())
	}
	if err != nil {
		return bus.Permanent(fmt.Errorf("gate: timer %s: %w", by, err))
	}
	return s.commitResolution(ctx, b, i, &rec, rev, ticketRev, timerResolution(tm))
}

// expire applies the deadline of ticket t to call i as its deadline timer would, for a
// resume command that arrived after the deadline but before the timer. It does nothing if
// the call no longer awaits t.
func (s *Service) expire(ctx context.Context, b *contracts.BatchRecord, i int, t *contracts.ResumeTicket, ticketRev uint64) error {
	rec, rev, err := s.loadCall(ctx, b, i)
	if err != nil {
		return err
	}
	if rec.CheckAwaits(b.Submission.Calls[i], *t) != nil {
		return nil
	}
	tm := contracts.TicketTimer{CorrelationID: t.CorrelationID, Kind: timerDeadline}
	now := s.env.Now()
	if err := rec.Resolve(contracts.Resolver{By: timerResolver(tm.CorrelationID, tm.Kind), Actor: contracts.ActorTimer, Approvals: t.Approvals}, now); err != nil {
		return bus.Permanent(fmt.Errorf("gate: expire call %s: %w", rec.CallID, err))
	}
	if err := rec.Complete(contracts.ErrorOutput(rec.CallID, contracts.BlockedPrefix+approvalTimedOut), now); err != nil {
		return bus.Permanent(fmt.Errorf("gate: expire call %s: %w", rec.CallID, err))
	}
	return s.commitResolution(ctx, b, i, &rec, rev, ticketRev, timerResolution(tm))
}

// timerResolution is what a fired timer publishes.
func timerResolution(tm contracts.TicketTimer) resolution {
	if tm.Kind == timerDue {
		return resolution{corr: tm.CorrelationID, code: resolvedApproved, message: "scheduled action is due", audit: auditScheduled,
			actor: contracts.ActorTimer}
	}
	return resolution{corr: tm.CorrelationID, code: resolvedExpired, message: approvalTimedOut,
		audit: contracts.AuditDecisionExpired, auditReason: approvalTimedOut, actor: contracts.ActorTimer}
}
