package httpapi

import "github.com/awaken-dev/awaken/pkg/contracts"

// CallCancelRequest is the body of calls.cancel and POST /v1/calls/{operation_id}/cancel.
type CallCancelRequest struct {
	OperationID string `json:"operation_id,omitempty"`
	Reason      string `json:"reason,omitempty"`
}

// CallResolveRequest is the body of calls.resolve and POST /v1/calls/{operation_id}/resolve.
type CallResolveRequest struct {
	OperationID string                     `json:"operation_id,omitempty"`
	Outcome     contracts.ReconcileOutcome `json:"outcome"`
	Output      *contracts.ToolOutput      `json:"output,omitempty"`
	Note        string                     `json:"note,omitempty"`
}
