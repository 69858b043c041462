package contracts

import (
	"encoding/json"
	"time"
)

// ToolCall is one call emitted by the model. CallID is the model's correlation id, not a
// durable idempotency key: that is the operation id (see [OperationID]).
type ToolCall struct {
	CallID string `json:"call_id"`
	ToolID string `json:"tool_id"`
	// Arguments may be left out of a submission, or null: the decoder reads either as {}.
	Arguments json.RawMessage `json:"arguments" jsonschema:"optional"`
}

// ContentBlockType tags a [ContentBlock].
type ContentBlockType string

const (
	BlockText       ContentBlockType = "text"
	BlockImage      ContentBlockType = "image"
	BlockToolUse    ContentBlockType = "tool_use"
	BlockToolResult ContentBlockType = "tool_result"
	// BlockResourceLink points at an output too large to carry inline: the executor stored
	// it in the objects bucket and the block names it (MCP's resource_link content item).
	BlockResourceLink ContentBlockType = "resource_link"
	// BlockAudio is audio bytes ({"type":"audio","source":{"type":"base64","media_type":"audio/…","data":…}}),
	// as an MCP server's audio content item arrives.
	BlockAudio ContentBlockType = "audio"
	// BlockResource is a resource embedded in a result (MCP's embedded resource, same
	// shape): {"type":"resource","resource":{"uri","mimeType"?,"text"|"blob"}}.
	BlockResource ContentBlockType = "resource"
)

