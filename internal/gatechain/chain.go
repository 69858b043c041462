// Package gatechain is the gate's decision chain as a pure function: from a batch record,
// one of its calls, the tool's pause, the host configuration and its compiled host policy,
// and the batch's run policy, it says what the gate decides of the call — and what each
// shadow rule would have made of it. The gate decides live calls with it; the policy
// backtest (`awaken policy test`, POST /v1/policy/test) replays recorded calls through it
// with another host configuration, so both answer alike by construction.
package gatechain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// CapabilityBoundPrefix starts the Indeterminate reason of the calls of a batch whose run
// ended because a schedule rule named an action kind the run may not perform.
const CapabilityBoundPrefix = "capability_bound: "

// Labels of a [contracts.ShadowFinding] whose would-be outcome is no permission decision.
const (
	// WouldUnknownTool: with the shadow rule in force the call would not have been blocked,
	// and its tool is not visible or not registered, so it would complete as an unknown tool.
	WouldUnknownTool = "unknown_tool"
	// WouldCapabilityBound: the shadow rule would schedule the call as an action kind the
	// run may not perform, ending the run.
	WouldCapabilityBound = "capability_bound"
)

// Chain is the gate chain bound to one host configuration: Config supplies the fixed
// results and the trusted MCP annotations, Host is Config's policy compiled.
type Chain struct {
	Config *config.Config
	Host   *contracts.Policy
}

// RunPolicy is a batch's compiled run policy, or the error compiling it produced; the
// zero value stands for a submission without a run policy.
type RunPolicy struct {
	Policy *contracts.Policy
	Err    error
}

// Decision is the chain's answer for one call. Exactly one of Outcome, Client, Unknown,
// Invalid and Bound is set:
//   - Outcome: a permission decision (pause, narrowing, the policies, a host fixed
//     result), recorded on the call and audited once; its Shadow holds the findings of the
//     shadow rules that match the call;
//   - Client: the tool is client-executed; the call parks without any gate or audit;
//   - Unknown: the tool is not visible to the model or not registered; the call completes
//     with "unknown tool: {id}" and nothing is audited;
//   - Invalid: the arguments are a string holding no JSON object; the call completes with
//     this model-visible error and nothing is audited;
//   - Bound: a schedule outcome names an action kind the run may not perform; the call
//     ends Indeterminate with this reason and the run ends (capability_bound).
type Decision struct {
	Outcome *contracts.GateOutcome
	Client  bool
	Unknown bool
	Invalid *contracts.ToolError
	Bound   string
	// Host is what the host policy alone decided, when the policies were consulted (nil
	// otherwise): reports name the host rule from it.
	Host *contracts.PolicyDecision
	// Narrowed is set when the run policy's outcome was stricter than the host's and so
	// decided.
	Narrowed bool
}

