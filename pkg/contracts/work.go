package contracts

import "encoding/json"

// This file holds the internal work events of the pipeline. They are not part of the
// normative protocol but every service reads them, so they live in the vocabulary.

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

// CallOutput is what a terminal call-record revision announces: call Index of a batch is
// terminal. The gate advances sequential dispatch on it; the publisher checks the barrier.
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
