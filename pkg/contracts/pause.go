package contracts

import (
	"encoding/base64"
	"time"
)

// This file is the kill switch of a tool: an operator pauses a tool, and while it is
// paused the gate blocks every new call of it with a model-visible error that names the
// pause and its reason, and the executors block a call decided before the pause right
// before entering its body. Calls whose body was entered finish.

// ToolPausedCode starts the block reason of a call of a paused tool, so the model (and
// code reading the output) can tell a pause from a policy deny: the call's output is
// "blocked: tool_paused: tool {id} is paused: {reason}".
const ToolPausedCode = "tool_paused"

// Tool pause actions of [ToolPauseAudit].
const (
	ToolPauseActionPause  = "pause"
	ToolPauseActionResume = "resume"
)

// MaxPauseReasonLength bounds the reason of a pause (it is shown to the model).
const MaxPauseReasonLength = 1024

// ToolPause is the record of a paused tool in the tool pauses bucket, keyed by
// [ToolPauseKey]. A tool with no record is not paused.
type ToolPause struct {
	ToolID string `json:"tool_id"`
	// Reason is what the operator gave; the model reads it in the blocked call's output.
	Reason string `json:"reason,omitempty"`
	// Actor names who paused the tool.
	Actor    string    `json:"actor,omitempty"`
	PausedAt time.Time `json:"paused_at"`
}

// BlockReason is the block reason of a call of the paused tool:
// "tool_paused: tool {id} is paused: {reason}" ("… is paused" without a reason).
func (p ToolPause) BlockReason() string {
	s := ToolPausedCode + ": tool " + p.ToolID + " is paused"
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	return s
}

// GateOutcome is the outcome the gate records for a new call of the paused tool: a block
// with [ToolPause.BlockReason].
func (p ToolPause) GateOutcome() GateOutcome {
	return GateOutcome{Kind: GateBlock, Reason: p.BlockReason()}
}

// ToolPauseAudit is the audit record of a pause or a resume of a tool, published on
// [Names.ToolPauseAuditSubject] with type [TypeToolPauseAudit].
type ToolPauseAudit struct {
	ToolID string `json:"tool_id"`
	// Action is "pause" or "resume".
	Action string    `json:"action"`
	Reason string    `json:"reason,omitempty"`
	Actor  string    `json:"actor,omitempty"`
	At     time.Time `json:"at"`
}

// ToolPauseKey is the KV key of toolID's pause record. Tool ids may hold characters KV
// keys do not allow (spaces, colons, non-ASCII), so the key is the id in unpadded
// base64url, whose alphabet keys do allow.
func ToolPauseKey(toolID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(toolID))
}

// ToolPauseRequest is the body of a pause or resume: HTTP POST /v1/tools/{id}/pause and
// /resume (tool_id from the path), and the micro endpoints (tool_id required).
type ToolPauseRequest struct {
	ToolID string `json:"tool_id,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Actor names who asks, for the audit record (default: "http" or "micro").
	Actor string `json:"actor,omitempty"`
}

// ToolPauseState is the reply of a pause or resume: whether the tool is paused now, and
// the pause record while it is.
type ToolPauseState struct {
	ToolID string     `json:"tool_id"`
	Paused bool       `json:"paused"`
	Pause  *ToolPause `json:"pause,omitempty"`
}
