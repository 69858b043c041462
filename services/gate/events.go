package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/gate/tickets"
)

// cancelledReason is the Indeterminate reason of a call its run's cancellation ended.
const cancelledReason = "cancelled"

// builder makes the outgoing events of one batch, each with the deterministic id of its
// operation and stage (internal/pipeline/ids.go), so that every re-publish is deduplicated.
type builder struct {
	s *Service
	b *contracts.BatchRecord
}

func (s *Service) builder(b *contracts.BatchRecord) builder { return builder{s: s, b: b} }

func (bd builder) op(callID string) string {
	return contracts.OperationID(bd.b.Submission.RunID, bd.b.Submission.Step, callID)
}

func (bd builder) out(subject, id, typ string, payload any) (bus.Outgoing, error) {
	ev, err := bd.s.env.Event(ServiceName, id, typ, payload)
	if err != nil {
		return bus.Outgoing{}, fmt.Errorf("gate: build %s: %w", typ, err)
	}
	return bus.Outgoing{Subject: subject, Event: ev}, nil
}

// audit is the PermissionDecided record of the gate's decision o on call i, made at at:
// its label, reason and shadow findings, all read from the call record, so a redelivery
// audits the same record.
func (bd builder) audit(i int, o *contracts.GateOutcome, at time.Time) (bus.Outgoing, error) {
	return bd.auditRecord(i, contracts.AuditRecord{Decision: o.AuditLabel(), Reason: o.Reason, Shadow: o.Shadow, Limit: o.Limit, At: at})
}

// resolutionAudit is the PermissionDecided record of the resolution res of call i's
// ticket, read from the committed record rec: its actor (and whether it is claimed), the
// digest of the arguments approved and of the policies that asked, the approvals a ticket
// that needed several had, and, when an approval edited the arguments, both arguments
// with the proposed ones' digest beside the approved ones'.
func (bd builder) resolutionAudit(i int, rec *contracts.CallRecord, res tickets.Resolution, at time.Time) (bus.Outgoing, error) {
	proposed := bd.b.Submission.Calls[i].Arguments
	a := contracts.AuditRecord{Decision: res.Audit, Reason: res.AuditReason, Actor: res.Actor, ActorClaimed: res.ActorClaimed, At: at,
		ArgumentsDigest: contracts.ArgumentsDigest(rec.Arguments(proposed)), Unbound: res.Unbound, Approvals: rec.Approvals}
	if rec.Decision != nil {
		a.PolicyDigest = rec.Decision.PolicyDigest
	}
	if res.Edited != nil {
		a.Arguments, a.ProposedArguments = res.Edited, proposed
		a.ProposedArgumentsDigest = contracts.ArgumentsDigest(proposed)
	}
	return bd.auditRecord(i, a)
}

// auditRecord completes a (decision, reason, actor, arguments, time) with call i's ids.
func (bd builder) auditRecord(i int, a contracts.AuditRecord) (bus.Outgoing, error) {
	sub := &bd.b.Submission
	c := sub.Calls[i]
	a.RunID, a.BatchID, a.ToolID, a.CallID = sub.RunID, sub.BatchID(), c.ToolID, c.CallID
	return bd.out(bd.s.env.Names.AuditSubject(sub.RunID), pipeline.AuditID(bd.op(c.CallID), a.Decision), contracts.TypeAudit, a)
}

// fact is one projection fact of call i on subject: the run's events subject for a
// stored fact, its facts subject for a live one.
func (bd builder) fact(subject string, i int, f contracts.AgentFact) (bus.Outgoing, error) {
	sub := &bd.b.Submission
	return bd.out(subject, pipeline.AgentEventID(bd.op(sub.Calls[i].CallID), f.Type),
		contracts.TypeAgentEvent, contracts.AgentEvent{Tier: "fact", BatchID: sub.BatchID(), Event: f})
}

// toolCallFact is the live tool_call fact of call i with its disposition, on the run's
// facts subject: a projection of the decision the call record holds (and its audit
// record), so it is sent, never stored.
func (bd builder) toolCallFact(i int, d contracts.ToolDisposition) (bus.Outgoing, error) {
	c := bd.b.Submission.Calls[i]
	return bd.fact(bd.s.env.Names.FactsSubject(bd.b.Submission.RunID), i, contracts.AgentFact{
		Type: contracts.EventToolCall, ID: c.CallID, Name: c.ToolID, Input: c.Arguments, Disposition: d,
	})
}

