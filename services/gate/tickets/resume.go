package tickets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/state"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// HandleResume is the handler of io.awaken.ticket.resume.v1, the approval protocol's answer to a ticket. A command that
// does not decode returns its [*contracts.Rejection]: the bus then runs the consumer's
// OnReject, which publishes the rejection with the decoder's code, and dead-letters the
// message. Every other refusal is a [contracts.ResumeErrorCode] published on the rejected
// subject; the message is acknowledged and the ticket is left untouched.
//
// The command's actor is claimed when no door authenticated it (it came on the public
// subject, not the api's): the resolution records the actor as claimed, and a reserved actor
// ([contracts.ReservedActor]: timer, anonymous, nats…) is refused reserved_actor before
// anything is read, so the ticket stays open and no record changes.
func (h *Handler) HandleResume(ctx context.Context, d bus.Delivery) (pipeline.Effects, error) {
	ev, claimed := d.Event, d.Subject != h.env.Names.TicketResumeAPISubject()
	cmd, err := contracts.DecodeResumeCommand(ev.Data)
	if err != nil {
		return pipeline.Effects{}, err
	}
	log := zerolog.Ctx(ctx).With().Str("correlation_id", cmd.CorrelationID).Str("run_id", cmd.RunID).Str("resume_id", ev.ID).
		Str("actor", cmd.Actor).Bool("actor_claimed", claimed).Logger()
	ctx = log.WithContext(ctx)
	if claimed {
		if err := contracts.CheckClaimedActor(cmd.Actor); err != nil {
			return h.reject(ctx, ev.ID, *cmd, err), nil
		}
	}
	return h.Resume(ctx, ev.ID, *cmd, claimed)
}

// ResumeRejected answers a resume command the bus or the decoder refused (wrong type,
// undecodable envelope or payload) before it is dead-lettered.
func (h *Handler) ResumeRejected(ctx context.Context, d bus.Delivery, rej *contracts.Rejection) error {
	id := d.Event.ID
	if id == "" {
		// The envelope itself did not decode; answer under an id derived from the stream
		// position so the answer is still deduplicated.
		id = fmt.Sprintf("%s-%d", d.Stream, d.StreamSeq)
	}
	return h.publishRejection(ctx, id, contracts.TicketResolution{Code: string(rej.Code), Message: rej.Message})
}

// publishRejection publishes io.awaken.ticket.rejected.v1 answering resumeID.
func (h *Handler) publishRejection(ctx context.Context, resumeID string, res contracts.TicketResolution) error {
	zerolog.Ctx(ctx).Info().Str("code", res.Code).Str("reason", res.Message).Msg("resume rejected")
	o, err := h.rejected(resumeID, res)
	if err != nil {
		return err
	}
	_, err = h.env.Pub.Publish(ctx, o.Subject, o.Event)
	return err
}

// reject returns the effects of refusing cmd with err's resume error code: the refusal
// published, nothing else changed.
func (h *Handler) reject(ctx context.Context, resumeID string, cmd contracts.ResumeCommand, err error) pipeline.Effects {
	return logged(ctx, pipeline.Effects{Steps: []pipeline.Effect{h.rejection(resumeID, cmd, err)}})
}

// rejection is the step that publishes the refusal of cmd with err's resume error code.
func (h *Handler) rejection(resumeID string, cmd contracts.ResumeCommand, err error) pipeline.Effect {
	code := contracts.ResumeNotWaiting
	var re *contracts.ResumeError
	if errors.As(err, &re) {
		code = re.Code
	}
	res := contracts.TicketResolution{CorrelationID: cmd.CorrelationID, Code: string(code), Message: err.Error(), RunID: cmd.RunID}
	return pipeline.Do(func(ctx context.Context) error { return h.publishRejection(ctx, resumeID, res) })
}

