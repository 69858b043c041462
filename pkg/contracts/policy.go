package contracts

import (
	"fmt"
	"strconv"

	"github.com/awaken-dev/awaken/pkg/contracts/toolpattern"
)

// MaxPolicyRules bounds the rules of one policy. Per-run policies arrive inside submissions,
// and every call is matched against every rule, so the bound caps the work one submission
// can demand of the gate.
const MaxPolicyRules = 1024

// PolicyError reports a [PolicyConfig] that does not compile. Field is the path of the
// offending field in the configuration ("default_behavior", "mode", "rules[2].pattern",
// "rules[0].delay", ...). Err is the underlying error when there is one (a
// [*toolpattern.Error] for a bad pattern), so errors.As can reach it.
type PolicyError struct {
	Field string
	Msg   string
	Err   error
}

// Error names the field and the problem.
func (e *PolicyError) Error() string {
	return "permission policy: " + e.Field + ": " + e.Msg
}

// Unwrap returns the underlying error, if any.
func (e *PolicyError) Unwrap() error { return e.Err }

// DecisionBasis says what decided a [PolicyDecision].
type DecisionBasis string

const (
	// BasisRule: a matching rule decided (RuleIndex names it).
	BasisRule DecisionBasis = "rule"
	// BasisMode: the mode decided (bypassPermissions allowed, or plan denied an unmatched call).
	BasisMode DecisionBasis = "mode"
	// BasisDefault: no rule matched and the default behaviour decided.
	BasisDefault DecisionBasis = "default"
	// BasisDenyAll: the policy is [DenyAllTools].
	BasisDenyAll DecisionBasis = "deny_all"
	// BasisInvalidArguments: the call's arguments are not valid JSON, so no argument rule
	// could be evaluated and the call is denied (fail closed).
	BasisInvalidArguments DecisionBasis = "invalid_arguments"
	// BasisNoPolicy: the policy is nil; the call is denied (fail closed).
	BasisNoPolicy DecisionBasis = "no_policy"
)

// PolicyDecision is a verdict together with what produced it, for audit records and tests.
type PolicyDecision struct {
	Verdict ToolPermissionVerdict
	// Basis says what decided.
	Basis DecisionBasis
	// RuleIndex is the index in PolicyConfig.Rules of the deciding rule when Basis is
	// BasisRule, else -1.
	RuleIndex int
}

// Policy is a compiled rule-based permission policy, the Go port of awaken-ext-permission.
// It decides each tool call from the call alone (tool id and arguments),
// with no run, thread or credential data.
//
// Decision, in order:
//  1. Rules are scanned in configuration order. The first matching deny rule denies the
//     call at once, whatever its specificity and whatever the mode: a deny is absolute.
//  2. Mode bypassPermissions allows every call that no deny rule matched.
//     DEVIATION from the original, on purpose: there bypassPermissions allowed before any
//     rule was read, so it overrode explicit deny rules. Operators of
//     peer systems asked for exactly this change: bypass skips confirmations, never an
//     explicit deny.
//  3. Among matching allow, ask and schedule rules, the one with strictly greater
//     [toolpattern.Specificity] replaces the one kept so far, so on a tie the first rule
//     wins. The kept rule decides: allow ⇒ Allow; ask ⇒ RequireConfirmation with the
//     caller's correlation id and the rule's Timeout; schedule ⇒ Schedule with the
//     correlation id and the rule's Delay.
//  4. No rule matched: mode plan denies (plan fails closed, whatever default_behavior
//     says); modes default and acceptEdits apply default_behavior (ask carries no timeout).
//
// Shadow rules ([PolicyRule.Shadow]) take no part in these steps; [Policy.ShadowDecisions]
// evaluates each with that rule alone in force, for the audit.
//
// Every deny has the reason "tool {tool_id} denied by policy". Arguments that are not valid
// JSON are denied outright (no argument rule could be evaluated on them, and a deny rule
// must not fail open).
//
// Policies are not intersected rule by rule. The gate evaluates the host policy and the
// per-run policy separately and composes the two outcomes with [NarrowGateOutcome]: the
// stricter outcome and, on the same kind, the stricter parameters win, so a per-run policy
// can only narrow what the host policy grants.
//
// A Policy is immutable after [CompilePolicy]; Evaluate is safe for concurrent use and is
// a pure function of the call and the configuration. A nil *Policy denies every call.
type Policy struct {
	defaultBehavior PolicyBehavior
	mode            PolicyMode
	rules           []policyRule
	// shadows counts the shadow rules, so a policy without any skips looking for them.
	shadows int
	// limits are the compiled host limits; the gate accounts them in the limits ledger.
	limits        []Limit
	denyAll       bool
	denyAllReason string
}

