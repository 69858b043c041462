package tickets

import (
	"encoding/json"

	"github.com/awaken-dev/awaken/internal/pipeline"
)

// Resolution is what resolving a ticket publishes besides the call's work message: the
// ticket.resolved event and, for permission and schedule tickets, an audit record.
type Resolution struct {
	Corr    string
	Code    string // approved, denied, completed or expired
	Message string
	// audit is the audit decision (approved, denied, expired, scheduled), or "" for none
	// (a client's tool result is no permission decision).
	Audit       string
	AuditReason string
	// resumeID is the ce-id of the resume command that resolved the ticket ("" for a timer).
	ResumeID string
	// actor is who resolved it; actorClaimed says no door authenticated it.
	Actor        string
	ActorClaimed bool
	// edited are the arguments an approval edited the call to (nil: none).
	Edited json.RawMessage
	// unbound says the approval named no arguments digest (accepted for compatibility).
	Unbound bool
	// approvals and required, for a ticket that needed several approvals: how many it had
	// when it was resolved, and how many it needed (0: one).
	Approvals, Required int
}

// TimerResolver returns the ResolvedBy mark of a resolution by a timer of kind for ticket corr.
// Resume commands mark the call with their ce-id; timers with this id, which cannot be
// mistaken for a command's because it names the timer.
func TimerResolver(corr, kind string) string { return "timer:" + pipeline.TicketTimerID(corr, kind) }
