package contracts

import (
	"errors"
	"testing"
)

// TestShadowRulesTakeNoPartInTheDecision: a shadow rule is compiled and validated like any
// rule but never decides; ShadowDecisions evaluates the policy once per matching shadow
// rule with that rule alone in force, so specificity and the absolute live deny still apply.
func TestShadowRulesTakeNoPartInTheDecision(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorAllow, Rules: []PolicyRule{
		{Pattern: "Bash", Behavior: BehaviorAsk},                                 // 0 live
		{Pattern: "Bash(rm *)", Behavior: BehaviorDeny, Shadow: true},            // 1
		{Pattern: "Bash(ls *)", Behavior: BehaviorAllow, Shadow: true},           // 2 more specific than 0
		{Pattern: "Bash*", Behavior: BehaviorAllow, Shadow: true},                // 3 less specific than 0
		{Pattern: "deploy", Behavior: BehaviorDeny},                              // 4 live
		{Pattern: "deploy", Behavior: BehaviorAllow, Shadow: true},               // 5 under a live deny
		{Pattern: "later", Behavior: BehaviorSchedule, Delay: 5e9, Shadow: true}, // 6
		{Pattern: `x(path ~ "/etc/*")`, Behavior: BehaviorDeny, Shadow: true},    // 7 args
	}})

	type want struct {
		live   PermissionVerdictKind
		shadow map[int]PermissionVerdictKind
	}
	cases := []struct {
		tool, args string
		want       want
	}{
		{"Bash", `{"command":"rm -rf /"}`, want{VerdictRequireConfirmation, map[int]PermissionVerdictKind{1: VerdictDeny, 3: VerdictRequireConfirmation}}},
		{"Bash", `{"command":"ls /"}`, want{VerdictRequireConfirmation, map[int]PermissionVerdictKind{2: VerdictAllow, 3: VerdictRequireConfirmation}}},
		{"deploy", `{}`, want{VerdictDeny, map[int]PermissionVerdictKind{5: VerdictDeny}}},
		{"later", `{}`, want{VerdictAllow, map[int]PermissionVerdictKind{6: VerdictSchedule}}},
		{"x", `{"path":"/etc/passwd"}`, want{VerdictAllow, map[int]PermissionVerdictKind{7: VerdictDeny}}},
		{"x", `{"path":"/tmp/a"}`, want{VerdictAllow, nil}},
		{"other", `{}`, want{VerdictAllow, nil}},
	}
	for _, c := range cases {
		call := toolCall(c.tool, c.args)
		if got := p.Evaluate(call, "corr").Kind; got != c.want.live {
			t.Errorf("%s %s: live %s, want %s (shadow rules must not decide)", c.tool, c.args, got, c.want.live)
		}
		got := map[int]PermissionVerdictKind{}
		for _, sd := range p.ShadowDecisions(call, "corr", "") {
			got[sd.RuleIndex] = sd.Decision.Verdict.Kind
			if sd.Pattern != p.RulePattern(sd.RuleIndex) || sd.Pattern == "" {
				t.Errorf("%s: shadow rule %d reported pattern %q", c.tool, sd.RuleIndex, sd.Pattern)
			}
		}
		if len(got) != len(c.want.shadow) {
			t.Errorf("%s %s: shadow decisions %v, want %v", c.tool, c.args, got, c.want.shadow)
			continue
		}
		for i, k := range c.want.shadow {
			if got[i] != k {
				t.Errorf("%s %s: shadow rule %d would %s, want %s", c.tool, c.args, i, got[i], k)
			}
		}
	}
	if sd := p.ShadowDecisions(toolCall("Bash", `{`), "corr", ""); sd != nil {
		t.Errorf("invalid arguments: shadow decisions %v, want none (the call is denied whatever the rules say)", sd)
	}
}

// TestShadowRuleIsValidatedLikeAnyRule: marking a rule shadow does not excuse a bad
// pattern or a misplaced delay; the error names the rule.
func TestShadowRuleIsValidatedLikeAnyRule(t *testing.T) {
	for _, r := range []PolicyRule{
		{Pattern: "Bash(", Behavior: BehaviorDeny, Shadow: true},
		{Pattern: "Bash", Behavior: BehaviorDeny, Delay: 5e9, Shadow: true},
	} {
		_, err := CompilePolicy(PolicyConfig{Rules: []PolicyRule{{Pattern: "ok", Behavior: BehaviorAllow}, r}})
		var pe *PolicyError
		if !errors.As(err, &pe) || pe.Field[:8] != "rules[1]" {
			t.Errorf("%+v: error %v, want a PolicyError naming rules[1]", r, err)
		}
	}
}