type policyRule struct {
	pattern  toolpattern.Pattern
	spec     toolpattern.Specificity
	behavior PolicyBehavior
	delay    Duration
	timeout  Duration
	// actionKind is a schedule rule's action kind.
	actionKind string
	// approvals is an ask rule's number of distinct approvals.
	approvals int
	// source is the pattern as configured, for audit records and reports.
	source string
	// shadow marks a log-only rule: [Policy.ExplainWithDefault] skips it, and
	// [Policy.ShadowDecisions] evaluates the policy with it in force.
	shadow bool
}

// CompilePolicy validates cfg and compiles it. An empty default_behavior means ask and an
// empty mode means default. Every error is a [*PolicyError] naming the field:
//   - default_behavior must be allow, ask or deny (schedule needs a delay, which only a
//     rule has);
//   - mode must be default, acceptEdits, plan or bypassPermissions;
//   - every rule needs a pattern that parses and a behavior of allow, ask, deny or
//     schedule; a schedule rule needs a delay > 0; a delay is rejected on any other rule
//     and a timeout or approvals (1 to [MaxApprovals]) on any rule but ask, because they
//     would silently mean nothing;
//   - at most [MaxPolicyRules] rules.
func CompilePolicy(cfg PolicyConfig) (*Policy, error) {
	p := &Policy{defaultBehavior: cfg.DefaultBehavior, mode: cfg.Mode}
	switch cfg.DefaultBehavior {
	case "":
		p.defaultBehavior = BehaviorAsk
	case BehaviorAllow, BehaviorAsk, BehaviorDeny:
	case BehaviorSchedule:
		return nil, &PolicyError{Field: "default_behavior",
			Msg: `"schedule" is not allowed as a default (it needs a delay; use a rule with behavior schedule)`}
	default:
		return nil, &PolicyError{Field: "default_behavior",
			Msg: fmt.Sprintf("unknown behavior %q (want allow, ask or deny)", cfg.DefaultBehavior)}
	}
	switch cfg.Mode {
	case "":
		p.mode = ModeDefault
	case ModeDefault, ModeAcceptEdits, ModePlan, ModeBypassPermissions:
	default:
		return nil, &PolicyError{Field: "mode",
			Msg: fmt.Sprintf("unknown mode %q (want default, acceptEdits, plan or bypassPermissions)", cfg.Mode)}
	}
	if len(cfg.Rules) > MaxPolicyRules {
		return nil, &PolicyError{Field: "rules",
			Msg: fmt.Sprintf("%d rules, more than the limit of %d", len(cfg.Rules), MaxPolicyRules)}
	}
	p.rules = make([]policyRule, 0, len(cfg.Rules))
	for i, r := range cfg.Rules {
		field := "rules[" + strconv.Itoa(i) + "]"
		pat, err := toolpattern.Parse(r.Pattern)
		if err != nil {
			return nil, &PolicyError{Field: field + ".pattern", Msg: err.Error(), Err: err}
		}
		switch r.Behavior {
		case BehaviorAllow, BehaviorAsk, BehaviorDeny, BehaviorSchedule:
		case "":
			return nil, &PolicyError{Field: field + ".behavior", Msg: "missing (want allow, ask, deny or schedule)"}
		default:
			return nil, &PolicyError{Field: field + ".behavior",
				Msg: fmt.Sprintf("unknown behavior %q (want allow, ask, deny or schedule)", r.Behavior)}
		}
		switch {
		case r.Delay < 0:
			return nil, &PolicyError{Field: field + ".delay", Msg: fmt.Sprintf("negative delay %s", r.Delay)}
		case r.Behavior == BehaviorSchedule && r.Delay == 0:
			return nil, &PolicyError{Field: field + ".delay", Msg: "a schedule rule needs a delay > 0"}
		case r.Behavior != BehaviorSchedule && r.Delay != 0:
			return nil, &PolicyError{Field: field + ".delay",
				Msg: fmt.Sprintf("a delay applies only to behavior schedule, not %q", r.Behavior)}
		}
		switch {
		case r.Timeout < 0:
			return nil, &PolicyError{Field: field + ".timeout", Msg: fmt.Sprintf("negative timeout %s", r.Timeout)}
		case r.Behavior != BehaviorAsk && r.Timeout != 0:
			return nil, &PolicyError{Field: field + ".timeout",
				Msg: fmt.Sprintf("a timeout applies only to behavior ask, not %q", r.Behavior)}
		}
		if r.ActionKind != "" && r.Behavior != BehaviorSchedule {
			return nil, &PolicyError{Field: field + ".action_kind",
				Msg: fmt.Sprintf("an action kind applies only to behavior schedule, not %q", r.Behavior)}
		}
		switch {
		case r.Approvals < 0 || r.Approvals > MaxApprovals:
			return nil, &PolicyError{Field: field + ".approvals", Msg: fmt.Sprintf("%d approvals (want 1 to %d)", r.Approvals, MaxApprovals)}
		case r.Approvals != 0 && r.Behavior != BehaviorAsk:
			return nil, &PolicyError{Field: field + ".approvals",
				Msg: fmt.Sprintf("approvals apply only to behavior ask, not %q", r.Behavior)}
		}
		p.rules = append(p.rules, policyRule{
			pattern:    pat,
			spec:       pat.Specificity(),
			behavior:   r.Behavior,
			delay:      r.Delay,
			timeout:    r.Timeout,
			actionKind: r.ActionKind,
			approvals:  r.Approvals,
			source:     r.Pattern,
			shadow:     r.Shadow,
		})
		if r.Shadow {
			p.shadows++
		}
	}
	limits, err := compileLimits(cfg.Limits)
	if err != nil {
		return nil, err
	}
	p.limits = limits
	return p, nil
}

