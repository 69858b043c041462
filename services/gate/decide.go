package gate

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// decision is the gate chain's answer for one call, before it is applied to the call record.
// Exactly one of its forms is set:
//   - outcome: a permission decision of the chain (narrowing, run policy, host policy, host
//     fixed result). It is recorded on the call and audited once.
//   - client: the tool is client-executed; the call parks without consulting any gate and
//     without an audit record (as in the original, which bypasses the gate too).
//   - unknown: the tool is not visible to the model or not registered on any executor; the
//     call completes with "unknown tool: {id}". Nothing is audited because no policy
//     decided; visibility and availability can only remove a call, never allow one.
type decision struct {
	outcome *contracts.GateOutcome
	client  bool
	unknown bool
	// invalid is set when the call's arguments are a string that holds no JSON object
	// ([contracts.ArgumentsError]): the call completes with this model-visible error and
	// nothing is audited — no policy decided, and no human is asked about a call that
	// cannot run.
	invalid *contracts.ToolError
	// bound is set when a schedule outcome names an action kind the run may not perform:
	// the call ends Indeterminate with this reason and the run ends (capability_bound).
	bound string
}

// pauseMemo holds the pauses one handler has read, by tool id, so that decisions made
// together (a probe's) read each tool's pause once.
type pauseMemo map[string]*contracts.ToolPause

// decideNow reads whether call i's tool is paused and runs the gate chain for it. The
// pause is read at every decision (or once per tool for the decisions a memo groups),
// from the leader of the pauses bucket (see [pipeline.Env.ToolPaused]), so a pause the
// api acknowledged applies to every decision that starts after the acknowledgement.
//
// The decision runs in a gate.decide span on the batch's trace, naming the call
// (gen_ai.tool.name, gen_ai.tool.call.id) and what was decided (awaken.decision, and
// awaken.decision.reason when the outcome has one).
func (s *Service) decideNow(ctx context.Context, b *contracts.BatchRecord, i int, memo pauseMemo) (decision, error) {
	ctx, span := s.env.Telemetry.StartSpan(ctx, telemetry.SpanGateDecide)
	defer span.End()
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(telemetry.CallAttributes(&b.Submission, i)...)
	}
	toolID := b.Submission.Calls[i].ToolID
	pause, read := memo[toolID]
	if !read {
		var err error
		if pause, err = s.env.ToolPaused(ctx, toolID); err != nil {
			span.SetStatus(codes.Error, err.Error())
			return decision{}, fmt.Errorf("gate: %w", err)
		}
		if memo != nil {
			memo[toolID] = pause
		}
	}
	d := s.decide(b, i, pause)
	if recording {
		span.SetAttributes(attribute.String("awaken.decision", d.label()))
		if d.outcome != nil && d.outcome.Reason != "" {
			span.SetAttributes(attribute.String("awaken.decision.reason", d.outcome.Reason))
		}
	}
	return d, nil
}

// label names d on its gate.decide span: the audit label of a permission outcome
// (allow, deny, set_result, ask, schedule), else what decided without a policy.
func (d decision) label() string {
	switch {
	case d.bound != "":
		return "capability_bound"
	case d.outcome != nil:
		return d.outcome.AuditLabel()
	case d.client:
		return "client_executed"
	case d.unknown:
		return "unknown_tool"
	case d.invalid != nil:
		return "invalid_arguments"
	}
	return contracts.AuditDecisionUnknown
}

