package contracts

import (
	"encoding/json"
	"time"
)

// AgentSnapshot names the immutable agent snapshot a batch was produced under and the tool
// ids visible to the model in it.
type AgentSnapshot struct {
	SnapshotID string `json:"snapshot_id"`
	// Tools may be left out of a submission: the decoder reads it as [].
	Tools []string `json:"tools" jsonschema:"optional"`
	// ActionKinds are the kinds of scheduled action the run may perform (a schedule
	// rule's action_kind must be one of them).
	ActionKinds []string `json:"action_kinds,omitempty"`
}

// BatchSubmission is the payload of io.awaken.toolbatch.requested.v1.
type BatchSubmission struct {
	RunID     string                  `json:"run_id"`
	ThreadID  string                  `json:"thread_id"`
	Step      int64                   `json:"step"`
	Agent     AgentSnapshot           `json:"agent"`
	Narrowing ToolCapabilityNarrowing `json:"narrowing,omitempty"`
	Policy    *PolicyConfig           `json:"policy,omitempty"`
	Assistant []ContentBlock          `json:"assistant,omitempty"`
	Calls     []ToolCall              `json:"calls"`
	// Metadata are the submitting door's labels of the batch (at most
	// [MaxMetadataEntries] keys matching [a-z0-9_.-]{1,64}, values of at most
	// [MaxMetadataValueBytes] bytes of UTF-8 without control characters). awaken keeps
	// them in the batch record and decides nothing by them; the MCP door sets
	// mcp.session_id, mcp.client_name, mcp.client_version, mcp.transport and actor.
	//
	// A host limit keyed label:NAME ([LimitConfig.Key]) accounts the batch's calls under
	// the value of metadata key NAME.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Tenant is the platform's tenant of the run (at most [MaxTenantBytes] bytes of UTF-8
	// without control characters), the value host limits keyed tenant account by.
	Tenant string `json:"tenant,omitempty"`
}

// BatchID is the derived id of the submission.
func (s *BatchSubmission) BatchID() string { return BatchID(s.RunID, s.Step) }

