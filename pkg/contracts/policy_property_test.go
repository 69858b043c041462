package contracts

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts/toolpattern"
	"pgregory.net/rapid"
)

// A small universe of tools, arguments and patterns that overlap a lot, so random policies
// have many matching rules of many specificities.
var (
	propTools = []string{"Bash", "Read", "Edit", "mcp__github__create", "mcp__slack__post", "Deploy"}
	propArgs  = []string{
		`{}`, `null`,
		`{"command":"npm install"}`, `{"command":"rm -rf /"}`, `{"command":"git status"}`,
		`{"command":"ls","cwd":"/tmp"}`,
		`{"file_path":"/etc/passwd"}`, `{"file_path":"src/main.go"}`, `{"file_path":"src/a/b.go"}`,
		`{"env":"prod","items":[{"name":"x"},{"name":"y"}]}`, `{"env":"dev","items":[]}`,
	}
	propPatterns = []string{
		"*", "Bash", "Read", "Edit", "Deploy", "mcp__*", "mcp__github__*", "Re?d", "[BR]*", "*t",
		"Bash(*)", "Bash(npm *)", "Bash(rm *)", "Bash(git status)", "Bash(*)", "*(npm *)",
		`Bash(command ~ "git *")`, `Bash(command = "ls")`, `Bash(command != "ls")`, `Bash(command !~ "rm *")`,
		`Bash(command = "ls", cwd ~ "/tmp*")`, `Edit(file_path ~ "/etc/*")`, `Edit(file_path ~ "src/**/*.go")`,
		`Edit(file_path = "src/main.go")`, `Deploy(env = "prod")`, `Deploy(items[*].name = "y")`,
		`Deploy(items[0].name != "x")`, `*(env ~ "*")`, `mcp__*(* ~ "*")`,
	}
	propBehaviors = []PolicyBehavior{BehaviorAllow, BehaviorAsk, BehaviorDeny, BehaviorSchedule}
	propModes     = []PolicyMode{ModeDefault, ModeAcceptEdits, ModePlan, ModeBypassPermissions}
	propDefaults  = []PolicyBehavior{BehaviorAllow, BehaviorAsk, BehaviorDeny}
)

func genRule(behaviors ...PolicyBehavior) *rapid.Generator[PolicyRule] {
	if len(behaviors) == 0 {
		behaviors = propBehaviors
	}
	return rapid.Custom(func(t *rapid.T) PolicyRule {
		r := PolicyRule{
			Pattern:  rapid.SampledFrom(propPatterns).Draw(t, "pattern"),
			Behavior: rapid.SampledFrom(behaviors).Draw(t, "behavior"),
		}
		switch r.Behavior {
		case BehaviorSchedule:
			r.Delay = Duration(time.Duration(rapid.IntRange(1, 600).Draw(t, "delay")) * time.Second)
		case BehaviorAsk:
			r.Timeout = Duration(time.Duration(rapid.IntRange(0, 600).Draw(t, "timeout")) * time.Second)
		}
		return r
	})
}

func genCall() *rapid.Generator[ToolCall] {
	return rapid.Custom(func(t *rapid.T) ToolCall {
		return ToolCall{
			CallID:    "c1",
			ToolID:    rapid.SampledFrom(propTools).Draw(t, "tool"),
			Arguments: json.RawMessage(rapid.SampledFrom(propArgs).Draw(t, "args")),
		}
	})
}

func genConfig(modes ...PolicyMode) *rapid.Generator[PolicyConfig] {
	if len(modes) == 0 {
		modes = propModes
	}
	return rapid.Custom(func(t *rapid.T) PolicyConfig {
		return PolicyConfig{
			DefaultBehavior: rapid.SampledFrom(propDefaults).Draw(t, "default"),
			Mode:            rapid.SampledFrom(modes).Draw(t, "mode"),
			Rules:           rapid.SliceOfN(genRule(), 0, 8).Draw(t, "rules"),
		}
	})
}

func compileOrFail(t *rapid.T, cfg PolicyConfig) *Policy {
	p, err := CompilePolicy(cfg)
	if err != nil {
		t.Fatalf("CompilePolicy(%+v): %v", cfg, err)
	}
	return p
}