// decide runs the gate chain for call i of b, whose tool is paused when pause is not nil.
// It is a pure function of the immutable batch record, the pause, the host configuration
// and the host and run policies, so a decision made twice from the same inputs (for
// example by a probe that crashed before recording it) is the same decision; a pause or
// resume in between may change an unrecorded decision, never a recorded one.
//
// The chain:
//  0. a paused tool (the operator's kill switch) blocks every new call of it that would
//     otherwise be decided — client-executed calls included — with the pause's reason
//     ([contracts.ToolPause.BlockReason]); a call of a tool the model cannot see or no
//     executor registers still completes as an unknown tool;
//  1. a visible, registered call whose arguments are a string holding no JSON object
//     completes with "invalid tool arguments: …" (the submission kept the string so that
//     this one call, not the batch, carries the error);
//  2. client-executed tools skip the gate and park (they still have to be visible);
//  3. narrowing deny_all blocks with [contracts.DenyAllReason];
//  4. the run policy of the submission and the host policy — where no host rule matches
//     an MCP tool of a server with trust_annotations, its annotations replace the host's
//     default_behavior (read-only: allow, destructive: ask) — composed by
//     [contracts.NarrowGateOutcome]: the stricter outcome wins (block > ask > schedule >
//     allow) and, on the same kind, the stricter parameters (longer delay, shorter approval
//     timeout). A run policy arrives inside a submission, so it may only narrow what the
//     host allows: taken literally, the original's "first non-Allow wins" would let a run's
//     schedule turn the host's ask into a call that runs with no human, and a run's ask
//     override the host's deny. A run policy that does not compile blocks the call with the
//     compile error as reason — it never crashes the gate and never fails open;
//  5. visibility and availability: a tool the model cannot see, or that no executor
//     registers, completes as "unknown tool: {id}" — whatever allow, ask or schedule the
//     policies said, so a human is never asked to approve a call that cannot run;
//  6. the host's fixed result (a tool configured with set_result) replaces Allow.
func (s *Service) decide(b *contracts.BatchRecord, i int, pause *contracts.ToolPause) decision {
	sub := &b.Submission
	call := sub.Calls[i]
	pin := b.Pinned[i]
	available := pin.Known && visible(b, i)

	if pause != nil && available {
		outcome := pause.GateOutcome()
		return decision{outcome: &outcome}
	}

	if available {
		if err := contracts.ArgumentsError(call.Arguments); err != nil {
			return decision{invalid: err}
		}
	}

	if pin.Known && pin.Kind == contracts.KindClientExecuted {
		if !available {
			return decision{unknown: true}
		}
		return decision{client: true}
	}

	outcome := s.policyChain(b, call)
	if outcome.Kind == contracts.GateBlock {
		return decision{outcome: &outcome}
	}
	if !available {
		return decision{unknown: true}
	}
	switch outcome.Kind {
	case contracts.GateAllow:
		if fixed, ok := s.fixedResult(call); ok {
			outcome = contracts.GateOutcome{Kind: contracts.GateSetResult, Output: &fixed}
		}
	case contracts.GateRequireConfirmation:
		outcome.CorrelationID = contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID)
		outcome.PolicyDigest = contracts.PolicyDigest(s.hostConfig, sub.Policy)
		if outcome.Approvals == 1 {
			outcome.Approvals = 0 // one approval is the default; record it one way only
		}
	case contracts.GateSchedule:
		if reason, bound := capabilityBound(sub, outcome); bound {
			return decision{bound: reason}
		}
		outcome.CorrelationID = contracts.CorrelationID(contracts.ReasonScheduledAction, sub.RunID, sub.Step, call.CallID)
		outcome.PolicyDigest = contracts.PolicyDigest(s.hostConfig, sub.Policy)
	}
	return decision{outcome: &outcome}
}

// policyChain evaluates narrowing, then the host policy narrowed by the run policy, for call. The
// correlation id handed to the policies is a placeholder: [Service.decide] sets the final
// one from the outcome's kind, because the kind decides the ticket's reason.
func (s *Service) policyChain(b *contracts.BatchRecord, call contracts.ToolCall) contracts.GateOutcome {
	sub := &b.Submission
	if sub.Narrowing.DeniesAll() {
		return contracts.GateOutcome{Kind: contracts.GateBlock, Reason: contracts.DenyAllReason}
	}
	corr := contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID)
	annotated, _ := s.env.Config.AnnotationBehavior(call.ToolID)
	host := s.host.ExplainWithDefault(call, corr, annotated).Verdict.IntoGateOutcome()
	if sub.Policy == nil {
		return host
	}
	run, err := s.runPolicies.get(contracts.BatchKey(sub.RunID, sub.Step), *sub.Policy)
	if err != nil {
		return contracts.GateOutcome{Kind: contracts.GateBlock, Reason: fmt.Sprintf("invalid run policy: %v", err)}
	}
	return contracts.NarrowGateOutcome(host, run.Evaluate(call, corr).IntoGateOutcome())
}

// fixedResult returns the host's fixed output for call when its tool is configured with
// set_result.
func (s *Service) fixedResult(call contracts.ToolCall) (contracts.ToolOutput, bool) {
	t, ok := s.env.Config.Tool(call.ToolID)
	if !ok || t.SetResult == nil {
		return contracts.ToolOutput{}, false
	}
	if t.SetResult.IsError {
		return contracts.ErrorOutput(call.CallID, t.SetResult.Text), true
	}
	return contracts.TextOutput(call.CallID, t.SetResult.Text), true
}

// entryCheck validates the call's pinned recovery policy against the tool's current
// effective capability, read from the trusted configuration (configuration
// can only match or reduce capability). A tool that vanished from the configuration since
// the batch was pinned, or a sandbox tool while the sandbox is disabled, counts as
// non_recoverable, and a pin without a known target (a
// corrupted record) fails closed. It runs before every entry into an executor: a failure
// completes the call with "tool execution failed: …" instead.
func (s *Service) entryCheck(pin contracts.PinnedCall, toolID string) error {
	if pin.Target != contracts.TargetBrain && pin.Target != contracts.TargetSandbox {
		return fmt.Errorf("tool %s has no trusted execution target (pinned %q)", toolID, pin.Target)
	}
	return pin.Policy.Validate(s.env.Config.CurrentCapability(pin, toolID))
}
