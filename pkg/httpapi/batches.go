package httpapi

import (
	"encoding/json"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// StatusPending is the status of a batch whose results are not published yet.
const StatusPending = "pending"

// EventRunBatch is the event of GET /v1/runs/{run_id}/results: one per published batch,
// its data a [BatchResults] and its id the results stream's sequence of the batch's last
// message (its io.awaken.toolbatch.results.v1 message, or the finalized event of a batch
// published as an atomic batch).
const EventRunBatch = "batch"

// BatchAccepted is the reply of POST /v1/batches without wait (202): the stream stored
// the submission; the batcher checks it next.
type BatchAccepted struct {
	BatchID string `json:"batch_id"`
}

// BatchPending is the 202 reply of POST /v1/batches?wait= when the wait ended first, and
// of GET /v1/batches/{batch_id}/results while the batch is unpublished.
type BatchPending struct {
	BatchID string `json:"batch_id"`
	// Status is [StatusPending].
	Status string `json:"status"`
	// Tickets are the batch's open tickets, oldest first: the calls parked on an approval,
	// a schedule or a client's execution — what the batch waits on. Absent when none is
	// open.
	Tickets []PendingTicket `json:"tickets,omitempty"`
}

// PendingTicket is one open ticket of a pending batch: what holds it and until when.
type PendingTicket struct {
	// CorrelationID names the ticket in /v1/tickets/{correlation_id}/approve and …/deny.
	CorrelationID string `json:"correlation_id"`
	CallID        string `json:"call_id"`
	ToolID        string `json:"tool_id"`
	// Kind is why the call waits: permission (an approval), scheduled_action (a time) or
	// client_execution (the client runs the tool).
	Kind contracts.TicketReason `json:"kind"`
	// Deadline is when an unanswered ticket expires (absent: never); DueAt when a
	// scheduled action runs.
	Deadline *time.Time `json:"deadline,omitempty"`
	DueAt    *time.Time `json:"due_at,omitempty"`
}

// PendingTickets is the [PendingTicket] of each ticket of ts.
func PendingTickets(ts []contracts.ResumeTicket) []PendingTicket {
	if len(ts) == 0 {
		return nil
	}
	out := make([]PendingTicket, len(ts))
	for i, t := range ts {
		out[i] = PendingTicket{CorrelationID: t.CorrelationID, CallID: t.CallID, ToolID: t.ToolID, Kind: t.Reason, Deadline: t.Deadline, DueAt: t.DueAt}
	}
	return out
}

// BatchResults is a published batch: its results in model order and its finalized payload,
// as the io.awaken.toolbatch.results.v1 message carries them (or, for a batch too large
// for one message, its io.awaken.tool.result.v1 and io.awaken.toolbatch.finalized.v1
// payloads).
type BatchResults struct {
	BatchID   string                      `json:"batch_id"`
	Results   []contracts.ToolResultEvent `json:"results"`
	Finalized contracts.BatchFinalized    `json:"finalized"`
}

// BatchList is the reply of GET /v1/batches.
type BatchList struct {
	Batches []BatchView `json:"batches"`
}

// BatchView is a batch as operators see it: its identity and phase and, in model order,
// every call with its phase, outcome and timeline.
type BatchView struct {
	BatchID   string               `json:"batch_id"`
	RunID     string               `json:"run_id"`
	ThreadID  string               `json:"thread_id"`
	Step      int64                `json:"step"`
	Phase     contracts.BatchPhase `json:"phase"`
	CreatedAt time.Time            `json:"created_at"`
	// Metadata are the submitting door's labels (the MCP door: session, client, actor).
	Metadata map[string]string `json:"metadata,omitempty"`
	// Terminal counts the calls that are Completed or Indeterminate.
	Terminal int        `json:"terminal"`
	Calls    []CallView `json:"calls"`
}

// CallView is one call of a [BatchView]. Arguments and Output are model- and tool-authored
// content: whoever renders them must escape them (the console uses textContent only).
type CallView struct {
	Index  int    `json:"index"`
	CallID string `json:"call_id"`
	ToolID string `json:"tool_id"`
	// OperationID is the call's operation id, the one POST /v1/calls/{operation_id}/cancel
	// takes.
	OperationID string `json:"operation_id"`
	// Arguments are the arguments the call runs with: as submitted, or as an approval
	// edited them (omitted in batch lists).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// ProposedArguments are the submitted arguments when an approval edited them.
	ProposedArguments json.RawMessage `json:"proposed_arguments,omitempty"`
	// Edited is set when an approval edited the call's arguments (also in batch lists).
	Edited bool `json:"edited,omitempty"`
	// Phase is Requested, Executing, Awaiting, Completed or Indeterminate. A call whose
	// record does not exist yet (not gated) is Requested with Recorded false.
	Phase    contracts.PhaseKind `json:"phase"`
	Recorded bool                `json:"recorded"`
	// Attempt is the attempt of an Executing call.
	Attempt uint16 `json:"attempt,omitempty"`
	// SlotWait names the host concurrency limit an Executing call waits for a slot of:
	// admitted, but no executor has it yet.
	SlotWait string `json:"slot_wait,omitempty"`
	// Wait is the wait of an Awaiting call.
	Wait *contracts.ToolWait `json:"wait,omitempty"`
	// Outcome is completed or indeterminate once the call is terminal.
	Outcome contracts.Outcome `json:"outcome,omitempty"`
	// IsError is set for a terminal call whose output is an error (indeterminate included).
	IsError bool `json:"is_error,omitempty"`
	// Reason is the reason of an Indeterminate call.
	Reason string `json:"reason,omitempty"`
	// Output is the committed output of a Completed call (omitted in batch lists).
	Output *contracts.ToolOutput `json:"output,omitempty"`
	// Decision is the recorded gate decision kind (allow, block, set_result,
	// require_confirmation, schedule), when the gate decided.
	Decision contracts.GateOutcomeKind `json:"decision,omitempty"`
	// ResolvedBy is the id of the resume command (or timer) that resolved the call's ticket.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// Actor is who resolved the call's ticket (an api token's name, "nats:{user}", a
	// client's actor, or "timer").
	Actor string `json:"actor,omitempty"`
	// ActorClaimed is set when no door authenticated Actor: a resume command on the public
	// subject (a platform, `awaken tickets approve --as`) named it itself. Show it as a
	// claim ("alice (claimed)"), never as the token or user of that name.
	ActorClaimed bool `json:"actor_claimed,omitempty"`
	// Cancel is set when a call cancel ended the call (or is recorded to end it when its
	// batch reaches it): who, why, and how it ended.
	Cancel *contracts.CallCancelMark `json:"cancel,omitempty"`
	// Reconciles audits each reconcile of the call after an executor crash (outcome, how
	// many times the reconcile was asked, last error), oldest first.
	Reconciles []contracts.CallReconcile `json:"reconciles,omitempty"`
	// Resolution is set when an operator resolved the indeterminate call: into the batch's
	// results (applied "resolved") or as a correction of them ("corrected").
	Resolution *contracts.CallResolution `json:"resolution,omitempty"`
	// Timeline lists when each stage of the call was committed, oldest first.
	Timeline []contracts.TimelineMark `json:"timeline"`
}