// Resume decides what cmd does, and returns its effects. In order:
//  1. read the ticket; locate the call it (or, when it is gone, the correlation id) names;
//  2. a call already resolved by this very command (ResolvedBy = resumeID) is a redelivery:
//     re-publish its outputs; a call whose ticket expired is refused expired (and the
//     expiry's outputs re-published, in case a crash cut them short);
//  3. no ticket → not_waiting; [contracts.ValidateResume] (an expired ticket also expires
//     the call, as its deadline timer would; a stale arguments digest is digest_mismatch,
//     a second approval by one actor duplicate_approver) and
//     [contracts.CallRecord.CheckAwaits] (mismatch → not_waiting), an allow of a call a
//     waiting rate limit deferred, before its window ([limitDeferral]: deferred_by_limit) — any refusal is
//     published and leaves the ticket intact; an approval this command already counted
//     on a ticket that needs several is answered approval_recorded again; on a ticket
//     that needs several approvals ([Handler.countApproval]), an approval below the last
//     is recorded on the ticket (CAS) and answered, and nothing else happens;
//  4. an approval with edited arguments: the edit must be a JSON object valid against the
//     tool's schema (else invalid_arguments, the ticket intact), and is gated again by
//     the host and run policies;
//  5. apply by compare-and-swap on the call with ResolvedBy = resumeID, its actor (and
//     whether it is claimed) and edit: allow → Executing{1} (not entered; the executor
//     runs the edited arguments), an edit the policy blocks → Completed "blocked: {policy
//     reason}", deny → Completed "blocked: {reason or denied}", tool result → Completed
//     with the client's output; then delete the ticket and publish.
//
// A resolution that loses its compare-and-swap ([ErrRaced]) is decided again by the
// runtime, which then finds either its own ResolvedBy or another resolution's, which is
// not_waiting: exactly one of concurrent commands wins.
func (h *Handler) Resume(ctx context.Context, resumeID string, cmd contracts.ResumeCommand, claimed bool) (pipeline.Effects, error) {
	tp, ticketRev, err := h.OpenTicket(ctx, cmd.CorrelationID)
	if err != nil {
		return pipeline.Effects{}, err
	}
	p, err := ParseCorrelation(cmd.CorrelationID)
	if err != nil {
		// Not a correlation id the gate ever issued.
		return h.reject(ctx, resumeID, cmd, h.refusal(tp, cmd, err.Error())), nil
	}
	b, i, ok, err := h.Locate(ctx, p)
	if err != nil {
		return pipeline.Effects{}, err
	}
	if !ok {
		return h.reject(ctx, resumeID, cmd, h.refusal(tp, cmd, "no such call")), nil
	}
	ctx = withCall(ctx, b, i)
	rec, rev, err := h.dispatch.LoadCall(ctx, b, i)
	if err != nil {
		return pipeline.Effects{}, err
	}
	if rec.ResolvedBy == resumeID {
		return logged(ctx, h.dispatch.RedeliveredResolution(b, i, &rec, resumeResolution(cmd, &rec))), nil
	}
	if tp != nil {
		if _, ok := tp.ApprovalOf(resumeID); ok {
			// This very command's approval is on the ticket already (a redelivery after
			// the ticket's write): answer it again, count nothing.
			return logged(ctx, pipeline.Effects{Steps: []pipeline.Effect{h.approvalRecorded(b, i, tp.Required(), tp.Approvals, resumeID)}}), nil
		}
	} else if slices.ContainsFunc(rec.Approvals, func(a contracts.TicketApproval) bool { return a.ResumeID == resumeID }) {
		// Counted, and the ticket resolved since by a later approval or a denial.
		required := len(rec.Approvals)
		if rec.Decision != nil {
			required = max(rec.Decision.Approvals, 1)
		}
		return logged(ctx, pipeline.Effects{Steps: []pipeline.Effect{h.approvalRecorded(b, i, required, rec.Approvals, resumeID)}}), nil
	}
	if expiredBy := TimerResolver(cmd.CorrelationID, TimerDeadline); tp == nil && rec.ResolvedBy == expiredBy {
		// The approval deadline passed (by its timer or a late resume): say so rather than
		// not_waiting, after making sure the expiry itself is published — a crash between
		// its commit and its publishes is repaired here as well as by the timer.
		tm := contracts.TicketTimer{CorrelationID: cmd.CorrelationID, Kind: TimerDeadline}
		return logged(ctx, h.dispatch.RedeliveredResolution(b, i, &rec, timerResolution(tm)).Then(
			h.rejection(resumeID, cmd, &contracts.ResumeError{Code: contracts.ResumeExpired,
				Message: fmt.Sprintf("the approval deadline of %q has passed", cmd.CorrelationID)}))), nil
	}
	if err := contracts.ValidateResume(tp, cmd, h.env.Now()); err != nil {
		var expiry pipeline.Effects
		if errors.Is(err, contracts.ErrExpired) {
			var xerr error
			if expiry, xerr = h.expire(ctx, b, i, tp, ticketRev); xerr != nil {
				return pipeline.Effects{}, xerr
			}
		}
		return logged(ctx, expiry.Then(h.rejection(resumeID, cmd, err))), nil
	}
	if err := rec.CheckAwaits(b.Submission.Calls[i], *tp); err != nil {
		return h.reject(ctx, resumeID, cmd, &contracts.ResumeError{Code: contracts.ResumeNotWaiting, Message: err.Error()}), nil
	}
	if err := limitDeferral(&rec, cmd, h.env.Now()); err != nil {
		return h.reject(ctx, resumeID, cmd, err), nil
	}

	call := b.Submission.Calls[i]
	approvals, answer, answered := h.countApproval(ctx, b, i, tp, ticketRev, cmd, resumeID, claimed)
	if answered {
		return answer, nil
	}
	if p := cmd.Result.Permission; p != nil && p.Decision == contracts.DecisionAllow && p.ArgumentsDigest == "" {
		zerolog.Ctx(ctx).Warn().Msg("approval names no arguments_digest: accepted unbound (compatibility for this release; the next refuses it)")
	}
	pause, err := h.env.ToolPaused(ctx, call.ToolID)
	if err != nil {
		return pipeline.Effects{}, fmt.Errorf("gate: %w", err)
	}
	resolver, err := h.resolver(ctx, b, i, cmd, resumeID, claimed)
	if err != nil {
		var re *contracts.ResumeError
		if errors.As(err, &re) {
			return h.reject(ctx, resumeID, cmd, err), nil
		}
		return pipeline.Effects{}, err
	}
	resolver.Approvals = approvals
	now := h.env.Now()
	err = rec.Resolve(resolver, now)
	switch r := cmd.Result; {
	case err != nil:
	case rec.EditBlocked != "":
		err = rec.Complete(contracts.ErrorOutput(call.CallID, contracts.BlockedPrefix+rec.EditBlocked), now)
	case r.Permission != nil && r.Permission.Decision == contracts.DecisionAllow:
		err = h.dispatch.EnterUnlessPaused(b, i, &rec, pause)
	case r.Permission != nil:
		err = rec.Complete(contracts.ErrorOutput(call.CallID, contracts.BlockedPrefix+deniedReason(r.Permission)), now)
	default:
		err = rec.Complete(r.ToolResult.Normalize(), now)
	}
	if err != nil {
		return pipeline.Effects{}, bus.Permanent(fmt.Errorf("gate: resume call %s: %w", call.CallID, err))
	}
	return logged(ctx, h.dispatch.CommitResolution(b, i, &rec, rev, ticketRev, resumeResolution(cmd, &rec))), nil
}