// Decide runs the gate chain for call i of b, whose tool is paused when pause is not nil,
// with run the batch's run policy. It is a pure function of its arguments, so a decision
// made twice from the same inputs is the same decision.
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
//     compile error as reason — it never crashes the gate and never fails open. Shadow rules of either policy take no part;
//     each one that matches the call is evaluated in force on its own, through steps 4–6,
//     and recorded as a finding on the outcome ([contracts.GateOutcome.Shadow]);
//  5. visibility and availability: a tool the model cannot see, or that no executor
//     registers, completes as "unknown tool: {id}" — whatever allow, ask or schedule the
//     policies said, so a human is never asked to approve a call that cannot run;
//  6. the host's fixed result (a tool configured with set_result) replaces Allow; a
//     schedule of an action kind the run may not perform binds the run; an ask or a
//     schedule records the [contracts.PolicyDigest] of the policies that decided it (the
//     host's is Config.Policy), which its ticket carries.
func (c Chain) Decide(b *contracts.BatchRecord, i int, pause *contracts.ToolPause, run RunPolicy) Decision {
	sub := &b.Submission
	call := sub.Calls[i]
	pin := b.Pinned[i]
	available := pin.Known && Visible(b, i)

	if pause != nil && available {
		outcome := pause.GateOutcome()
		return Decision{Outcome: &outcome}
	}
	if available {
		if err := contracts.ArgumentsError(call.Arguments); err != nil {
			return Decision{Invalid: err}
		}
	}
	if pin.Known && pin.Kind == contracts.KindClientExecuted {
		if !available {
			return Decision{Unknown: true}
		}
		return Decision{Client: true}
	}
	if o, stop := precheck(sub, run); stop {
		return Decision{Outcome: &o}
	}

	corr := placeholderCorrelation(sub, call)
	fallback, _ := c.Config.AnnotationBehavior(call.ToolID)
	host := c.Host.ExplainWithDefault(call, corr, fallback)
	var runOutcome *contracts.GateOutcome
	if run.Policy != nil {
		o := run.Policy.Evaluate(call, corr).IntoGateOutcome()
		runOutcome = &o
	}
	composed, narrowed := compose(host.Verdict.IntoGateOutcome(), runOutcome)
	d := c.finish(b, i, available, composed)
	d.Host, d.Narrowed = &host, narrowed
	if d.Outcome == nil {
		return d
	}

	var findings []contracts.ShadowFinding
	for _, sd := range c.Host.ShadowDecisions(call, corr, fallback) {
		o, _ := compose(sd.Decision.Verdict.IntoGateOutcome(), runOutcome)
		findings = append(findings, c.finding(b, i, available, contracts.ShadowPolicyHost, sd, o))
	}
	if run.Policy != nil {
		hostOutcome := host.Verdict.IntoGateOutcome()
		for _, sd := range run.Policy.ShadowDecisions(call, corr, "") {
			o, _ := compose(hostOutcome, ptr(sd.Decision.Verdict.IntoGateOutcome()))
			findings = append(findings, c.finding(b, i, available, contracts.ShadowPolicyRun, sd, o))
		}
	}
	if len(findings) > 0 {
		withShadow := *d.Outcome
		withShadow.Shadow = findings
		d.Outcome = &withShadow
	}
	return d
}

// Policies is steps 3 and 4 of [Chain.Decide] for call of b (without shadow findings):
// the outcome the policies give it. The gate gates an approval's edited arguments with it.
func (c Chain) Policies(b *contracts.BatchRecord, call contracts.ToolCall, run RunPolicy) contracts.GateOutcome {
	sub := &b.Submission
	if o, stop := precheck(sub, run); stop {
		return o
	}
	corr := placeholderCorrelation(sub, call)
	fallback, _ := c.Config.AnnotationBehavior(call.ToolID)
	host := c.Host.ExplainWithDefault(call, corr, fallback).Verdict.IntoGateOutcome()
	var runOutcome *contracts.GateOutcome
	if run.Policy != nil {
		runOutcome = ptr(run.Policy.Evaluate(call, corr).IntoGateOutcome())
	}
	o, _ := compose(host, runOutcome)
	return o
}

// FixedResult returns the host's fixed output for call when its tool is configured with
// set_result.
func (c Chain) FixedResult(call contracts.ToolCall) (contracts.ToolOutput, bool) {
	t, ok := c.Config.Tool(call.ToolID)
	if !ok || t.SetResult == nil {
		return contracts.ToolOutput{}, false
	}
	if t.SetResult.IsError {
		return contracts.ErrorOutput(call.CallID, t.SetResult.Text), true
	}
	return contracts.TextOutput(call.CallID, t.SetResult.Text), true
}

// CapabilityBound reports whether outcome defers a call of sub as a scheduled action of a
// kind the run may not perform (as in the original: a schedule with an action kind must be
// permitted by the run's environment, else the run ends with CapabilityBound, with no
// ticket and no execution). The run's permitted kinds are its snapshot's action_kinds. It
// returns the reason the run's unfinished calls are sealed with.
func CapabilityBound(sub *contracts.BatchSubmission, outcome contracts.GateOutcome) (string, bool) {
	if outcome.Kind != contracts.GateSchedule || outcome.ActionKind == "" ||
		slices.Contains(sub.Agent.ActionKinds, outcome.ActionKind) {
		return "", false
	}
	return fmt.Sprintf("%saction kind %q is not permitted for run %s", CapabilityBoundPrefix, outcome.ActionKind, sub.RunID), true
}