// BatchRejected is the payload of io.awaken.toolbatch.rejected.v1.
type BatchRejected struct {
	BatchID string `json:"batch_id,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
	EventID string `json:"event_id"`
}

// BatchUnchanged is the payload of io.awaken.toolbatch.unchanged.v1: the batcher settled
// the submission EventID as a no-op, because the batch it names is already recorded with
// identical content (submitted before under another event id, or again after the
// submissions stream's duplicate window). Nothing new is published for it: its results
// are the ones its first submission produces. A submitter that waits for the results
// reads them from the results stream at once when Phase is finalized or published; an
// open batch's results are still to come on the results subject, as for a new batch.
type BatchUnchanged struct {
	BatchID string `json:"batch_id"`
	RunID   string `json:"run_id"`
	// EventID is the ce-id of the submission settled as a no-op: match on it.
	EventID string `json:"event_id"`
	// Phase is the recorded batch's: open (its calls are running; its results will be
	// published), finalized (every call is terminal; its results are published, or about
	// to be) or published (its results are on the results stream, while the stream keeps
	// them).
	Phase BatchPhase `json:"phase"`
	// ResultsSubject is where the batch's results are, or will be, published:
	// {prefix}.results.{run_id} of the results stream.
	ResultsSubject string `json:"results_subject"`
}

// Finished reports whether the batch's results are published, or about to be: the
// submitter reads them from the results stream instead of waiting for them to arrive.
func (u BatchUnchanged) Finished() bool { return u.Phase != BatchPhaseOpen }

// Outcome is the terminal kind of a call in its published result.
type Outcome string

const (
	OutcomeCompleted     Outcome = "completed"
	OutcomeIndeterminate Outcome = "indeterminate"
)

// ToolResultEvent is the payload of io.awaken.tool.result.v1, one per call, in model order.
type ToolResultEvent struct {
	BatchID string     `json:"batch_id"`
	RunID   string     `json:"run_id"`
	Index   int        `json:"index"`
	CallID  string     `json:"call_id"`
	ToolID  string     `json:"tool_id"`
	Outcome Outcome    `json:"outcome"`
	Output  ToolOutput `json:"output"`
}

// BatchResults is the payload of io.awaken.toolbatch.results.v1: a batch's whole
// publication as one message — every result in model order, then what the finalized event
// says. One stored message is atomic by construction, so this is how a batch is published
// whenever the message fits the server's max payload; a batch whose results do not fit is
// published as its io.awaken.tool.result.v1 events and its io.awaken.toolbatch.finalized.v1
// event in one atomic batch instead. A reader accepts both forms.
type BatchResults struct {
	BatchID   string            `json:"batch_id"`
	RunID     string            `json:"run_id"`
	Results   []ToolResultEvent `json:"results"`
	Finalized BatchFinalized    `json:"finalized"`
}

// BatchFinalized is the payload of io.awaken.toolbatch.finalized.v1, published last in the
// same atomic batch as the results, and the finalized part of io.awaken.toolbatch.results.v1.
type BatchFinalized struct {
	BatchID  string    `json:"batch_id"`
	RunID    string    `json:"run_id"`
	ThreadID string    `json:"thread_id"`
	Step     int64     `json:"step"`
	CallIDs  []string  `json:"call_ids"`
	State    []Command `json:"state"`
	// RunEnded is set when this batch ended its run (a state conflict: State is then
	// empty and the run takes no more batches).
	RunEnded *RunEnded `json:"run_ended,omitempty"`
}

// TicketReason says why a call is parked.
type TicketReason string

const (
	ReasonPermission      TicketReason = "permission"
	ReasonScheduledAction TicketReason = "scheduled_action"
	ReasonClientExecution TicketReason = "client_execution"
)

// ResumeTicket is the durable record of a parked call and the payload of
// io.awaken.ticket.opened.v1. Resume commands are validated against the committed ticket.
type ResumeTicket struct {
	CorrelationID string          `json:"correlation_id"`
	RunID         string          `json:"run_id"`
	ThreadID      string          `json:"thread_id"`
	SnapshotID    string          `json:"snapshot_id"`
	BatchID       string          `json:"batch_id"`
	CallID        string          `json:"call_id"`
	ToolID        string          `json:"tool_id"`
	Arguments     json.RawMessage `json:"arguments"`
	Reason        TicketReason    `json:"reason"`
	DueAt         *time.Time      `json:"due_at,omitempty"`
	Deadline      *time.Time      `json:"deadline,omitempty"`
	OpenedAt      time.Time       `json:"opened_at"`
	// ArgumentsDigest is the [ArgumentsDigest] of Arguments ("sha256:{hex}" of their
	// canonical JSON): an approval names it (PermissionDecision.ArgumentsDigest) to bind
	// itself to exactly these arguments.
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
	// PolicyDigest is the [PolicyDigest] of the host and run policies that asked.
	PolicyDigest string `json:"policy_digest,omitempty"`
	// ApprovalsRequired is how many distinct actors must approve (absent: one).
	ApprovalsRequired int `json:"approvals_required,omitempty"`
	// Approvals are the approvals recorded so far on a ticket that needs more than one,
	// oldest first; the ticket resolves when the last one needed lands.
	Approvals []TicketApproval `json:"approvals,omitempty"`
}

// TicketApproval is one approval recorded on a ticket that needs several.
type TicketApproval struct {
	// Actor is who approved (always authenticated: claimed approvals do not count).
	Actor string `json:"actor"`
	// ResumeID is the ce-id of the resume command that approved.
	ResumeID string    `json:"resume_id"`
	At       time.Time `json:"at"`
}

// PermissionDecisionKind is allow or deny.
type PermissionDecisionKind string

const (
	DecisionAllow PermissionDecisionKind = "allow"
	DecisionDeny  PermissionDecisionKind = "deny"
)

// PermissionDecision is a human's answer to a permission (or scheduled-action) ticket.
type PermissionDecision struct {
	Decision PermissionDecisionKind `json:"decision"`
	Note     string                 `json:"note,omitempty"`
	Reason   string                 `json:"reason,omitempty"`
	// Arguments, on an allow only, replace the call's proposed arguments: the approval of
	// an edited call. They must be a JSON object valid against the tool's parameters
	// schema (else the resume is refused invalid_arguments and the ticket stays open), and
	// they are gated again by the host and run policies (a block then denies the call).
	// Absent, or equal to the proposed arguments: the call runs as proposed.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ArgumentsDigest, on an allow, names the ticket's arguments_digest the approval
	// approves: another digest is refused digest_mismatch and the ticket stays open. An
	// allow without it is accepted in this release (recorded unbound in the audit) and
	// will be refused digest_required in the next. A deny is never refused for its digest.
	ArgumentsDigest string `json:"arguments_digest,omitempty"`
}

// ResumeResult is exactly one of a permission decision or a client-supplied tool result.
type ResumeResult struct {
	Permission *PermissionDecision `json:"permission,omitempty"`
	ToolResult *ToolOutput         `json:"tool_result,omitempty"`
}

// ResumeCommand is the payload of io.awaken.ticket.resume.v1.
type ResumeCommand struct {
	CorrelationID string       `json:"correlation_id"`
	RunID         string       `json:"run_id"`
	ThreadID      string       `json:"thread_id"`
	SnapshotID    string       `json:"snapshot_id"`
	Result        ResumeResult `json:"result"`
	// Actor names who decided (at most [MaxActorLength] bytes). The api sets it from the
	// caller's authentication (the api token's name, the NATS user of a micro request),
	// never from the caller's body, and publishes on [Names.TicketResumeAPISubject]. A
	// client publishing on [Names.TicketResumeSubject] sets it itself: the gate records
	// it as claimed, and refuses a reserved one ([ReservedActor], reserved_actor).
	Actor string `json:"actor,omitempty"`
}

// TicketResolution is the payload of io.awaken.ticket.resolved.v1 (Code approved, denied,
// completed or expired) and io.awaken.ticket.rejected.v1 (Code a [ResumeErrorCode]).
type TicketResolution struct {
	CorrelationID string `json:"correlation_id"`
	Code          string `json:"code"`
	Message       string `json:"message"`
	RunID         string `json:"run_id,omitempty"`
	CallID        string `json:"call_id,omitempty"`
	// ResumeID is the ce-id of the resume command this answers, so a client waiting on its
	// own command can tell its answer from another's.
	ResumeID string `json:"resume_id,omitempty"`
	// Actor is who resolved the ticket: the resume command's actor, or "timer" for a due
	// time or a deadline (resolved events only).
	Actor string `json:"actor,omitempty"`
	// ActorClaimed is set when no door authenticated Actor: the command came on the
	// public resume subject, and its publisher named the actor itself.
	ActorClaimed bool `json:"actor_claimed,omitempty"`
	// Approvals and ApprovalsRequired are set on a ticket that needs several approvals:
	// how many distinct actors have approved so far (code approval_recorded: the ticket
	// stays open) or in all (approved), and how many it needs.
	Approvals         int `json:"approvals,omitempty"`
	ApprovalsRequired int `json:"approvals_required,omitempty"`
}

// RunCancel asks to seal the open batches of a run.
type RunCancel struct {
	RunID  string `json:"run_id"`
	Reason string `json:"reason,omitempty"`
}

// CallCancel asks to cancel one call, named by its operation id ([OperationID]). A call
// not yet entered by its executor ends Completed with the model-visible error
// "cancelled before start: {reason}"; a call in its body has the body stopped and ends
// Indeterminate("cancelled_in_flight"), unless the tool returns an outcome within the
// grace (then that outcome, acknowledged); a terminal call keeps its outcome.
type CallCancel struct {
	OperationID string `json:"operation_id"`
	// Actor is who cancelled: the authenticated actor of the api's door, or the claim of
	// a platform that published the command itself.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CallCancelMark records on a call record that a [CallCancel] was applied to it: by whom,
// why and when, and which outcome it led to (CancelBeforeStart, CancelInFlight or
// CancelAcknowledged).
type CallCancelMark struct {
	Actor   string    `json:"actor,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Outcome string    `json:"outcome"`
	At      time.Time `json:"at"`
}

