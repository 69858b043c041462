package contracts

import (
	"encoding/json"
	"time"
)

// This file holds the internal records and work events of the pipeline. They are not part
// of the normative protocol but every service reads them, so they live in the vocabulary.

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
// before any gate runs. Only Phase changes afterwards.
type BatchRecord struct {
	Submission BatchSubmission `json:"submission"`
	// Hash is the SHA-256 of the canonical submission payload; a resubmission with another
	// hash is a conflict.
	Hash   string       `json:"hash"`
	Pinned []PinnedCall `json:"pinned"`
	// Parallel is true when the batch qualifies for the parallel-delegation branch.
	Parallel  bool       `json:"parallel,omitempty"`
	Phase     BatchPhase `json:"phase"`
	CreatedAt time.Time  `json:"created_at"`
}

// CallRecord is the durable record of one call, keyed by [CallKey] (one per operation id).
// A call whose record does not exist yet is Requested.
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
	// TraceParent is the W3C traceparent of the trace the call's batch runs in, recorded
	// when the gate decides the call, so an approval or a scheduled trigger — which arrive
	// in traces of their own — continues the batch's trace.
	TraceParent string `json:"trace_parent,omitempty"`
	// Timeline records when each stage was committed.
	Timeline []TimelineMark `json:"timeline,omitempty"`
}

// TimelineMark is one stage of a call with the time it was committed.
type TimelineMark struct {
	Stage string    `json:"stage"`
	At    time.Time `json:"at"`
}

// GateRequest asks the gate to decide call Index of a batch. With Probe set (parallel
// delegation), the gate decides every call first and dispatches them all only if every
// decision is Allow.
type GateRequest struct {
	RunID string `json:"run_id"`
	Step  int64  `json:"step"`
	Index int    `json:"index"`
	Probe bool   `json:"probe,omitempty"`
}

// ExecRequest asks an executor to run one call whose Executing{Attempt} entry the gate has
// committed. Target, Policy and ToolID come from the trusted registry via the batch record.
type ExecRequest struct {
	RunID     string              `json:"run_id"`
	Step      int64               `json:"step"`
	Index     int                 `json:"index"`
	CallID    string              `json:"call_id"`
	ToolID    string              `json:"tool_id"`
	Arguments json.RawMessage     `json:"arguments"`
	Target    ToolExecutionTarget `json:"target"`
	Policy    ToolRecoveryPolicy  `json:"policy"`
	Attempt   uint16              `json:"attempt"`
	Parallel  bool                `json:"parallel,omitempty"`
}

// CallOutput announces that call Index of a batch is terminal. The batcher advances
// sequential dispatch on it; the publisher checks the barrier.
type CallOutput struct {
	RunID    string  `json:"run_id"`
	Step     int64   `json:"step"`
	Index    int     `json:"index"`
	CallID   string  `json:"call_id"`
	ToolID   string  `json:"tool_id"`
	Outcome  Outcome `json:"outcome"`
	Parallel bool    `json:"parallel,omitempty"`
}

// TicketTimer fires when a ticket's due time (scheduled action) or deadline (approval
// timeout) arrives.
type TicketTimer struct {
	CorrelationID string `json:"correlation_id"`
	Kind          string `json:"kind"` // "due" or "deadline"
}
