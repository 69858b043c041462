package gate

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// resolutionEffects are the effects of a resolution that has passed every check: write rec
// (already moved by the caller and marked ResolvedBy) at rev and delete the ticket —
// a write that hands the call to the barrier when the resolution completed it (a denial,
// an expiry, a pause), and to no one when it moved the call into execution (the hand-over
// to the executor is a write of its own, after the audit: [Service.realizeResolution]) —
// then publish the resolution's outputs. A lost compare-and-swap returns [errRaced] and
// changes nothing, so the runtime runs the handler again, which re-reads and re-validates
// from the committed state ([pipeline.ErrRaced]): of two concurrent resolutions exactly one
// commits.
func (s *Service) resolutionEffects(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, rev uint64, ticketRev uint64, res tickets.Resolution) pipeline.Effects {
	return pipeline.Effects{Op: callOp(b, i), Steps: []pipeline.Effect{
		pipeline.Commit(func(ctx context.Context) (bool, error) {
			if _, err := s.putCall(ctx, b, i, *rec, rev); err != nil {
				return false, err
			}
			if res.Audit != "" {
				// Counted once: only the delivery whose write committed the resolution gets here.
				s.env.Telemetry.GateDecision(res.Audit)
			}
			return true, s.tickets.DeleteTicket(ctx, res.Corr, ticketRev)
		}, callHandOffs(rec)...),
		pipeline.Publish(func(ctx context.Context) error { return s.realizeResolution(ctx, b, i, rec, res) }),
	}}
}

// redeliveredResolutionEffects are the effects of a resolution this very input already
// committed: the ticket is deleted if a crash left it, and the outputs are re-published
// under their deterministic ids.
func (s *Service) redeliveredResolutionEffects(b *contracts.BatchRecord, i int, rec *contracts.CallRecord, res tickets.Resolution) pipeline.Effects {
	return pipeline.Effects{Op: callOp(b, i), Steps: []pipeline.Effect{
		pipeline.Publish(func(ctx context.Context) error {
			if err := s.tickets.DeleteTicket(ctx, res.Corr, 0); err != nil {
				return err
			}
			return s.realizeResolution(ctx, b, i, rec, res)
		}),
	}}
}

// realizeResolution publishes ticket.resolved and the audit record (and, for an approval
// that edited the arguments, then sends the live tool_call fact of what runs) first, then
// the work the
// committed record implies: an approved call (Executing{1}, not entered) is handed to its
// executor by one more write ([Service.admit]: once it holds its concurrency slots, if any
// limit applies) — that revision is the executor request —
// only once the audit record and ticket.resolved are stored, so an approval is on the
// audit stream before its body can start; a completed call was handed on by the revision
// that resolved it (its output).
func (s *Service) realizeResolution(ctx context.Context, b *contracts.BatchRecord, i int, rec *contracts.CallRecord, res tickets.Resolution) error {
	ctx, end := s.env.Telemetry.Rejoin(ctx, rec.TraceParent, "gate.resolve")
	defer end()
	s.recordWait(ctx, b, i, rec, res)
	bd := s.builder(b)
	if d := rec.Decision; d != nil && d.Approvals > 1 {
		res.Approvals, res.Required = len(rec.Approvals), d.Approvals
	}
	var first collect
	first.add(bd.resolved(i, res))
	if res.Audit != "" {
		at, ok := rec.MarkTime(contracts.StageResumed)
		if !ok {
			at = s.env.Now()
		}
		first.add(bd.resolutionAudit(i, rec, res, at))
	}
	if res.Edited != nil {
		first.addLive(bd.editedToolCallFact(i, res.Edited))
	}
	if err := first.publish(ctx, s.env.Pub); err != nil {
		return err
	}
	// A completed call was handed on by the revision that resolved it (its output); an
	// approved one now, by the revision that carries its input (its executor request).
	if rec.ExecutingUnentered() {
		return s.admit(ctx, b, i, true)
	}
	return nil
}

// recordWait records the wait the resolution res ended — from the call parking on its
// ticket to the resolution — as a gate.approval_wait span on the batch's trace (the
// traceparent the decision recorded on the call): no process holds a span open while a
// human thinks, so it is recorded once the wait is over, with its real start and end. A
// redelivered resolution records it again.
func (s *Service) recordWait(ctx context.Context, b *contracts.BatchRecord, i int, rec *contracts.CallRecord, res tickets.Resolution) {
	parked, ok := rec.MarkTime(contracts.StageAwaiting)
	if !ok {
		return
	}
	resumed, ok := rec.MarkTime(contracts.StageResumed)
	if !ok || resumed.Before(parked) {
		resumed = s.env.Now()
	}
	attrs := append(telemetry.CallAttributes(&b.Submission, i),
		attribute.String("awaken.correlation_id", res.Corr),
		attribute.String("awaken.resolution", res.Code))
	if res.Actor != "" {
		attrs = append(attrs, attribute.String("awaken.actor", res.Actor), attribute.Bool("awaken.actor_claimed", res.ActorClaimed))
	}
	s.env.Telemetry.RecordSpan(ctx, rec.TraceParent, telemetry.SpanApprovalWait, parked, resumed, attrs...)
}
