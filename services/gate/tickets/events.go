package tickets

import (
	"fmt"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// AuditScheduled is the audit decision of a scheduled action that ran at its due time
// without a human.
const AuditScheduled = contracts.AuditDecisionScheduled

// Resolution codes of io.awaken.ticket.resolved.v1.
const (
	ResolvedApproved  = "approved"
	ResolvedDenied    = "denied"
	ResolvedCompleted = "completed"
	ResolvedExpired   = "expired"
	// ResolvedApprovalRecorded answers an approval of a ticket that needs more: it was
	// counted, and the ticket stays open.
	ResolvedApprovalRecorded = contracts.ResolvedApprovalRecorded
)

// Fixed texts the gate puts into outputs and resolutions.
const (
	ApprovalTimedOut = "approval timed out"
	deniedByDefault  = "denied"
)

// timer is the scheduled trigger of kind ("due" or "deadline") for ticket corr.
func (h *Handler) timer(corr, kind string) (cloudevent.Event, error) {
	ev, err := h.env.Event(contracts.ServiceGate, pipeline.TicketTimerID(corr, kind), contracts.TypeTicketExpire,
		contracts.TicketTimer{CorrelationID: corr, Kind: kind})
	if err != nil {
		return cloudevent.Event{}, fmt.Errorf("gate: build timer: %w", err)
	}
	return ev, nil
}

// rejected is io.awaken.ticket.rejected.v1 answering the resume command with ce-id
// resumeID. It is built without a batch: a rejected resume may name none.
func (h *Handler) rejected(resumeID string, res contracts.TicketResolution) (bus.Outgoing, error) {
	res.ResumeID = resumeID
	ev, err := h.env.Event(contracts.ServiceGate, pipeline.TicketRejectedID(resumeID), contracts.TypeTicketRejected, res)
	if err != nil {
		return bus.Outgoing{}, fmt.Errorf("gate: build rejection: %w", err)
	}
	return bus.Outgoing{Subject: h.env.Names.TicketRejectedSubject(), Event: ev}, nil
}
