package contracts

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

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

func patternOf(t interface{ Fatalf(string, ...any) }, s string) ToolPattern {
	p, err := ParseToolPattern(s)
	if err != nil {
		t.Fatalf("ParseToolPattern(%q): %v", s, err)
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
	if _, err := decodeCallArgs(call.Arguments); err != nil {
		denied.Reason += ": arguments are not valid JSON"
		return denied
	}
	var best *PolicyRule
	var bestSpec Specificity
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		pat, err := ParseToolPattern(r.Pattern)
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

// oracleGlob is a direct, exponential-time statement of the glob semantics documented on
// ToolPattern, used to check the polynomial matcher on small inputs.
func oracleGlob(p string, text []rune, afterSlash bool) bool {
	if p == "" {
		return len(text) == 0
	}
	for _, cls := range []struct {
		src  string
		pred func(rune) bool
	}{
		{"[ab]", func(r rune) bool { return r == 'a' || r == 'b' }},
		{"[!a]", func(r rune) bool { return r != 'a' }},
		{"[a-b]", func(r rune) bool { return r >= 'a' && r <= 'b' }},
		{"[/]", func(r rune) bool { return r == '/' }},
	} {
		if strings.HasPrefix(p, cls.src) {
			return len(text) > 0 && cls.pred(text[0]) && oracleGlob(p[len(cls.src):], text[1:], false)
		}
	}
	switch p[0] {
	case '*':
		j := 0
		for j < len(p) && p[j] == '*' {
			j++
		}
		if j >= 2 && afterSlash && j < len(p) && p[j] == '/' {
			// `**/` as a whole segment: nothing, or anything that ends in '/'.
			rest := p[j+1:]
			if oracleGlob(rest, text, true) {
				return true
			}
			for i, r := range text {
				if r == '/' && oracleGlob(rest, text[i+1:], true) {
					return true
				}
			}
			return false
		}
		for i := 0; i <= len(text); i++ {
			if oracleGlob(p[j:], text[i:], false) {
				return true
			}
		}
		return false
	case '?':
		return len(text) > 0 && oracleGlob(p[1:], text[1:], false)
	case '\\':
		return len(p) > 1 && len(text) > 0 && text[0] == rune(p[1]) && oracleGlob(p[2:], text[1:], p[1] == '/')
	}
	return len(text) > 0 && text[0] == rune(p[0]) && oracleGlob(p[1:], text[1:], p[0] == '/')
}

func TestPropGlobAgreesWithBacktrackingOracle(t *testing.T) {
	// Each token with the strings it can stand for, so that texts built from a glob match it
	// often, exercising every path of the matcher, not only early rejection.
	type token struct {
		src   string
		texts []string
	}
	tokens := []token{
		{"a", []string{"a"}}, {"b", []string{"b"}}, {"/", []string{"/"}},
		{"*", []string{"", "a", "/", "ab/", "b/a"}}, {"**", []string{"", "a/b", "/"}},
		{"**/", []string{"", "/", "a/", "a/b/"}}, {"/**/", []string{"/", "/a/", "//"}},
		{"?", []string{"a", "/", "*"}}, {"[ab]", []string{"a", "b"}}, {"[!a]", []string{"b", "/"}},
		{"[a-b]", []string{"a", "b"}}, {"[/]", []string{"/"}}, {`\*`, []string{"*"}}, {`\/`, []string{"/"}},
	}
	alphabet := []rune("ab/*")
	rapid.Check(t, func(t *rapid.T) {
		picked := rapid.SliceOfN(rapid.SampledFrom(tokens), 0, 7).Draw(t, "glob")
		var glob, built strings.Builder
		for _, tok := range picked {
			glob.WriteString(tok.src)
			built.WriteString(rapid.SampledFrom(tok.texts).Draw(t, "piece"))
		}
		text := []rune(built.String())
		switch rapid.IntRange(0, 3).Draw(t, "edit") {
		case 1: // replace one character
			if len(text) > 0 {
				text[rapid.IntRange(0, len(text)-1).Draw(t, "at")] = rapid.SampledFrom(alphabet).Draw(t, "r")
			}
		case 2: // delete one character
			if len(text) > 0 {
				i := rapid.IntRange(0, len(text)-1).Draw(t, "at")
				text = append(text[:i], text[i+1:]...)
			}
		case 3: // insert one character
			i := rapid.IntRange(0, len(text)).Draw(t, "at")
			text = append(text[:i], append([]rune{rapid.SampledFrom(alphabet).Draw(t, "r")}, text[i:]...)...)
		}
		g, off, msg := compileGlob(glob.String())
		if msg != "" {
			t.Fatalf("compileGlob(%q): at %d: %s", glob.String(), off, msg)
		}
		if got, want := g.match(text), oracleGlob(glob.String(), text, true); got != want {
			t.Fatalf("glob %q on %q: matcher %v, oracle %v", glob.String(), string(text), got, want)
		}
	})
}

// Patterns assembled from random parts (names, globs, paths, values with quotes and
// backslashes) parse, and their canonical form parses back to the same pattern.
func TestPropPatternStringRoundTrips(t *testing.T) {
	idents := []string{"a", "b2", "file_path", "my-key", "0"}
	values := []string{"", "x", "a b", `say "hi"`, `back\slash`, `tail\`, "é*", "src/**/*.go", "[ab]?", `\*`}
	rapid.Check(t, func(t *rapid.T) {
		var b strings.Builder
		b.WriteString(rapid.SampledFrom([]string{"Bash", "mcp__*", "T?", "t_[ab]", "x.y"}).Draw(t, "tool"))
		switch rapid.IntRange(0, 3).Draw(t, "kind") {
		case 1:
			b.WriteString("(" + rapid.SampledFrom([]string{"*", "npm *", "*.txt", "(a) b", "echo \"x\"", " padded  "}).Draw(t, "primary") + ")")
		case 2:
			n := rapid.IntRange(1, 3).Draw(t, "conds")
			b.WriteString("(")
			for i := range n {
				if i > 0 {
					b.WriteString(rapid.SampledFrom([]string{",", ", ", " ,  "}).Draw(t, "comma"))
				}
				segs := rapid.IntRange(1, 4).Draw(t, "segs")
				for s := range segs {
					switch rapid.IntRange(0, 3).Draw(t, "seg") {
					case 0:
						if s > 0 {
							b.WriteString(".")
						}
						b.WriteString(rapid.SampledFrom(idents).Draw(t, "ident"))
					case 1:
						if s > 0 {
							b.WriteString(".")
						}
						b.WriteString("*")
					case 2:
						if s == 0 {
							b.WriteString(rapid.SampledFrom(idents).Draw(t, "ident"))
						}
						fmt.Fprintf(&b, "[%d]", rapid.IntRange(0, 99).Draw(t, "index"))
					case 3:
						if s == 0 {
							b.WriteString(rapid.SampledFrom(idents).Draw(t, "ident"))
						}
						b.WriteString("[*]")
					}
				}
				op := rapid.SampledFrom([]string{"~", "=", "!~", "!="}).Draw(t, "op")
				v := rapid.SampledFrom(values).Draw(t, "value")
				if (op == "~" || op == "!~") && strings.HasSuffix(v, `\`) {
					v += "x" // a glob may not end in a lone escape
				}
				quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v)
				b.WriteString(" " + op + ` "` + quoted + `"`)
			}
			b.WriteString(")")
		}
		src := b.String()
		p, err := ParseToolPattern(src)
		if err != nil {
			t.Fatalf("ParseToolPattern(%q): %v", src, err)
		}
		q, err := ParseToolPattern(p.String())
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", p.String(), src, err)
		}
		if !reflect.DeepEqual(p, q) || q.String() != p.String() {
			t.Fatalf("%q -> %q -> %q: patterns differ", src, p.String(), q.String())
		}
	})
}
