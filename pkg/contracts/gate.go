package contracts

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// DenyAllReason is the block reason of every call of a run whose narrowing is deny_all.
const DenyAllReason = "tools are disabled for this Run"

// BlockedPrefix starts the error text of a blocked call's output: "blocked: {reason}".
const BlockedPrefix = "blocked: "

// Decision labels of [AuditRecord]: one per gate outcome (see [GateOutcome.AuditLabel])
// and one per resume resolution.
const (
	AuditDecisionAllow     = "allow"
	AuditDecisionDeny      = "deny"
	AuditDecisionSetResult = "set_result"
	AuditDecisionAsk       = "ask"
	AuditDecisionSchedule  = "schedule"
	AuditDecisionApproved  = "approved"
	AuditDecisionDenied    = "denied"
	AuditDecisionExpired   = "expired"
	// AuditDecisionScheduled: a scheduled action ran at its due time without a human.
	AuditDecisionScheduled = "scheduled"
	// AuditDecisionUnknown labels an outcome of no known kind; it never names a real
	// decision, so an audit reader cannot mistake it for one.
	AuditDecisionUnknown = "unknown"
)

// ErrInvalidGateOutcome is wrapped by every failure of [GateOutcome.Validate].
var ErrInvalidGateOutcome = errors.New("invalid gate outcome")

// AuditLabel is the decision recorded for o in the PermissionDecided audit record:
// allow, deny (for block), set_result, ask (for require_confirmation) or schedule.
func (o GateOutcome) AuditLabel() string {
	switch o.Kind {
	case GateAllow:
		return AuditDecisionAllow
	case GateBlock:
		return AuditDecisionDeny
	case GateSetResult:
		return AuditDecisionSetResult
	case GateRequireConfirmation:
		return AuditDecisionAsk
	case GateSchedule:
		return AuditDecisionSchedule
	default:
		return AuditDecisionUnknown
	}
}

// IsAllow reports whether o lets the call enter an executor. Every other outcome, an
// unknown kind included, keeps the call away from its effect.
func (o GateOutcome) IsAllow() bool { return o.Kind == GateAllow }

// IsWait reports whether o parks the call on a ticket (require_confirmation or schedule).
func (o GateOutcome) IsWait() bool {
	return o.Kind == GateRequireConfirmation || o.Kind == GateSchedule
}

// ImmediateOutput returns the output a block or set_result outcome completes callID with,
// without entering an executor: "blocked: {reason}" as an error, or the gate-supplied
// output with its call id set to callID (a completed call's output always names its own
// call). ok is false for every other kind.
func (o GateOutcome) ImmediateOutput(callID string) (out ToolOutput, ok bool) {
	switch o.Kind {
	case GateBlock:
		return ErrorOutput(callID, BlockedPrefix+o.Reason), true
	case GateSetResult:
		if o.Output == nil {
			return ErrorOutput(callID, "gate returned set_result without an output"), true
		}
		out = BlocksOutput(callID, o.Output.Content, o.Output.IsError)
		out.State = append([]Command(nil), o.Output.State...)
		return out, true
	}
	return ToolOutput{}, false
}

// Validate checks that o is of a known kind and carries exactly the fields of its kind:
// set_result needs an output; require_confirmation and schedule need a correlation id
// without control characters; delay and action kind belong to schedule only, timeout to
// require_confirmation only, reason to block only. Failures wrap [ErrInvalidGateOutcome].
func (o GateOutcome) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidGateOutcome, o.Kind, fmt.Sprintf(format, args...))
	}
	set := map[string]bool{
		"reason":         o.Reason != "",
		"output":         o.Output != nil,
		"correlation_id": o.CorrelationID != "",
		"action_kind":    o.ActionKind != "",
		"delay":          o.Delay != 0,
		"timeout":        o.Timeout != 0,
		"approvals":      o.Approvals != 0,
		"policy_digest":  o.PolicyDigest != "",
	}
	var allowed []string
	switch o.Kind {
	case GateAllow:
	case GateBlock:
		allowed = []string{"reason"}
	case GateSetResult:
		allowed = []string{"output"}
		if o.Output == nil {
			return bad("needs an output")
		}
	case GateRequireConfirmation:
		allowed = []string{"correlation_id", "timeout", "approvals", "policy_digest"}
		if o.Timeout < 0 {
			return bad("negative timeout")
		}
		if o.Approvals < 0 || o.Approvals > MaxApprovals {
			return bad("%d approvals (want 1 to %d)", o.Approvals, MaxApprovals)
		}
	case GateSchedule:
		allowed = []string{"correlation_id", "action_kind", "delay", "policy_digest"}
		if o.Delay < 0 {
			return bad("negative delay")
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrInvalidGateOutcome, o.Kind)
	}
	for _, name := range []string{"reason", "output", "correlation_id", "action_kind", "delay", "timeout", "approvals", "policy_digest"} {
		if set[name] && !slices.Contains(allowed, name) {
			return bad("cannot carry %s", name)
		}
	}
	if o.IsWait() {
		if o.CorrelationID == "" {
			return bad("needs a correlation id")
		}
		if strings.ContainsFunc(o.CorrelationID, isForbiddenIDRune) {
			return bad("correlation id %q contains a control or format character", o.CorrelationID)
		}
	}
	return nil
}