func patternOf(t interface{ Fatalf(string, ...any) }, s string) toolpattern.Pattern {
	p, err := toolpattern.Parse(s)
	if err != nil {
		t.Fatalf("toolpattern.Parse(%q): %v", s, err)
	}
	return p
}

func insertRule(rs []PolicyRule, at int, r PolicyRule) []PolicyRule {
	out := append([]PolicyRule{}, rs[:at]...)
	out = append(out, r)
	return append(out, rs[at:]...)
}

// oracleVerdict restates the permission decision order (with the bypass deviation) directly over the
// public pattern API, as the specification Evaluate must agree with.
func oracleVerdict(cfg PolicyConfig, call ToolCall, corr string) ToolPermissionVerdict {
	denied := ToolPermissionVerdict{Kind: VerdictDeny, Reason: "tool " + call.ToolID + " denied by policy"}
	if _, err := toolpattern.DecodeArgs(call.Arguments); err != nil {
		denied.Reason += ": arguments are not valid JSON"
		return denied
	}
	var best *PolicyRule
	var bestSpec toolpattern.Specificity
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		pat, err := toolpattern.Parse(r.Pattern)
		if err != nil || !pat.Matches(call.ToolID, call.Arguments) {
			continue
		}
		if r.Behavior == BehaviorDeny {
			return denied
		}
		if best == nil || pat.Specificity().Compare(bestSpec) > 0 {
			best, bestSpec = r, pat.Specificity()
		}
	}
	mode, def := cfg.Mode, cfg.DefaultBehavior
	if mode == ModeBypassPermissions {
		return ToolPermissionVerdict{Kind: VerdictAllow}
	}
	if best == nil && mode == ModePlan {
		return denied
	}
	b, delay, timeout := def, Duration(0), Duration(0)
	if def == "" {
		b = BehaviorAsk
	}
	if best != nil {
		b, delay, timeout = best.Behavior, best.Delay, best.Timeout
	}
	switch b {
	case BehaviorAllow:
		return ToolPermissionVerdict{Kind: VerdictAllow}
	case BehaviorAsk:
		return ToolPermissionVerdict{Kind: VerdictRequireConfirmation, CorrelationID: corr, Timeout: timeout}
	case BehaviorSchedule:
		return ToolPermissionVerdict{Kind: VerdictSchedule, CorrelationID: corr, Delay: delay}
	}
	return denied
}

func TestPropEvaluateAgreesWithTheSpecification(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig().Draw(t, "cfg")
		call := genCall().Draw(t, "call")
		got := compileOrFail(t, cfg).Evaluate(call, "perm-c1")
		if want := oracleVerdict(cfg, call, "perm-c1"); got != want {
			t.Fatalf("Evaluate = %+v, specification says %+v", got, want)
		}
	})
}

// A matching deny rule is absorbing: whatever rules come before or after it, and in every
// mode (bypassPermissions included), the call is denied.
func TestPropMatchingDenyIsAbsorbing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		call := genCall().Draw(t, "call")
		var matching []string
		for _, s := range propPatterns {
			if patternOf(t, s).Matches(call.ToolID, call.Arguments) {
				matching = append(matching, s)
			}
		}
		deny := PolicyRule{Pattern: rapid.SampledFrom(matching).Draw(t, "deny"), Behavior: BehaviorDeny}
		cfg := genConfig().Draw(t, "cfg")
		cfg.Rules = insertRule(cfg.Rules, rapid.IntRange(0, len(cfg.Rules)).Draw(t, "at"), deny)
		v := compileOrFail(t, cfg).Evaluate(call, "c")
		if v.Kind != VerdictDeny || v.Reason != "tool "+call.ToolID+" denied by policy" {
			t.Fatalf("verdict %+v with a matching deny rule %q", v, deny.Pattern)
		}
	})
}

