package contracts

import (
	"encoding/json"
	"time"
)

// This file holds the durable records of a batch and its calls, which every service reads
// and writes. They are not part of the normative protocol.

// BatchPhase is the lifecycle of a batch record.
type BatchPhase string

const (
	// BatchPhaseOpen: calls are being gated and executed.
	BatchPhaseOpen BatchPhase = "open"
	// BatchPhaseFinalized: every call is terminal and the publisher committed the result set; the
	// atomic publish may not have happened yet.
	BatchPhaseFinalized BatchPhase = "finalized"
	// BatchPhasePublished: the results are on the results stream.
	BatchPhasePublished BatchPhase = "published"
)

// PinnedCall is what the batcher resolved for a call from the trusted host registry when the
// batch was created; it never changes afterwards.
type PinnedCall struct {
	// Known is false when no executor registers the tool id.
	Known  bool                `json:"known"`
	Target ToolExecutionTarget `json:"target,omitempty"`
	Kind   ToolKind            `json:"kind,omitempty"`
	Policy ToolRecoveryPolicy  `json:"policy"`
}

// BatchRecord is the durable record of a submitted batch, written once by the batcher
// before any gate runs. Only Phase changes afterwards, and only by its transitions
// ([BatchRecord.Finalize], [BatchRecord.MarkPublished]).
type BatchRecord struct {
	Submission BatchSubmission `json:"submission"`
	// Hash is the SHA-256 of the canonical submission payload; a resubmission with another
	// hash is a conflict.
	Hash   string       `json:"hash"`
	Pinned []PinnedCall `json:"pinned"`
	// Parallel is true when the batch's calls may complete in any order: it qualifies for
	// the parallel-delegation branch, or its calls all declare parallel (ParallelDeclared).
	Parallel bool `json:"parallel,omitempty"`
	// ParallelDeclared is true (with Parallel) when every call's tool declares that its
	// calls may run concurrently: the gate decides every call in model order and records
	// each decision before it hands any allowed call to an executor, then hands them all
	// over at once; a parked call is resolved and handed over on its own.
	ParallelDeclared bool       `json:"parallel_declared,omitempty"`
	Phase            BatchPhase `json:"phase"`
	CreatedAt        time.Time  `json:"created_at"`
	// Resolutions are operators' resolutions of indeterminate calls recorded while the
	// batch was open (see resolve.go): its results carry them.
	Resolutions []BatchResolution `json:"resolutions,omitempty"`
	// AuditHead is the last record of the run's audit chain as the publisher read it when
	// it archived the batch as published (after the results, off the platform's path): an anchor outside the audit stream, so a chain whose last
	// records were deleted is told from one that ended there (awaken audit verify --run).
	// The chain may have grown since (a later batch, a record appended while the batch
	// finished); it must still hold this record at this position. Nil when the chain was
	// not read (a batch archived before the anchor existed, or a run without records).
	AuditHead *AuditHead `json:"audit_head,omitempty"`
}

// AuditHead is one link of an audit chain: its position and its hash.
type AuditHead struct {
	N    uint64 `json:"n"`
	Hash string `json:"hash"`
}

