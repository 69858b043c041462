package contracts

// PhaseKind tags a [ToolCallPhase].
type PhaseKind string

const (
	PhaseRequested     PhaseKind = "Requested"
	PhaseExecuting     PhaseKind = "Executing"
	PhaseAwaiting      PhaseKind = "Awaiting"
	PhaseCompleted     PhaseKind = "Completed"
	PhaseIndeterminate PhaseKind = "Indeterminate"
)

// ToolWaitKind is what a parked call waits for.
type ToolWaitKind string

const (
	WaitToolPermission  ToolWaitKind = "tool_permission"
	WaitDelegation      ToolWaitKind = "delegation"
	WaitScheduledAction ToolWaitKind = "scheduled_action"
	WaitExternalResult  ToolWaitKind = "external_result"
)

// ToolWait is the durable wait of an Awaiting call.
type ToolWait struct {
	Kind          ToolWaitKind `json:"kind"`
	CorrelationID string       `json:"correlation_id"`
}

// ToolCallPhase is the durable phase of one call. Only the field of its
// Kind is set: Attempt for Executing, Wait for Awaiting, Output for Completed, Reason for
// Indeterminate. Its JSON form is externally tagged like the original: "Requested",
// {"Executing":{"attempt":1}}, {"Awaiting":{"wait":{..}}}, {"Completed":{..output}},
// {"Indeterminate":{"reason":".."}}.
type ToolCallPhase struct {
	Kind    PhaseKind
	Attempt uint16
	Wait    *ToolWait
	Output  *ToolOutput
	Reason  string
}