// Adding a rule anywhere never turns a deny caused by a deny rule into anything else.
func TestPropAddingARuleNeverLiftsARuleDeny(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig().Draw(t, "cfg")
		call := genCall().Draw(t, "call")
		before := compileOrFail(t, cfg).Explain(call, "c")
		if before.Verdict.Kind != VerdictDeny || before.Basis != BasisRule {
			t.Skip("not denied by a rule")
		}
		extra := genRule().Draw(t, "extra")
		cfg.Rules = insertRule(cfg.Rules, rapid.IntRange(0, len(cfg.Rules)).Draw(t, "at"), extra)
		after := compileOrFail(t, cfg).Explain(call, "c")
		if after.Verdict.Kind != VerdictDeny || after.Basis != BasisRule {
			t.Fatalf("adding %+v turned %+v into %+v", extra, before, after)
		}
	})
}

// A non-deny rule added at the end takes over a rule-decided call only if it matches and is
// strictly more specific; added at the front it takes over if it matches and is at least as
// specific (ties go to the first rule).
func TestPropOnlyStrictlyMoreSpecificNonDenyReplaces(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(ModeDefault, ModeAcceptEdits, ModePlan).Draw(t, "cfg")
		call := genCall().Draw(t, "call")
		before := compileOrFail(t, cfg).Explain(call, "c")
		if before.Basis != BasisRule || before.Verdict.Kind == VerdictDeny {
			t.Skip("not decided by a non-deny rule")
		}
		keptSpec := patternOf(t, cfg.Rules[before.RuleIndex].Pattern).Specificity()
		extra := genRule(BehaviorAllow, BehaviorAsk, BehaviorSchedule).Draw(t, "extra")
		extraPat := patternOf(t, extra.Pattern)
		matches := extraPat.Matches(call.ToolID, call.Arguments)
		cmp := extraPat.Specificity().Compare(keptSpec)

		atEnd := cfg
		atEnd.Rules = append(append([]PolicyRule{}, cfg.Rules...), extra)
		d := compileOrFail(t, atEnd).Explain(call, "c")
		wantIndex := before.RuleIndex
		if matches && cmp > 0 {
			wantIndex = len(cfg.Rules)
		}
		if d.Basis != BasisRule || d.RuleIndex != wantIndex {
			t.Fatalf("appending %+v (matches=%v cmp=%d): decided by %s rule %d, want rule %d", extra, matches, cmp, d.Basis, d.RuleIndex, wantIndex)
		}

		atFront := cfg
		atFront.Rules = insertRule(cfg.Rules, 0, extra)
		d = compileOrFail(t, atFront).Explain(call, "c")
		wantIndex = before.RuleIndex + 1
		if matches && cmp >= 0 {
			wantIndex = 0
		}
		if d.Basis != BasisRule || d.RuleIndex != wantIndex {
			t.Fatalf("prepending %+v (matches=%v cmp=%d): decided by %s rule %d, want rule %d", extra, matches, cmp, d.Basis, d.RuleIndex, wantIndex)
		}
	})
}

// Plan mode never yields Allow unless an allow rule matches the call explicitly.
func TestPropPlanModeNeverAllowsWithoutAnExplicitAllow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(ModePlan).Draw(t, "cfg")
		call := genCall().Draw(t, "call")
		if compileOrFail(t, cfg).Evaluate(call, "c").Kind != VerdictAllow {
			return
		}
		for _, r := range cfg.Rules {
			if r.Behavior == BehaviorAllow && patternOf(t, r.Pattern).Matches(call.ToolID, call.Arguments) {
				return
			}
		}
		t.Fatalf("plan mode allowed %+v with no matching allow rule in %+v", call, cfg.Rules)
	})
}

// Bypass mode yields exactly Allow or a rule deny.
func TestPropBypassAllowsUnlessARuleDenies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(ModeBypassPermissions).Draw(t, "cfg")
		call := genCall().Draw(t, "call")
		d := compileOrFail(t, cfg).Explain(call, "c")
		switch {
		case d.Verdict.Kind == VerdictAllow:
		case d.Verdict.Kind == VerdictDeny && d.Basis == BasisRule && cfg.Rules[d.RuleIndex].Behavior == BehaviorDeny:
		default:
			t.Fatalf("bypass gave %+v", d)
		}
	})
}