// The outcomes of a call cancellation, as [CallCancelMark.Outcome] and the api's answer.
const (
	// CancelBeforeStart: the call was not entered; it ends Completed with the error
	// output "cancelled before start: {reason}" and its body never ran.
	CancelBeforeStart = "cancelled_before_start"
	// CancelInFlight: the body was running; it was stopped and the call ends
	// Indeterminate with this reason (the body may have had effects).
	CancelInFlight = "cancelled_in_flight"
	// CancelAcknowledged: the body was running, saw the cancellation and returned an
	// outcome within the grace; the call ends Completed with that outcome.
	CancelAcknowledged = "cancel_acknowledged"
)

// CancelledBeforeStartPrefix starts the model-visible error text of a call cancelled
// before its body started.
const CancelledBeforeStartPrefix = "cancelled before start: "

// RunEndedEvent announces that a run ended: the end recorded on its run record (the first
// one, kept for good), so every later submission of the run is refused (run_cancelled for
// reason cancelled, run_ended otherwise). The gate publishes it, as
// io.awaken.run.ended.v1 on the run's events subject, each time it handles a cancellation
// of the run (an already ended run answers with its first end) and when a run ends
// capability_bound; its id is "{run_id}:ended", so a consumer sees one per run (or a copy
// with the same id).
type RunEndedEvent struct {
	RunID string `json:"run_id"`
	// Reason is cancelled, capability_bound or state_conflict (RunEnd* constants).
	Reason string `json:"reason"`
	// Keys are the conflicting state keys of a state_conflict end.
	Keys    []string  `json:"keys,omitempty"`
	EndedAt time.Time `json:"ended_at"`
}