// limitDeferral refuses an allow of a call that a host rate limit with over: wait deferred
// to a later window (its schedule decision carries Until) while that window has not
// started: the call's share is held in that window, and running it now would run it in
// the one that was full. Only the due timer hands it over; a denial passes (it keeps the
// call from running, which no limit forbids).
func limitDeferral(rec *contracts.CallRecord, cmd contracts.ResumeCommand, now time.Time) error {
	d, p := rec.Decision, cmd.Result.Permission
	if d == nil || d.Kind != contracts.GateSchedule || d.Until == nil || p == nil || p.Decision != contracts.DecisionAllow || !now.Before(*d.Until) {
		return nil
	}
	return &contracts.ResumeError{Code: contracts.ResumeDeferredByLimit,
		Message: fmt.Sprintf("limit %s deferred the call to the window at %s: it runs then, and no approval runs it earlier (deny to drop it)",
			d.Limit, d.Until.UTC().Format(time.RFC3339))}
}

// countApproval applies the several-approvers rule to a valid command answering ticket
// t (at revision ticketRev). A ticket that needs one approval, and any command but an
// allow, pass through with the approvals recorded so far (a denial vetoes: it resolves
// the ticket, whatever was approved). An allow of a ticket that needs N > 1:
//   - is refused when no door authenticated its actor (approver_not_authenticated: a
//     claim cannot be a distinct person) or when it edits the arguments
//     (edit_needs_single_approval: all N approve the same arguments); ValidateResume
//     has refused a second approval by the same actor (duplicate_approver);
//   - below the Nth, is answered (answered is true) by the effects that record it on the
//     ticket by compare-and-swap at ticketRev (a lost swap is [ErrRaced]: the command is
//     decided again and counts against the new list, so two concurrent approvals count
//     once each) and answer approval_recorded;
//   - as the Nth, passes through with every approval, this one last: the caller resolves
//     the call once, by compare-and-swap on the call record.
func (h *Handler) countApproval(ctx context.Context, b *contracts.BatchRecord, i int, t *contracts.ResumeTicket, ticketRev uint64,
	cmd contracts.ResumeCommand, resumeID string, claimed bool) (approvals []contracts.TicketApproval, answer pipeline.Effects, answered bool) {
	p := cmd.Result.Permission
	if p == nil || p.Decision != contracts.DecisionAllow || t.Required() <= 1 {
		return t.Approvals, pipeline.Effects{}, false
	}
	if claimed {
		return nil, h.reject(ctx, resumeID, cmd, &contracts.ResumeError{Code: contracts.ResumeApproverNotAuthenticated,
			Message: fmt.Sprintf("the ticket needs %d distinct approvers, and no door authenticated %q (a command on the public resume subject); approve through the api",
				t.Required(), contracts.ActorText(cmd.Actor, true))}), true
	}
	if p.EditedArguments(b.Submission.Calls[i].Arguments) != nil {
		return nil, h.reject(ctx, resumeID, cmd, &contracts.ResumeError{Code: contracts.ResumeEditNeedsSingleApproval,
			Message: fmt.Sprintf("the ticket needs %d approvers, who all approve the proposed arguments; approve them as proposed, or deny", t.Required())}), true
	}
	a := contracts.TicketApproval{Actor: cmd.Actor, ResumeID: resumeID, At: h.env.Now().UTC()}
	approvals = append(slices.Clone(t.Approvals), a)
	if len(approvals) >= t.Required() {
		return approvals, pipeline.Effects{}, false
	}
	next := *t
	next.Approvals = approvals
	return nil, logged(ctx, pipeline.Effects{Steps: []pipeline.Effect{
		// A step without a fault point: the ticket's write hands nothing on, and the
		// answer after it is published again by a redelivery that finds the approval.
		pipeline.Do(func(ctx context.Context) error {
			if _, err := h.env.Tickets.UpdateAt(ctx, t.CorrelationID, next, ticketRev); err != nil {
				if errors.Is(err, state.ErrConflict) || errors.Is(err, state.ErrNotFound) {
					return ErrRaced
				}
				return fmt.Errorf("gate: record approval on ticket %s: %w", t.CorrelationID, err)
			}
			zerolog.Ctx(ctx).Info().Int("approvals", len(approvals)).Int("approvals_required", t.Required()).Msg("approval recorded")
			return nil
		}),
		h.approvalRecorded(b, i, t.Required(), approvals, resumeID),
	}}), true
}

