package httpapi

import (
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// PolicyTestRequest selects the recorded decisions a backtest replays and holds the host
// configuration to replay them through. It is the body of POST /v1/policy/test; `awaken
// policy test` builds the same request from its flags.
type PolicyTestRequest struct {
	// Config is the candidate host configuration as a file holds it (YAML or JSON text).
	// Only its policy and fixed results take part (and its MCP servers' trust_annotations).
	Config string `json:"config"`
	// Since and Until bound the time of the decisions replayed (either may be absent).
	Since *time.Time `json:"since,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// Runs narrows the replay to these run ids (absent: every run).
	Runs []string `json:"runs,omitempty"`
}

// PolicyTestCall is one recorded gate decision and what the candidate policy makes of it.
type PolicyTestCall struct {
	BatchID   string    `json:"batch_id"`
	CallID    string    `json:"call_id"`
	ToolID    string    `json:"tool_id"`
	DecidedAt time.Time `json:"decided_at"`
	// Old is the recorded decision (an audit label: allow, deny, set_result, ask,
	// schedule), OldReason its reason.
	Old       string `json:"old"`
	OldReason string `json:"old_reason,omitempty"`
	// New is the candidate's decision: an audit label, or unknown_tool, invalid_arguments
	// or capability_bound for the chain's other answers; empty when the call could not be
	// replayed (Missing says why).
	New       string `json:"new,omitempty"`
	NewReason string `json:"new_reason,omitempty"`
	// Rule is what decided New: "rules[i] PATTERN" of the candidate host policy,
	// "default", "mode", "invalid_arguments", "run policy" (the batch's run policy was
	// stricter), "run policy invalid", "deny_all" (the run's narrowing), "tool_paused"
	// (the kill switch blocked the call then: a pause is no policy, so New keeps Old) or
	// "none" (the chain answered before any policy: unknown tool, invalid arguments).
	Rule    string `json:"rule,omitempty"`
	Changed bool   `json:"changed"`
	// Shadow is what the candidate's shadow rules would make of the call.
	Shadow  []contracts.ShadowFinding `json:"shadow,omitempty"`
	Missing string                    `json:"missing,omitempty"`
}

// PolicyTestRule counts the replayed calls one rule (or basis) of the candidate decided,
// and how many of them changed. A shadow rule counts the calls it matched, and as changed
// those whose would-be decision differs from the candidate's.
type PolicyTestRule struct {
	Rule    string `json:"rule"`
	Shadow  bool   `json:"shadow,omitempty"`
	Calls   int    `json:"calls"`
	Changed int    `json:"changed"`
}

// PolicyTestReport is the answer of a backtest.
type PolicyTestReport struct {
	// Calls are the replayed decisions in the order they were audited.
	Calls []PolicyTestCall `json:"calls"`
	// Rules lists every rule of the candidate host policy in configuration order, then the
	// other bases that decided some call.
	Rules []PolicyTestRule `json:"rules"`
	// Total counts Calls; Changed those whose decision changes; Missing those that could
	// not be replayed (their batch record is gone, or names no such call).
	Total   int `json:"total"`
	Changed int `json:"changed"`
	Missing int `json:"missing"`
	// Oldest is the time of the earliest decision read: what the audit stream still holds
	// (it keeps every record unless its operator limits it) bounds how far back a test
	// reaches.
	Oldest *time.Time `json:"oldest,omitempty"`
}