// editedToolCallFact is the live tool_call fact an approval with edited arguments sends:
// input is what runs (edited), proposed_input what the model proposed (both are in the
// approval's audit record). It has an id of its own, so a reader that deduplicates by id
// does not collapse it into the tool_call fact of the gate's decision.
func (bd builder) editedToolCallFact(i int, edited json.RawMessage) (bus.Outgoing, error) {
	sub := &bd.b.Submission
	c := sub.Calls[i]
	return bd.out(bd.s.env.Names.FactsSubject(sub.RunID), pipeline.EditedToolCallID(bd.op(c.CallID)),
		contracts.TypeAgentEvent, contracts.AgentEvent{Tier: "fact", BatchID: sub.BatchID(), Event: contracts.AgentFact{
			Type: contracts.EventToolCall, ID: c.CallID, Name: c.ToolID, Input: edited, ProposedInput: c.Arguments,
			Disposition: contracts.DispositionExecuted,
		}})
}

// awaitingFact is the awaiting fact of parked call i, stored on the run's events subject:
// a parked call waits on someone, maybe for days, and a reader that comes later must
// find it (off the path of a call that does not park).
func (bd builder) awaitingFact(i int) (bus.Outgoing, error) {
	sub := &bd.b.Submission
	return bd.fact(bd.s.env.Names.EventsSubject(sub.RunID), i,
		contracts.AgentFact{Type: contracts.EventAwaiting, PendingToolUseID: sub.Calls[i].CallID})
}

// opened is io.awaken.ticket.opened.v1 for t.
func (bd builder) opened(t *contracts.ResumeTicket) (bus.Outgoing, error) {
	return bd.out(bd.s.env.Names.TicketOpenedSubject(), pipeline.TicketOpenedID(t.CorrelationID), contracts.TypeTicketOpened, t)
}

// resolved is io.awaken.ticket.resolved.v1 for resolution res of the ticket of call i.
func (bd builder) resolved(i int, res tickets.Resolution) (bus.Outgoing, error) {
	sub := &bd.b.Submission
	return bd.out(bd.s.env.Names.TicketResolvedSubject(), pipeline.TicketResolvedID(res.Corr), contracts.TypeTicketResolved,
		contracts.TicketResolution{
			CorrelationID: res.Corr, Code: res.Code, Message: res.Message,
			RunID: sub.RunID, CallID: sub.Calls[i].CallID, ResumeID: res.ResumeID, Actor: res.Actor,
			ActorClaimed: res.ActorClaimed, Approvals: res.Approvals, ApprovalsRequired: res.Required,
		})
}

// collect builds outgoing events, stopping at the first error: the stored ones (out), and
// the live facts sent once those are stored (live).
type collect struct {
	out  []bus.Outgoing
	live []bus.Outgoing
	err  error
}

func (c *collect) add(o bus.Outgoing, err error) {
	if c.err != nil {
		return
	}
	if err != nil {
		c.err = err
		return
	}
	c.out = append(c.out, o)
}

// addLive adds a live fact ([contracts.Names.FactsSubject]), sent after everything stored.
func (c *collect) addLive(o bus.Outgoing, err error) {
	if c.err != nil {
		return
	}
	if err != nil {
		c.err = err
		return
	}
	c.live = append(c.live, o)
}

// publish stores what was collected concurrently (one round trip), then sends the live
// facts — a fact follows what it projects — or, if building any of it failed, returns
// that first error and publishes nothing. A live fact that cannot be sent is logged, not
// retried: it is a notice of what is stored, which its readers read from the stores.
func (c *collect) publish(ctx context.Context, pub *bus.Publisher) error {
	if c.err != nil {
		return c.err
	}
	if err := pub.PublishAll(ctx, c.out); err != nil {
		return err
	}
	if err := pub.PublishLive(ctx, c.live); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("gate: a live fact was not sent")
	}
	return nil
}