// IntoGateOutcome projects a permission verdict onto the gate outcome:
// Allow ⇒ allow; Deny ⇒ block with the reason unchanged; RequireConfirmation ⇒
// require_confirmation with the correlation id and timeout unchanged; Schedule ⇒ schedule
// with the correlation id and delay unchanged. Only Allow projects to an executable
// outcome: a verdict of unknown kind fails closed as a block.
func (v ToolPermissionVerdict) IntoGateOutcome() GateOutcome {
	switch v.Kind {
	case VerdictAllow:
		return GateOutcome{Kind: GateAllow}
	case VerdictDeny:
		return GateOutcome{Kind: GateBlock, Reason: v.Reason}
	case VerdictRequireConfirmation:
		return GateOutcome{Kind: GateRequireConfirmation, CorrelationID: v.CorrelationID, Timeout: v.Timeout, Approvals: v.Approvals}
	case VerdictSchedule:
		return GateOutcome{Kind: GateSchedule, CorrelationID: v.CorrelationID, Delay: v.Delay, ActionKind: v.ActionKind}
	default:
		return GateOutcome{Kind: GateBlock, Reason: fmt.Sprintf("unknown permission verdict %q", v.Kind)}
	}
}

// Valid reports whether n is configured, deny_all or empty (which means configured).
func (n ToolCapabilityNarrowing) Valid() bool {
	return n == "" || n == NarrowingConfigured || n == NarrowingDenyAll
}

// Normalize returns [NarrowingConfigured] for the empty string, n itself otherwise.
func (n ToolCapabilityNarrowing) Normalize() ToolCapabilityNarrowing {
	if n == "" {
		return NarrowingConfigured
	}
	return n
}

// Intersect combines two narrowings of one run. The result is configured only if both
// are (the empty string counts as configured); deny_all is absorbing, and so is any
// unknown value, which counts as deny_all. The operation commutes, associates and never
// widens: the result is never more permissive than either operand.
func (n ToolCapabilityNarrowing) Intersect(m ToolCapabilityNarrowing) ToolCapabilityNarrowing {
	if n.Normalize() == NarrowingConfigured && m.Normalize() == NarrowingConfigured {
		return NarrowingConfigured
	}
	return NarrowingDenyAll
}

// DeniesAll reports whether n removes all host tool authority. Unknown values fail closed.
func (n ToolCapabilityNarrowing) DeniesAll() bool { return n.Normalize() != NarrowingConfigured }

// GateOutcome is the first link of the gate chain: block with [DenyAllReason] when n
// denies all tools, allow otherwise (later links may still restrict).
func (n ToolCapabilityNarrowing) GateOutcome() GateOutcome {
	if n.DeniesAll() {
		return GateOutcome{Kind: GateBlock, Reason: DenyAllReason}
	}
	return GateOutcome{Kind: GateAllow}
}

// Strictness ranks a permission outcome by how much it keeps a call from its effect:
//
//	block (deny) 4 > require_confirmation (ask) 3 > schedule 2 > allow 1
//
// A block never runs the call; an ask runs it only after a human approves; a schedule runs
// it with no human once its delay passes; an allow runs it at once. Any other kind (a
// set_result, which no policy produces, or an unknown kind) ranks with block, so ranking
// never fails open.
func (o GateOutcome) Strictness() int {
	switch o.Kind {
	case GateAllow:
		return 1
	case GateSchedule:
		return 2
	case GateRequireConfirmation:
		return 3
	default:
		return 4
	}
}

// NarrowGateOutcome composes the host policy's outcome for a call with the run policy's
// outcome for the same call. A run policy arrives inside a submission, so it may only
// narrow what the host allows, never widen it:
//   - the stricter kind by [GateOutcome.Strictness] wins, with its own parameters (a run's
//     schedule cannot turn the host's ask into a call that runs with no human; a run's ask
//     can turn the host's schedule or allow into one that needs a human);
//   - when both pick the same kind, the stricter parameters win: for schedule the longer
//     delay, for require_confirmation the shorter approval timeout (zero means no
//     deadline, the longest) and the larger number of approvals; for block the run's reason, which comes first in the chain.
//
// The correlation id is the host's when it has one (the gate replaces it anyway). An
// outcome of unknown kind on either side yields a block: the composition fails closed.
// The kind, delay and timeout do not depend on the order of the operands, and the result
// is never less strict than either operand.
func NarrowGateOutcome(host, run GateOutcome) GateOutcome {
	known := func(o GateOutcome) bool {
		switch o.Kind {
		case GateAllow, GateSchedule, GateRequireConfirmation, GateBlock:
			return true
		}
		return false
	}
	for _, o := range []GateOutcome{run, host} {
		if !known(o) {
			return GateOutcome{Kind: GateBlock, Reason: fmt.Sprintf("unknown gate outcome %q", o.Kind)}
		}
	}
	switch hs, rs := host.Strictness(), run.Strictness(); {
	case rs > hs:
		return run
	case hs > rs:
		return host
	}
	out := host
	switch host.Kind {
	case GateBlock:
		out.Reason = run.Reason
	case GateSchedule:
		out.Delay = max(host.Delay, run.Delay)
	case GateRequireConfirmation:
		out.Timeout = shorterTimeout(host.Timeout, run.Timeout)
		out.Approvals = max(host.Approvals, run.Approvals)
	}
	if out.CorrelationID == "" {
		out.CorrelationID = run.CorrelationID
	}
	return out
}

// shorterTimeout returns the shorter of two approval timeouts, where zero means no
// deadline.
func shorterTimeout(a, b Duration) Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}