// ToolDisposition is the read projection of a committed tool call for protocol consumers.
type ToolDisposition string

const (
	DispositionExecuted       ToolDisposition = "executed"
	DispositionPendingClient  ToolDisposition = "pending_client"
	DispositionPendingBuiltin ToolDisposition = "pending_builtin"
)

// AgentEventType tags the fact inside an [AgentEvent].
type AgentEventType string

const (
	EventToolCall   AgentEventType = "tool_call"
	EventToolResult AgentEventType = "tool_result"
	EventAwaiting   AgentEventType = "awaiting"
)

// AgentFact is one fact of the projection; only the fields of its Type are set.
type AgentFact struct {
	Type  AgentEventType  `json:"type"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ProposedInput is set on the tool_call fact an approval with edited arguments
	// publishes: Input is then what runs, ProposedInput what the model proposed.
	ProposedInput    json.RawMessage `json:"proposed_input,omitempty"`
	Disposition      ToolDisposition `json:"disposition,omitempty"`
	IsError          *bool           `json:"is_error,omitempty"`
	PendingToolUseID string          `json:"pending_tool_use_id,omitempty"`
}

// AgentEvent is the payload of io.awaken.agent.event.v1: the awaiting fact, stored on
// awaken.events.{run_id}; the tool_call and tool_result facts, sent live (never stored) on
// awaken.facts.{run_id}.
type AgentEvent struct {
	Tier    string    `json:"tier"`
	BatchID string    `json:"batch_id"`
	Event   AgentFact `json:"event"`
}

// AuditRecord is a PermissionDecided record: one per gate decision and per resume.
// Decision is allow, deny, set_result, ask, schedule, approved, denied or expired.
type AuditRecord struct {
	RunID    string `json:"run_id"`
	BatchID  string `json:"batch_id"`
	ToolID   string `json:"tool_id"`
	CallID   string `json:"call_id"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Actor is who resolved a ticket (approved, denied, and the deny of an edit the
	// policy blocked); "timer" for expired and scheduled. Absent on the gate's own
	// decisions.
	Actor string `json:"actor,omitempty"`
	// ActorClaimed is set when no door authenticated Actor (a resume command on the
	// public subject names its actor itself).
	ActorClaimed bool `json:"actor_claimed,omitempty"`
	// Arguments and ProposedArguments are set when an approval edited the call's
	// arguments: Arguments are the approved ones (what runs, or what the policy blocked),
	// ProposedArguments the model's.
	Arguments         json.RawMessage `json:"arguments,omitempty"`
	ProposedArguments json.RawMessage `json:"proposed_arguments,omitempty"`
	// ArgumentsDigest is, on a resolution of a permission or scheduled ticket, the
	// [ArgumentsDigest] of the arguments approved (what runs: the edit when there is one);
	// ProposedArgumentsDigest the model's, set beside it when an approval edited them.
	ArgumentsDigest         string `json:"arguments_digest,omitempty"`
	ProposedArgumentsDigest string `json:"proposed_arguments_digest,omitempty"`
	// PolicyDigest is the [PolicyDigest] of the policies that asked (from the ticket).
	PolicyDigest string `json:"policy_digest,omitempty"`
	// Unbound is set on an approval whose command named no arguments_digest (accepted in
	// this release for compatibility).
	Unbound bool `json:"unbound,omitempty"`
	// Approvals are the approvals a ticket that needed several had recorded when it was
	// resolved (approved: all of them; denied or expired: those so far).
	Approvals []TicketApproval `json:"approvals,omitempty"`
	// Shadow is, on a gate decision, what each matching shadow rule would have decided
	// ([GateOutcome.Shadow]); the decision itself is Decision.
	Shadow []ShadowFinding `json:"shadow,omitempty"`
	// Limit names, on a gate decision, the host limit that blocked the call or made it
	// ask ([GateOutcome.Limit]).
	Limit string    `json:"limit,omitempty"`
	At    time.Time `json:"at"`
}