// approvalRecorded is the step that answers resume command resumeID, whose approval is
// one of approvals on a ticket that needs required: io.awaken.ticket.resolved.v1 with code
// approval_recorded, its place in the count and the count needed (the ticket stays open
// until the last). Its id is the command's, so a redelivery re-publishes the same answer.
func (h *Handler) approvalRecorded(b *contracts.BatchRecord, i int, required int, approvals []contracts.TicketApproval, resumeID string) pipeline.Effect {
	return pipeline.Do(func(ctx context.Context) error {
		n := slices.IndexFunc(approvals, func(a contracts.TicketApproval) bool { return a.ResumeID == resumeID })
		if n < 0 {
			return fmt.Errorf("gate: approval %s is not on its ticket", resumeID)
		}
		sub := &b.Submission
		call := sub.Calls[i]
		ev, err := h.env.Event(contracts.ServiceGate, approvalRecordedID(resumeID), contracts.TypeTicketResolved,
			contracts.TicketResolution{
				CorrelationID: contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID),
				Code:          ResolvedApprovalRecorded,
				Message:       fmt.Sprintf("approval %d of %d recorded; the ticket stays open until the last", n+1, required),
				RunID:         sub.RunID, CallID: call.CallID, ResumeID: resumeID, Actor: approvals[n].Actor,
				Approvals: n + 1, ApprovalsRequired: required,
			})
		if err != nil {
			return fmt.Errorf("gate: build %s: %w", contracts.TypeTicketResolved, err)
		}
		_, err = h.env.Pub.Publish(ctx, h.env.Names.TicketResolvedSubject(), ev)
		return err
	})
}