// CallRecord is the durable record of one call, keyed by [CallKey] (one per operation id).
// A call whose record does not exist yet is Requested. It is the kernel's model of a call:
// every service moves it only by its transitions (call_transitions.go), which check that
// the move is legal and stamp the timeline.
type CallRecord struct {
	Index  int                `json:"index"`
	CallID string             `json:"call_id"`
	ToolID string             `json:"tool_id"`
	Phase  ToolCallPhase      `json:"phase"`
	Policy ToolRecoveryPolicy `json:"policy"`
	// Decision is the gate outcome, recorded once; a redelivered gate request re-publishes
	// what it produced instead of deciding again.
	Decision *GateOutcome `json:"decision,omitempty"`
	// Entered is set by the executor, durably, before it invokes the tool for the current
	// attempt. Executing with Entered false means the gate committed the entry but no
	// executor has started the body yet.
	Entered bool `json:"entered,omitempty"`
	// EnteredBy is the stream sequence of the executor request whose delivery entered the
	// current attempt. A redelivery of that same message means its handler died (recovery
	// applies); any other request for the call is a duplicate and is ignored.
	EnteredBy uint64 `json:"entered_by,omitempty"`
	// ResolvedBy is the event id of the resume command that resolved this call's ticket, so
	// a redelivered resume re-publishes its outputs instead of being refused.
	ResolvedBy string `json:"resolved_by,omitempty"`
	// ResolvedActor is who resolved the call's ticket: the resume command's actor, or
	// [ActorTimer].
	ResolvedActor string `json:"resolved_actor,omitempty"`
	// ResolvedActorClaimed is set when no door authenticated ResolvedActor: the resume
	// command came on the public subject and named its actor itself.
	ResolvedActorClaimed bool `json:"resolved_actor_claimed,omitempty"`
	// EditedArguments are the arguments an approval replaced the proposed ones with (the
	// submission keeps the proposed): the executor runs these. Nil: run as proposed.
	EditedArguments json.RawMessage `json:"edited_arguments,omitempty"`
	// Input is what the executor runs — the proposed arguments, or an approval's edit —
	// carried from the moment the gate hands the call to its executor ([CallRecord.CarryInput]):
	// that revision is the executor request, so the executor reads its work from the record
	// alone.
	Input json.RawMessage `json:"input,omitempty"`
	// SlotWait names the host concurrency limit a call moved into execution waits for a slot
	// of ([CallRecord.WaitForSlot]): Executing, not entered, without its input, so no executor
	// has it yet. Cleared when the gate hands the call over with its input.
	SlotWait string `json:"slot_wait,omitempty"`
	// Cost is what the tool reported its call cost (set by the executor with the output):
	// the gate then settles the call's budget shares to it (the configured cost was the
	// reservation). Nil: the tool reported nothing, and the configured cost stands.
	Cost *float64 `json:"cost,omitempty"`
	// EditBlocked is the policy's reason when the edited arguments were gated again and
	// blocked: the approval then denied the call ("blocked: {reason}").
	EditBlocked string `json:"edit_blocked,omitempty"`
	// Approvals are, for a ticket that needed several approvals, the ones recorded when it
	// was resolved, so a redelivered resolution audits the same list.
	Approvals []TicketApproval `json:"approvals,omitempty"`
	// TraceParent is the W3C traceparent of the trace the call's batch runs in, recorded
	// when the gate decides the call, so an approval or a scheduled trigger — which arrive
	// in traces of their own — continues the batch's trace.
	TraceParent string `json:"trace_parent,omitempty"`
	// Parallel is set when the gate's probe entered the call with the rest of its
	// parallel-delegation batch: its terminal revision then advances no sequential
	// dispatch (the batcher leaves it to the publisher's barrier).
	Parallel bool `json:"parallel,omitempty"`
	// Cancel is set when a [CallCancel] ended the call (or, on a Requested call not yet
	// reached by its batch, is recorded to end it when it is): who, why and how it ended.
	Cancel *CallCancelMark `json:"cancel,omitempty"`
	// Reconciles audits every reconcile of the call, oldest first (see [CallReconcile]):
	// set only for a tool with a reconcile function whose executor died after entering it.
	Reconciles []CallReconcile `json:"reconciles,omitempty"`
	// Resolution is set when an operator resolved the call after it ended Indeterminate
	// ([CallResolution]): into the results, or as a correction of them.
	Resolution *CallResolution `json:"resolution,omitempty"`
	// Timeline records when each stage was committed.
	Timeline []TimelineMark `json:"timeline,omitempty"`
}

// TimelineMark is one stage of a call with the time it was committed.
type TimelineMark struct {
	Stage string    `json:"stage"`
	At    time.Time `json:"at"`
}

// Timeline stages the transitions of [CallRecord] stamp. They are stored, and shown by
// the operator API, so their spelling is part of the record format.
const (
	// StageDecided: the gate decided the call on the sequential path, which publishes the
	// decision's audit record.
	StageDecided = "gate.decided"
	// StageProbed: a parallel-delegation probe decided the call and published the audit
	// itself; keeping it apart from StageDecided is what stops the sequential path from
	// auditing the same decision a second time.
	StageProbed = "gate.probed"
	// StageExecuting: the gate committed an executor entry (attempt 1).
	StageExecuting = "executing"
	// StageAwaiting: the call parked on a durable wait.
	StageAwaiting = "awaiting"
	// StageResumed: a resume command or a ticket timer resolved the call's wait.
	StageResumed = "resumed"
	// StageEntered: an executor claimed the attempt, durably, before invoking the tool.
	StageEntered = "entered"
	// StageRecovered: a redelivery after a crash moved the call to its next attempt.
	StageRecovered = "recovered"
	// StageCompleted: the call's output is committed.
	StageCompleted = "completed"
	// StageIndeterminate: the call's outcome cannot be known.
	StageIndeterminate = "indeterminate"
)
