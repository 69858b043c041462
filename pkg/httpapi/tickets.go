package httpapi

import (
	"encoding/json"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TicketList is the reply of tickets.list and GET /v1/tickets.
type TicketList struct {
	Tickets []contracts.ResumeTicket `json:"tickets"`
}

// ShortDecision is the short form of a resolve request: the api reads the ticket and
// builds the full resume command from it.
type ShortDecision struct {
	CorrelationID string `json:"correlation_id"`
	// Decision is allow (or its synonym approve, the word of the HTTP route and the CLI)
	// or deny: a [DecisionWord].
	Decision contracts.PermissionDecisionKind `json:"decision"`
	Note     string                           `json:"note,omitempty"`
	Reason   string                           `json:"reason,omitempty"`
	// Arguments, on an allow, edit the call's arguments.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsDigest, on an allow, names the ticket arguments the approval approves
	// (absent: those of the ticket the api reads).
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
}

// DecisionWord is a word a [ShortDecision] takes as its decision: the decisions allow and
// deny, and approve, a synonym of allow (the word of POST /v1/tickets/{id}/approve and
// `awaken tickets approve`).
type DecisionWord string

const (
	DecisionWordAllow   DecisionWord = "allow"
	DecisionWordApprove DecisionWord = "approve"
	DecisionWordDeny    DecisionWord = "deny"
)

// ApproveRequest is the body of POST /v1/tickets/{correlation_id}/approve. Arguments, when
// set, edit the call's arguments (a JSON object valid against the tool's schema, gated
// again by the policies); an invalid edit is refused 422 invalid_arguments and the ticket
// stays open. ArgumentsDigest names the ticket's arguments_digest the caller approves (the
// console sends the one it shows); another is refused 409 digest_mismatch, and an absent
// one is taken from the ticket the api reads.
type ApproveRequest struct {
	Note            string          `json:"note,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	ArgumentsDigest string          `json:"arguments_digest,omitempty"`
}

// DenyRequest is the body of POST /v1/tickets/{correlation_id}/deny.
type DenyRequest struct {
	Reason string `json:"reason,omitempty"`
}

// CancelRequest is the body of runs.cancel and POST /v1/runs/{run_id}/cancel.
type CancelRequest struct {
	RunID  string `json:"run_id,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CancelResult is the reply of a run cancellation: the run has ended.
type CancelResult struct {
	RunID string `json:"run_id"`
	// Status is always "ended": the end is recorded, so no later batch of the run is
	// accepted.
	Status string `json:"status"`
	// Reason is the reason this cancellation gave (the request's, or "cancelled by
	// operator").
	Reason string `json:"reason"`
	// End is how the run ended: cancelled, or the end it had before this cancellation
	// (state_conflict, capability_bound), which it keeps.
	End string `json:"end"`
	// Keys are the conflicting state keys of a state_conflict end.
	Keys    []string  `json:"keys,omitempty"`
	EndedAt time.Time `json:"ended_at"`
}

// StatusEnded is the status of every [CancelResult].
const StatusEnded = "ended"