// approvalRecordedID is the Nats-Msg-Id of the approval_recorded answer to resume command
// resumeID.
func approvalRecordedID(resumeID string) string { return resumeID + ":approval" }

// refusal is the error a command that names no call is refused with: what
// [contracts.ValidateResume] says of it (structure first), else not_waiting with detail.
func (h *Handler) refusal(tp *contracts.ResumeTicket, cmd contracts.ResumeCommand, detail string) error {
	if err := contracts.ValidateResume(tp, cmd, h.env.Now()); err != nil {
		return err
	}
	return &contracts.ResumeError{Code: contracts.ResumeNotWaiting, Message: fmt.Sprintf("correlation %q names no awaiting call: %s", cmd.CorrelationID, detail)}
}

// resumeResolution is what a valid resume command publishes, read from the call record it
// committed (rec, marked ResolvedBy the command) so that a redelivery publishes the same:
// approved (audit approved), denied (audit denied, reason defaulting to "denied"), an
// approval whose edited arguments the policy blocked (audit deny with the policy's
// reason), or, for a client's tool result, completed (no audit). The audit of an edit
// carries the approved and the proposed arguments.
func resumeResolution(cmd contracts.ResumeCommand, rec *contracts.CallRecord) Resolution {
	res := Resolution{Corr: cmd.CorrelationID, ResumeID: rec.ResolvedBy, Actor: rec.ResolvedActor,
		ActorClaimed: rec.ResolvedActorClaimed, Edited: rec.EditedArguments}
	if p := cmd.Result.Permission; p != nil && p.Decision == contracts.DecisionAllow && p.ArgumentsDigest == "" {
		res.Unbound = true
	}
	switch p := cmd.Result.Permission; {
	case p != nil && rec.EditBlocked != "":
		res.Code, res.Audit, res.Message, res.AuditReason = ResolvedDenied, contracts.AuditDecisionDeny, "denied: "+rec.EditBlocked, rec.EditBlocked
	case p != nil && p.Decision == contracts.DecisionAllow && pauseBlocked(rec) != "":
		// Approved while the tool was paused: the call was blocked, so the answer and the
		// audit say so (a deny with the pause's reason), not "approved".
		reason := pauseBlocked(rec)
		res.Code, res.Audit, res.Message, res.AuditReason = ResolvedDenied, contracts.AuditDecisionDeny, contracts.BlockedPrefix+reason, reason
	case p != nil && p.Decision == contracts.DecisionAllow:
		res.Code, res.Audit, res.Message, res.AuditReason = ResolvedApproved, contracts.AuditDecisionApproved, "approved", p.Note
		if res.Edited != nil {
			res.Message = "approved with edited arguments"
		}
	case p != nil:
		reason := deniedReason(p)
		res.Code, res.Audit, res.Message, res.AuditReason = ResolvedDenied, contracts.AuditDecisionDenied, "denied: "+reason, reason
	default:
		res.Code, res.Message = ResolvedCompleted, "tool result accepted"
	}
	return res
}

// pauseBlocked is the block reason ("tool_paused: …") of a call an approval completed
// blocked because its tool was paused ([Dispatch.EnterUnlessPaused]), "" for any other.
func pauseBlocked(rec *contracts.CallRecord) string {
	out, ok := rec.Output()
	if !ok || rec.Phase.Kind != contracts.PhaseCompleted {
		return ""
	}
	reason, ok := strings.CutPrefix(out.Text(), contracts.BlockedPrefix)
	if !ok || !strings.HasPrefix(reason, contracts.ToolPausedCode+": ") {
		return ""
	}
	return reason
}

// deniedReason is the reason of a deny decision, "denied" when it gives none.
func deniedReason(p *contracts.PermissionDecision) string {
	if p.Reason == "" {
		return deniedByDefault
	}
	return p.Reason
}