// IsCapabilityBoundReason reports whether reason is one [CapabilityBound] made.
func IsCapabilityBoundReason(reason string) bool {
	return strings.HasPrefix(reason, CapabilityBoundPrefix)
}

// Visible reports whether call i's tool is among the tools the model saw in the batch's
// agent snapshot.
func Visible(b *contracts.BatchRecord, i int) bool {
	return slices.Contains(b.Submission.Agent.Tools, b.Submission.Calls[i].ToolID)
}

// precheck is step 3 and the run policy's compile error: an outcome that stops the chain
// before any policy is evaluated.
func precheck(sub *contracts.BatchSubmission, run RunPolicy) (contracts.GateOutcome, bool) {
	if sub.Narrowing.DeniesAll() {
		return contracts.GateOutcome{Kind: contracts.GateBlock, Reason: contracts.DenyAllReason}, true
	}
	if run.Err != nil {
		return contracts.GateOutcome{Kind: contracts.GateBlock, Reason: fmt.Sprintf("invalid run policy: %v", run.Err)}, true
	}
	return contracts.GateOutcome{}, false
}

// placeholderCorrelation is the correlation id handed to the policies: [Chain.finish] sets
// the final one from the outcome's kind, because the kind decides the ticket's reason.
func placeholderCorrelation(sub *contracts.BatchSubmission, call contracts.ToolCall) string {
	return contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID)
}

// compose narrows host by run (nil: no run policy); narrowed reports that the run's
// stricter outcome decided.
func compose(host contracts.GateOutcome, run *contracts.GateOutcome) (out contracts.GateOutcome, narrowed bool) {
	if run == nil {
		return host, false
	}
	return contracts.NarrowGateOutcome(host, *run), run.Strictness() > host.Strictness()
}

// finish is steps 5 and 6 of [Chain.Decide] applied to the policies' outcome.
func (c Chain) finish(b *contracts.BatchRecord, i int, available bool, outcome contracts.GateOutcome) Decision {
	sub := &b.Submission
	call := sub.Calls[i]
	if outcome.Kind == contracts.GateBlock {
		return Decision{Outcome: &outcome}
	}
	if !available {
		return Decision{Unknown: true}
	}
	switch outcome.Kind {
	case contracts.GateAllow:
		if fixed, ok := c.FixedResult(call); ok {
			outcome = contracts.GateOutcome{Kind: contracts.GateSetResult, Output: &fixed}
		}
	case contracts.GateRequireConfirmation:
		outcome.CorrelationID = contracts.CorrelationID(contracts.ReasonPermission, sub.RunID, sub.Step, call.CallID)
		outcome.PolicyDigest = contracts.PolicyDigest(c.Config.Policy, sub.Policy)
		if outcome.Approvals == 1 {
			outcome.Approvals = 0 // one approval is the default; record it one way only
		}
	case contracts.GateSchedule:
		if reason, bound := CapabilityBound(sub, outcome); bound {
			return Decision{Bound: reason}
		}
		outcome.CorrelationID = contracts.CorrelationID(contracts.ReasonScheduledAction, sub.RunID, sub.Step, call.CallID)
		outcome.PolicyDigest = contracts.PolicyDigest(c.Config.Policy, sub.Policy)
	}
	return Decision{Outcome: &outcome}
}

// finding is the record of shadow decision sd of policy, whose policies' outcome is o.
func (c Chain) finding(b *contracts.BatchRecord, i int, available bool, policy string, sd contracts.ShadowDecision, o contracts.GateOutcome) contracts.ShadowFinding {
	f := contracts.ShadowFinding{Policy: policy, Rule: sd.Pattern, Index: sd.RuleIndex}
	switch d := c.finish(b, i, available, o); {
	case d.Outcome != nil:
		f.Would = d.Outcome.AuditLabel()
		f.Reason = d.Outcome.Reason
	case d.Bound != "":
		f.Would, f.Reason = WouldCapabilityBound, d.Bound
	default:
		f.Would = WouldUnknownTool
	}
	return f
}

func ptr[T any](v T) *T { return &v }
