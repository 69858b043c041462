package gate

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/awaken-dev/awaken/internal/gatechain"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// decision is the gate chain's answer for one call ([gatechain.Decision]), before it is
// applied to the call record. Exactly one of its forms is set:
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
	// slotWait names the concurrency limit with no free slot for an allowed call: it
	// enters execution without its input and waits (slots.go).
	slotWait string
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
	// The host limits run last, on the chain's outcome: they only ever hold a call back
	// (block, or ask for a budget's overrun), and account only calls that may run.
	if d.outcome != nil {
		o, err := s.limits.Apply(ctx, b, i, d.outcome)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			return decision{}, err
		}
		d.outcome = o
	}
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

// decide runs the gate chain ([gatechain.Chain.Decide]) for call i of b, whose tool is
// paused when pause is not nil. It is a pure function of the immutable batch record, the
// pause, the host configuration and the host and run policies, so a decision made twice
// from the same inputs (for example by a probe that crashed before recording it) is the
// same decision; a pause or resume in between may change an unrecorded decision, never a
// recorded one.
func (s *Service) decide(b *contracts.BatchRecord, i int, pause *contracts.ToolPause) decision {
	d := s.chain().Decide(b, i, pause, s.runPolicy(b))
	return decision{outcome: d.Outcome, client: d.Client, unknown: d.Unknown, invalid: d.Invalid, bound: d.Bound}
}

// chain is the gate chain over the host configuration and its compiled policy.
func (s *Service) chain() gatechain.Chain {
	return gatechain.Chain{Config: s.env.Config, Host: s.host}
}

// runPolicy is b's compiled run policy (from the cache), or the zero value when the
// submission has none.
func (s *Service) runPolicy(b *contracts.BatchRecord) gatechain.RunPolicy {
	sub := &b.Submission
	if sub.Policy == nil {
		return gatechain.RunPolicy{}
	}
	p, err := s.runPolicies.get(contracts.BatchKey(sub.RunID, sub.Step), *sub.Policy)
	return gatechain.RunPolicy{Policy: p, Err: err}
}

// policyChain evaluates narrowing, then the host policy narrowed by the run policy, for
// call (an approval's edited arguments are gated again with it).
func (s *Service) policyChain(b *contracts.BatchRecord, call contracts.ToolCall) contracts.GateOutcome {
	return s.chain().Policies(b, call, s.runPolicy(b))
}

// fixedResult returns the host's fixed output for call when its tool is configured with
// set_result.
func (s *Service) fixedResult(call contracts.ToolCall) (contracts.ToolOutput, bool) {
	return s.chain().FixedResult(call)
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