// EmbeddedResource is the resource of a [BlockResource] block, with MCP's field names:
// exactly one of Text or Blob (standard base64) is set.
type EmbeddedResource struct {
	URI      string `json:"uri"`
	MimeType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// ImageSource locates image bytes: {"type":"base64","media_type":..,"data":..} or
// {"type":"url","url":..}.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// ContentBlock is one block of model-visible content, tagged by Type. Only the fields of
// its type are set.
type ContentBlock struct {
	Type ContentBlockType `json:"type"`
	// Text is set for text blocks.
	Text string `json:"text,omitempty"`
	// Source is set for image blocks.
	Source *ImageSource `json:"source,omitempty"`
	// ID, Name and Input are set for tool_use blocks. Name is also the object name of a
	// resource_link block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID and Content are set for tool_result blocks.
	ToolUseID string         `json:"tool_use_id,omitempty"`
	Content   []ContentBlock `json:"content,omitempty"`
	// URI, Name, MimeType and Size are set for resource_link blocks (field names as MCP
	// spells them): URI is "awaken://objects/{name}", Size the object's length in bytes.
	// A resource_link an MCP server returned (any uri) may also carry its title and
	// description.
	URI         string `json:"uri,omitempty"`
	MimeType    string `json:"mimeType,omitempty"`
	Size        int64  `json:"size,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Resource is set for resource blocks.
	Resource *EmbeddedResource `json:"resource,omitempty"`
}

// ToolOutput is the result of one call as the model will see it. IsError marks a
// model-visible failure that does not abort the run. State holds commands staged for the
// commit boundary, never written directly.
type ToolOutput struct {
	CallID  string         `json:"call_id"`
	Content []ContentBlock `json:"content"`
	IsError bool           `json:"is_error"`
	// StructuredContent is the tool's structured result (MCP's structuredContent), kept
	// whole as JSON. Content always carries it too, as a JSON text block, unless a text
	// block already holds it ([ToolOutput.WithStructuredText]), so a consumer that reads
	// only content misses nothing.
	StructuredContent json.RawMessage `json:"structured_content,omitempty"`
	State             []Command       `json:"state,omitempty"`
}

// Scope is where a state command applies.
type Scope string

const (
	ScopeRun     Scope = "run"
	ScopeThread  Scope = "thread"
	ScopeShared  Scope = "shared"
	ScopeProfile Scope = "profile"
)

// MergePolicy says how two writes of one key in one commit combine.
type MergePolicy string

const (
	// MergeDisjoint: a later write replaces an earlier one.
	MergeDisjoint MergePolicy = "disjoint"
	// MergeCommutative: object values shallow-merge, other values replace.
	MergeCommutative MergePolicy = "commutative"
	// MergeExclusive: two sets of one (scope, key) in one commit conflict.
	MergeExclusive MergePolicy = "exclusive"
)

// ActionKind is what a state command does.
type ActionKind string

const (
	ActionSet    ActionKind = "set"
	ActionRemove ActionKind = "remove"
)

// Action is Set(Value) or Remove.
type Action struct {
	Kind  ActionKind      `json:"kind"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Command is a state command staged by a tool onto the commit boundary.
type Command struct {
	Key    string      `json:"key"`
	Scope  Scope       `json:"scope"`
	Merge  MergePolicy `json:"merge"`
	RunID  string      `json:"run_id,omitempty"`
	Action Action      `json:"action"`
}

// ToolExecutionTarget is the trusted placement of a tool: a property of the registered
// executable, never of anything the model or the batch says.
type ToolExecutionTarget string

const (
	TargetBrain   ToolExecutionTarget = "brain"
	TargetSandbox ToolExecutionTarget = "sandbox"
)

// ToolKind classifies how a tool is dispatched.
type ToolKind string

const (
	KindRegular        ToolKind = "regular"
	KindClientExecuted ToolKind = "client_executed"
	KindDelegation     ToolKind = "delegation"
)

// ToolRecoveryCapability is the trusted property of an executable that says what repeating
// it means. The zero value is invalid; [CapabilityNonRecoverable] is the default.
type ToolRecoveryCapability string

const (
	CapabilityNonRecoverable ToolRecoveryCapability = "non_recoverable"
	CapabilityReplaySafe     ToolRecoveryCapability = "replay_safe"
	CapabilityIdempotent     ToolRecoveryCapability = "idempotent"
	CapabilityDurableRequest ToolRecoveryCapability = "durable_request"
)

// ToolRecoveryMode is the configured recovery behaviour of a call after a crash.
type ToolRecoveryMode string

const (
	ModeNeverReplay    ToolRecoveryMode = "never_replay"
	ModeReplaySafe     ToolRecoveryMode = "replay_safe"
	ModeIdempotent     ToolRecoveryMode = "idempotent"
	ModeDurableRequest ToolRecoveryMode = "durable_request"
)

// ToolRecoveryPolicy is the recovery mode and attempt budget pinned per call when its batch
// is created. Wire form {"mode":"never_replay","max_attempts":3}; max_attempts 0 fails to
// decode. The zero value is not valid: use [DefaultRecoveryPolicy].
type ToolRecoveryPolicy struct {
	Mode        ToolRecoveryMode `json:"mode"`
	MaxAttempts uint16           `json:"max_attempts"`
}

// ToolCapabilityNarrowing is a run's restriction of host tool authority.
type ToolCapabilityNarrowing string

const (
	NarrowingConfigured ToolCapabilityNarrowing = "configured"
	NarrowingDenyAll    ToolCapabilityNarrowing = "deny_all"
)

// GateOutcomeKind tags a [GateOutcome].
type GateOutcomeKind string

const (
	GateAllow               GateOutcomeKind = "allow"
	GateBlock               GateOutcomeKind = "block"
	GateSetResult           GateOutcomeKind = "set_result"
	GateRequireConfirmation GateOutcomeKind = "require_confirmation"
	GateSchedule            GateOutcomeKind = "schedule"
)

// GateOutcome is the decision of the gate chain for one call. Only the fields of its kind
// are set: Reason for block, Output for set_result, CorrelationID for require_confirmation
// and schedule (plus ActionKind and Delay for schedule, Timeout for require_confirmation).
type GateOutcome struct {
	Kind          GateOutcomeKind `json:"kind"`
	Reason        string          `json:"reason,omitempty"`
	Output        *ToolOutput     `json:"output,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	ActionKind    string          `json:"action_kind,omitempty"`
	Delay         Duration        `json:"delay,omitempty"`
	Timeout       Duration        `json:"timeout,omitempty"`
	// Approvals is, for require_confirmation, how many distinct actors must approve (0 and
	// 1: one).
	Approvals int `json:"approvals,omitempty"`
	// PolicyDigest is, for require_confirmation and schedule, the [PolicyDigest] of the
	// host and run policies that asked, copied into the ticket.
	PolicyDigest string `json:"policy_digest,omitempty"`
	// Shadow lists what the shadow rules that match the call would have decided; it is
	// recorded with the decision (so a redelivery audits the same findings) and changes
	// nothing of it. Any kind may carry it.
	Shadow []ShadowFinding `json:"shadow,omitempty"`
	// Limit names the host limit ([LimitConfig]) that blocked the call, when one did, or
	// that deferred it (a rate limit with over: wait).
	Limit string `json:"limit,omitempty"`
	// Until is, for a schedule, the start of the rate window a waiting rate limit deferred
	// the call to: the ticket is due then, or at its own delay if that is later.
	Until *time.Time `json:"until,omitempty"`
}

// ShadowFinding is what one shadow rule ([PolicyRule.Shadow]) would have made of a call:
// Would is the audit label ([GateOutcome.AuditLabel]) of the gate chain's outcome had that
// rule alone been in force, the other shadow rules still off.
type ShadowFinding struct {
	// Policy is the policy the rule belongs to: "host" or "run".
	Policy string `json:"policy"`
	// Rule is the rule's pattern as configured, Index its position in the policy's rules.
	Rule  string `json:"rule"`
	Index int    `json:"index"`
	// Would is allow, deny, set_result, ask or schedule.
	Would string `json:"would"`
	// Reason is the reason of a would-be deny.
	Reason string `json:"reason,omitempty"`
	// Limit names the shadow limit of a finding a limit made (Rule is then "limit:" and
	// the name, Index the limit's position in the policy's limits).
	Limit string `json:"limit,omitempty"`
}

// Policies a [ShadowFinding] names.
const (
	ShadowPolicyHost = "host"
	ShadowPolicyRun  = "run"
)

// PermissionVerdictKind tags a [ToolPermissionVerdict].
type PermissionVerdictKind string

const (
	VerdictAllow               PermissionVerdictKind = "allow"
	VerdictDeny                PermissionVerdictKind = "deny"
	VerdictRequireConfirmation PermissionVerdictKind = "require_confirmation"
	VerdictSchedule            PermissionVerdictKind = "schedule"
)

// ToolPermissionVerdict is what a permission policy says of one call. Schedule is an
// awaken extension of the original three verdicts: a rule may defer a call by Delay.
type ToolPermissionVerdict struct {
	Kind          PermissionVerdictKind `json:"kind"`
	Reason        string                `json:"reason,omitempty"`
	CorrelationID string                `json:"correlation_id,omitempty"`
	Delay         Duration              `json:"delay,omitempty"`
	Timeout       Duration              `json:"timeout,omitempty"`
	ActionKind    string                `json:"action_kind,omitempty"`
	// Approvals is a require_confirmation's number of distinct approvals (0 and 1: one).
	Approvals int `json:"approvals,omitempty"`
}

// PolicyBehavior is what a matching rule (or the default) does.
type PolicyBehavior string

const (
	BehaviorAllow    PolicyBehavior = "allow"
	BehaviorAsk      PolicyBehavior = "ask"
	BehaviorDeny     PolicyBehavior = "deny"
	BehaviorSchedule PolicyBehavior = "schedule"
)

// PolicyMode is the permission mode of a policy (Claude-Code compatible names).
type PolicyMode string

const (
	ModeDefault           PolicyMode = "default"
	ModeAcceptEdits       PolicyMode = "acceptEdits"
	ModePlan              PolicyMode = "plan"
	ModeBypassPermissions PolicyMode = "bypassPermissions"
)

// PolicyConfig is the wire and configuration form of a permission policy, shared by the
// host policy and a batch's per-run policy.
type PolicyConfig struct {
	DefaultBehavior PolicyBehavior `json:"default_behavior,omitempty" yaml:"default_behavior,omitempty"`
	Mode            PolicyMode     `json:"mode,omitempty" yaml:"mode,omitempty"`
	Rules           []PolicyRule   `json:"rules,omitempty" yaml:"rules,omitempty"`
	// Limits are the host policy's count, rate and budget limits ([LimitConfig]). A run
	// policy may not carry any: a submission with run policy limits is refused.
	Limits []LimitConfig `json:"limits,omitempty" yaml:"limits,omitempty"`
}

// PolicyRule is one rule: a pattern, a behaviour, and for schedule a delay, for ask an
// optional approval timeout.
type PolicyRule struct {
	Pattern  string         `json:"pattern" yaml:"pattern"`
	Behavior PolicyBehavior `json:"behavior" yaml:"behavior"`
	Delay    Duration       `json:"delay,omitempty" yaml:"delay,omitempty"`
	Timeout  Duration       `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// ActionKind names, for a schedule rule, the kind of system-performed action the
	// deferred call is; the run must be permitted it ([AgentSnapshot.ActionKinds]), else
	// the run ends with capability_bound. Empty: an ordinary tool-backed action.
	ActionKind string `json:"action_kind,omitempty" yaml:"action_kind,omitempty"`
	// Approvals is, for an ask rule, how many distinct authenticated actors must approve
	// before the call runs (0 and 1: one approval); any one denial decides. At most
	// [MaxApprovals].
	Approvals int `json:"approvals,omitempty" yaml:"approvals,omitempty"`
	// Shadow makes the rule log-only: it is evaluated for every call it matches and what
	// the decision would have been with it in force is recorded in the audit
	// ([AuditRecord.Shadow]), but it never changes a decision.
	Shadow bool `json:"shadow,omitempty" yaml:"shadow,omitempty"`
}