// DenyAllTools returns a policy that denies every call with reason (or, if reason is
// empty, "tools are disabled for this run"). It is the policy form of the run narrowing
// deny_all.
func DenyAllTools(reason string) *Policy {
	if reason == "" {
		reason = "tools are disabled for this run"
	}
	return &Policy{denyAll: true, denyAllReason: reason}
}

// Mode returns the policy's mode (ModeDefault for a zero Policy).
func (p *Policy) Mode() PolicyMode {
	if p == nil || p.mode == "" {
		return ModeDefault
	}
	return p.mode
}

// DefaultBehavior returns the behaviour for calls no rule matches (BehaviorAsk for a zero
// Policy).
func (p *Policy) DefaultBehavior() PolicyBehavior {
	if p == nil || p.defaultBehavior == "" {
		return BehaviorAsk
	}
	return p.defaultBehavior
}

// Evaluate decides call (see [Policy] for the rules). correlationID is copied into
// RequireConfirmation and Schedule verdicts; the gate derives it deterministically from the
// call so that a redelivered request yields the same ticket.
func (p *Policy) Evaluate(call ToolCall, correlationID string) ToolPermissionVerdict {
	return p.Explain(call, correlationID).Verdict
}

// Explain is [Policy.Evaluate] that also reports what decided.
func (p *Policy) Explain(call ToolCall, correlationID string) PolicyDecision {
	return p.ExplainWithDefault(call, correlationID, "")
}

// ExplainWithDefault is [Policy.Explain] with fallback in place of default_behavior for a
// call no rule matches (step 4 of [Policy] in modes default and acceptEdits; plan still
// denies and bypassPermissions still allows). An empty fallback keeps default_behavior.
// The gate passes the behaviour a trusted MCP server's annotations give the tool, so a
// host rule always wins over them. A fallback of schedule, which needs a delay, fails
// closed as a deny.
//
// Shadow rules ([PolicyRule.Shadow]) take no part: see [Policy.ShadowDecisions].
func (p *Policy) ExplainWithDefault(call ToolCall, correlationID string, fallback PolicyBehavior) PolicyDecision {
	return p.explain(call, correlationID, fallback, -1)
}

// ShadowDecision is what the policy decides of a call with one shadow rule in force.
type ShadowDecision struct {
	// RuleIndex is the shadow rule's index in PolicyConfig.Rules, Pattern its pattern as
	// configured.
	RuleIndex int
	Pattern   string
	Decision  PolicyDecision
}

// ShadowDecisions evaluates call once for every shadow rule that matches it, in rule
// order, as [Policy.ExplainWithDefault] would with that rule in force and every other
// shadow rule still off: a shadow rule that a more specific live rule outranks, or that a
// live deny overrides, decides nothing there, and its decision says so. It returns nil
// when no shadow rule matches, and for calls the policy denies whatever its rules say (a
// nil or deny-all policy, arguments that are not valid JSON).
func (p *Policy) ShadowDecisions(call ToolCall, correlationID string, fallback PolicyBehavior) []ShadowDecision {
	if p == nil || p.denyAll || p.shadows == 0 {
		return nil
	}
	var out []ShadowDecision
	var args *toolpattern.Args
	for i := range p.rules {
		r := &p.rules[i]
		if !r.shadow || !r.pattern.MatchesTool(call.ToolID) {
			continue
		}
		if args == nil {
			a, err := toolpattern.DecodeArgs(call.Arguments)
			if err != nil {
				return nil
			}
			args = a
		}
		if !r.pattern.MatchesArgs(args) {
			continue
		}
		out = append(out, ShadowDecision{RuleIndex: i, Pattern: r.source, Decision: p.explain(call, correlationID, fallback, i)})
	}
	return out
}

