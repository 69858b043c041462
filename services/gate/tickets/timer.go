package tickets

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// HandleTimer is the handler of the ticket timers that JetStream message scheduling
// delivers on the timer subject. A timer of a ticket that no longer exists (resolved,
// cancelled) is acknowledged and ignored.
func (h *Handler) HandleTimer(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	tm, err := bus.Decode[contracts.TicketTimer](d.Event.Data)
	if err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: decode ticket timer: %w", err))
	}
	if tm.Kind != TimerDue && tm.Kind != TimerDeadline {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: ticket timer %s has unknown kind %q", tm.CorrelationID, tm.Kind))
	}
	log := zerolog.Ctx(ctx).With().Str("correlation_id", tm.CorrelationID).Str("timer", tm.Kind).Logger()
	return h.fire(log.WithContext(ctx), tm)
}

// fire decides what timer tm does: a due time runs the scheduled call with no human (audit
// "scheduled"); a deadline completes a call still awaiting approval with "blocked:
// approval timed out" (audit "expired"). The call is marked ResolvedBy the timer, so a
// redelivered timer re-publishes instead of acting twice, and a later human resume finds
// no ticket (not_waiting). A resolution that loses its compare-and-swap to another
// ([ErrRaced]) is decided again by the runtime.
func (h *Handler) fire(ctx context.Context, tm contracts.TicketTimer) (pipeline.Effects, error) {
	p, err := ParseCorrelation(tm.CorrelationID)
	if err != nil {
		return pipeline.Effects{}, bus.Permanent(err)
	}
	b, i, ok, err := h.Locate(ctx, p)
	if err != nil || !ok {
		return pipeline.Effects{}, err // no batch or call: nothing to resolve
	}
	ctx = withCall(ctx, b, i)
	tp, ticketRev, err := h.OpenTicket(ctx, tm.CorrelationID)
	if err != nil {
		return pipeline.Effects{}, err
	}
	rec, rev, err := h.dispatch.LoadCall(ctx, b, i)
	if err != nil {
		return pipeline.Effects{}, err
	}
	by := TimerResolver(tm.CorrelationID, tm.Kind)
	if rec.ResolvedBy == by {
		return logged(ctx, h.dispatch.RedeliveredResolution(b, i, &rec, timerResolution(tm))), nil
	}
	if tp == nil {
		zerolog.Ctx(ctx).Debug().Msg("timer of a resolved or cancelled ticket ignored")
		return pipeline.Effects{}, nil
	}
	if err := rec.CheckAwaits(b.Submission.Calls[i], *tp); err != nil {
		// The call no longer Awaits this ticket: an orphan left by a race with a
		// cancellation. Nobody can resume it; remove it.
		why := err
		return logged(ctx, pipeline.Effects{Steps: []pipeline.Effect{pipeline.Do(func(ctx context.Context) error {
			zerolog.Ctx(ctx).Info().Err(why).Msg("orphan ticket removed")
			return h.DeleteTicket(ctx, tm.CorrelationID, ticketRev)
		})}}), nil
	}
	due := tm.Kind == TimerDue && tp.Reason == contracts.ReasonScheduledAction && tp.DueAt != nil
	if !due && (tm.Kind != TimerDeadline || tp.Deadline == nil) {
		zerolog.Ctx(ctx).Warn().Str("reason", string(tp.Reason)).Msg("timer does not apply to its ticket; ignored")
		return pipeline.Effects{}, nil
	}
	pause, err := h.env.ToolPaused(ctx, b.Submission.Calls[i].ToolID)
	if err != nil {
		return pipeline.Effects{}, fmt.Errorf("gate: %w", err)
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
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: timer %s: %w", by, err))
	}
	return logged(ctx, h.dispatch.CommitResolution(b, i, &rec, rev, ticketRev, timerResolution(tm))), nil
}

// expire returns the effects of the deadline of ticket t on call i, as its deadline timer
// would have them, for a resume command that arrived after the deadline but before the
// timer: none if the call no longer Awaits t.
func (h *Handler) expire(ctx context.Context, b *contracts.BatchRecord, i int, t *contracts.ResumeTicket, ticketRev uint64) (pipeline.Effects, error) {
	rec, rev, err := h.dispatch.LoadCall(ctx, b, i)
	if err != nil {
		return pipeline.Effects{}, err
	}
	if rec.CheckAwaits(b.Submission.Calls[i], *t) != nil {
		return pipeline.Effects{}, nil
	}
	tm := contracts.TicketTimer{CorrelationID: t.CorrelationID, Kind: TimerDeadline}
	now := h.env.Now()
	if err := rec.Resolve(contracts.Resolver{By: TimerResolver(tm.CorrelationID, tm.Kind), Actor: contracts.ActorTimer, Approvals: t.Approvals}, now); err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: expire call %s: %w", rec.CallID, err))
	}
	if err := rec.Complete(contracts.ErrorOutput(rec.CallID, contracts.BlockedPrefix+ApprovalTimedOut), now); err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: expire call %s: %w", rec.CallID, err))
	}
	return h.dispatch.CommitResolution(b, i, &rec, rev, ticketRev, timerResolution(tm)), nil
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