// RulePattern returns the pattern of rule i as configured ("" when there is no rule i).
func (p *Policy) RulePattern(i int) string {
	if p == nil || i < 0 || i >= len(p.rules) {
		return ""
	}
	return p.rules[i].source
}

// IsShadow reports whether rule i is a shadow rule.
func (p *Policy) IsShadow(i int) bool {
	return p != nil && i >= 0 && i < len(p.rules) && p.rules[i].shadow
}

// explain is [Policy.ExplainWithDefault] with shadow rule promote (an index, or -1 for
// none) in force; every other shadow rule is skipped.
func (p *Policy) explain(call ToolCall, correlationID string, fallback PolicyBehavior, promote int) PolicyDecision {
	deny := func(basis DecisionBasis, rule int, reason string) PolicyDecision {
		return PolicyDecision{
			Verdict:   ToolPermissionVerdict{Kind: VerdictDeny, Reason: reason},
			Basis:     basis,
			RuleIndex: rule,
		}
	}
	denyReason := "tool " + call.ToolID + " denied by policy"
	if p == nil {
		return deny(BasisNoPolicy, -1, denyReason+": no permission policy is configured")
	}
	if p.denyAll {
		return deny(BasisDenyAll, -1, p.denyAllReason)
	}

	// Decode the arguments once, and only if some rule that names this tool looks at them.
	var args *toolpattern.Args
	best := -1
	for i := range p.rules {
		r := &p.rules[i]
		if r.shadow && i != promote {
			continue
		}
		if !r.pattern.MatchesTool(call.ToolID) {
			continue
		}
		if r.pattern.LooksAtArgs() {
			if args == nil {
				a, err := toolpattern.DecodeArgs(call.Arguments)
				if err != nil {
					return deny(BasisInvalidArguments, -1, denyReason+": arguments are not valid JSON")
				}
				args = a
			}
			if !r.pattern.MatchesArgs(args) {
				continue
			}
		}
		if r.behavior == BehaviorDeny {
			return deny(BasisRule, i, denyReason)
		}
		if best < 0 || r.spec.Compare(p.rules[best].spec) > 0 {
			best = i
		}
	}
	if args == nil && !toolpattern.ValidArgs(call.Arguments) {
		// No rule needed the arguments, but a call with broken arguments is never allowed.
		return deny(BasisInvalidArguments, -1, denyReason+": arguments are not valid JSON")
	}

	switch p.Mode() {
	case ModeBypassPermissions:
		return PolicyDecision{Verdict: ToolPermissionVerdict{Kind: VerdictAllow}, Basis: BasisMode, RuleIndex: -1}
	case ModePlan:
		if best < 0 {
			return deny(BasisMode, -1, denyReason)
		}
	}
	if best >= 0 {
		r := &p.rules[best]
		v := behaviorVerdict(r.behavior, correlationID, r.delay, r.timeout, denyReason)
		switch v.Kind {
		case VerdictSchedule:
			v.ActionKind = r.actionKind
		case VerdictRequireConfirmation:
			v.Approvals = r.approvals
		}
		return PolicyDecision{
			Verdict:   v,
			Basis:     BasisRule,
			RuleIndex: best,
		}
	}
	def := p.DefaultBehavior()
	if fallback != "" {
		def = fallback
		if def == BehaviorSchedule {
			def = BehaviorDeny
		}
	}
	return PolicyDecision{
		Verdict:   behaviorVerdict(def, correlationID, 0, 0, denyReason),
		Basis:     BasisDefault,
		RuleIndex: -1,
	}
}

func behaviorVerdict(b PolicyBehavior, correlationID string, delay, timeout Duration, denyReason string) ToolPermissionVerdict {
	switch b {
	case BehaviorAllow:
		return ToolPermissionVerdict{Kind: VerdictAllow}
	case BehaviorAsk:
		return ToolPermissionVerdict{Kind: VerdictRequireConfirmation, CorrelationID: correlationID, Timeout: timeout}
	case BehaviorSchedule:
		return ToolPermissionVerdict{Kind: VerdictSchedule, CorrelationID: correlationID, Delay: delay}
	}
	// Deny, and anything a hand-built zero Policy could hold: fail closed.
	return ToolPermissionVerdict{Kind: VerdictDeny, Reason: denyReason}
}
