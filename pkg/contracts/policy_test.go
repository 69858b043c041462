package contracts

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts/toolpattern"
)

func mustPolicy(t testing.TB, cfg PolicyConfig) *Policy {
	t.Helper()
	p, err := CompilePolicy(cfg)
	if err != nil {
		t.Fatalf("CompilePolicy: %v", err)
	}
	return p
}

func rules(pairs ...string) []PolicyRule {
	out := make([]PolicyRule, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, PolicyRule{Pattern: pairs[i], Behavior: PolicyBehavior(pairs[i+1])})
	}
	return out
}

func toolCall(tool, args string) ToolCall {
	return ToolCall{CallID: "call-1", ToolID: tool, Arguments: json.RawMessage(args)}
}

// decide evaluates and returns the verdict kind, for the behaviour tests that only care
// about the kind.
func decide(p *Policy, tool, args string) PermissionVerdictKind {
	return p.Evaluate(toolCall(tool, args), "perm-call-1").Kind
}

func expectKind(t *testing.T, p *Policy, tool, args string, want PermissionVerdictKind) {
	t.Helper()
	if got := decide(p, tool, args); got != want {
		t.Errorf("%s %s: verdict %q, want %q", tool, args, got, want)
	}
}

// The tests below follow awaken-ext-permission/tests/policy_behaviors.rs one behaviour each.

// policyCheck is a call a behaviour test evaluates and the verdict kind it wants.
type policyCheck struct {
	tool, args string
	want       PermissionVerdictKind
}

// TestPolicyBehaviours: the behaviours of awaken-ext-permission/tests/policy_behaviors.rs
// that a policy and the verdict kind of some calls state, one a row.
func TestPolicyBehaviours(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    PolicyConfig
		checks []policyCheck
	}{
		{"ExactToolMatchesAnyArgs", PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("Bash", "allow")}, []policyCheck{
			{"Bash", `{"command":"ls"}`, VerdictAllow},
			{"Bash", `{}`, VerdictAllow},
			{"Read", `{}`, VerdictDeny},
		}},
		{"GlobToolMatchesNamespace", PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("mcp__*", "allow")}, []policyCheck{
			{"mcp__github__issues", `{}`, VerdictAllow},
			{"read_file", `{}`, VerdictDeny},
		}},
		{"GlobQuestionMarkMatchesOneChar", PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("mcp_?_read", "allow")}, []policyCheck{
			{"mcp_a_read", `{}`, VerdictAllow},
			{"mcp_ab_read", `{}`, VerdictDeny},
			{"mcp__read", `{}`, VerdictDeny},
		}},
		{"GlobCharClassMatchesSet", PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("tool_[ab]", "allow")}, []policyCheck{
			{"tool_a", `{}`, VerdictAllow},
			{"tool_b", `{}`, VerdictAllow},
			{"tool_c", `{}`, VerdictDeny},
		}},
		{"SpecificDenyOverridesBroadAllow", PolicyConfig{Rules: rules("Bash", "allow", "Bash(rm *)", "deny")}, []policyCheck{
			{"Bash", `{"command":"rm -rf /"}`, VerdictDeny},
			{"Bash", `{"command":"ls -la"}`, VerdictAllow},
		}},
		{"MoreSpecificAllowBeatsAsk", PolicyConfig{Rules: rules("Bash", "ask", "Bash(npm *)", "allow")}, []policyCheck{
			{"Bash", `{"command":"npm install"}`, VerdictAllow},
			{"Bash", `{"command":"cargo build"}`, VerdictRequireConfirmation},
		}},
		{"DenyWinsAmidAllows", PolicyConfig{Rules: rules("Bash", "allow", "Bash(rm *)", "deny", "Bash(npm *)", "allow")}, []policyCheck{
			{"Bash", `{"command":"rm -rf /tmp"}`, VerdictDeny},
			{"Bash", `{"command":"npm install"}`, VerdictAllow},
		}},
		{"MCPGlobDenyAndDefaultFallThrough", PolicyConfig{Rules: rules("mcp__dangerous__*", "deny")}, []policyCheck{
			{"mcp__dangerous__execute", `{}`, VerdictDeny},
			{"mcp__safe__read", `{}`, VerdictRequireConfirmation},
		}},
		{"FieldConditionDenyByPath", PolicyConfig{Rules: rules(`Edit(file_path ~ "/etc/*")`, "deny")}, []policyCheck{
			{"Edit", `{"file_path":"/etc/passwd"}`, VerdictDeny},
			{"Edit", `{"file_path":"src/main.rs"}`, VerdictRequireConfirmation},
		}},
		{"NegatedDenyDoesNotCatchMissingField", PolicyConfig{Rules: rules(`Bash(command !~ "ls*")`, "deny")}, []policyCheck{
			{"Bash", `{"command":"rm -rf /"}`, VerdictDeny},
			{"Bash", `{"command":"ls -la"}`, VerdictRequireConfirmation},
			{"Bash", `{}`, VerdictRequireConfirmation},
		}},
		{"DefaultDenyAdmitsOnlyExplicitAllow", PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("Read", "allow")}, []policyCheck{
			{"Read", `{}`, VerdictAllow},
			{"Bash", `{}`, VerdictDeny},
			{"Edit", `{}`, VerdictDeny},
		}},
		{"PlanModeFailsClosed", PolicyConfig{
			DefaultBehavior: BehaviorAllow, // ignored for unmatched calls under plan
			Mode:            ModePlan,
			Rules:           rules("Read", "allow", "Bash(git *)", "ask", "Bash(rm *)", "deny"),
		}, []policyCheck{
			{"WebFetch", `{}`, VerdictDeny},
			{"Bash", `{"command":"ls"}`, VerdictDeny},
			// Matched rules still decide.
			{"Read", `{}`, VerdictAllow},
			{"Bash", `{"command":"git status"}`, VerdictRequireConfirmation},
			{"Bash", `{"command":"rm -rf /"}`, VerdictDeny},
		}},
		{"AcceptEditsFallsToDefault", PolicyConfig{Mode: ModeAcceptEdits, Rules: rules("Read", "allow")}, []policyCheck{
			{"Edit", `{"file_path":"src/x.rs"}`, VerdictRequireConfirmation},
			{"Read", `{}`, VerdictAllow},
		}},
		{"BypassAllowsButExplicitDenyWins", PolicyConfig{
			DefaultBehavior: BehaviorDeny,
			Mode:            ModeBypassPermissions,
			Rules: append(rules("Bash(rm *)", "deny", "Bash(git *)", "ask"),
				PolicyRule{Pattern: "Deploy", Behavior: BehaviorSchedule, Delay: Duration(time.Minute)}),
		}, []policyCheck{
			// Deviation from the original (which allowed here): an explicit deny still wins.
			{"Bash", `{"command":"rm -rf /"}`, VerdictDeny},
			// Everything else is allowed: unmatched calls, and calls whose matching rule is ask or
			// schedule.
			{"Bash", `{"command":"ls"}`, VerdictAllow},
			{"Bash", `{"command":"git push"}`, VerdictAllow},
			{"Deploy", `{}`, VerdictAllow},
			{"WebFetch", `{}`, VerdictAllow},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPolicy(t, tc.cfg)
			for _, c := range tc.checks {
				expectKind(t, p, c.tool, c.args, c.want)
			}
		})
	}
}

func TestPolicyBroadDenyBeatsSpecificAllowInAnyOrder(t *testing.T) {
	for _, order := range [][]PolicyRule{
		rules("Bash(npm *)", "allow", "Bash", "deny"),
		rules("Bash", "deny", "Bash(npm *)", "allow"),
	} {
		p := mustPolicy(t, PolicyConfig{Rules: order})
		expectKind(t, p, "Bash", `{"command":"npm install"}`, VerdictDeny)
	}
}

func TestPolicyRegexOperatorRejectedNamingOperator(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		naming  string
	}{
		{"regex operator", `Bash(command =~ "rm")`, `"=~"`},
		{"negated regex operator", `Bash(command !=~ "rm")`, `"!=~"`},
		{"regex tool name", `/mcp__.*/`, `regular-expression tool names`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompilePolicy(PolicyConfig{Rules: []PolicyRule{
				{Pattern: "Read", Behavior: BehaviorAllow},
				{Pattern: tt.pattern, Behavior: BehaviorDeny},
			}})
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *PolicyError", err)
			}
			if pe.Field != "rules[1].pattern" {
				t.Errorf("Field = %q, want rules[1].pattern", pe.Field)
			}
			var pat *toolpattern.Error
			if !errors.As(err, &pat) || pat.Pattern != tt.pattern {
				t.Errorf("error does not wrap a *toolpattern.Error for %q: %v", tt.pattern, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.naming) || !strings.Contains(msg, "rules[1].pattern") {
				t.Errorf("error %q does not name the field and %s", msg, tt.naming)
			}
			if !strings.Contains(msg, "not allowed in permission patterns") {
				t.Errorf("error %q does not say regular expressions are not allowed", msg)
			}
		})
	}
	// A glob field condition with ~ still compiles.
	mustPolicy(t, PolicyConfig{Rules: rules(`Bash(command ~ "rm *")`, "deny")})
}

func TestPolicyUnmatchedFallsToDefault(t *testing.T) {
	for _, def := range []PolicyBehavior{"", BehaviorAsk, BehaviorAllow, BehaviorDeny} {
		want := map[PolicyBehavior]PermissionVerdictKind{
			"": VerdictRequireConfirmation, BehaviorAsk: VerdictRequireConfirmation,
			BehaviorAllow: VerdictAllow, BehaviorDeny: VerdictDeny,
		}[def]
		p := mustPolicy(t, PolicyConfig{DefaultBehavior: def, Rules: rules("Read", "allow")})
		v := p.Evaluate(toolCall("Bash", `{"command":"echo hi"}`), "perm-call-1")
		if v.Kind != want {
			t.Errorf("default %q: verdict %q, want %q", def, v.Kind, want)
		}
		if v.Kind == VerdictRequireConfirmation && (v.CorrelationID != "perm-call-1" || v.Timeout != 0) {
			t.Errorf("default ask verdict %+v: want correlation id perm-call-1 and no timeout", v)
		}
	}
}

func TestPolicyScheduleRuleYieldsScheduleWithDelay(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{Rules: []PolicyRule{
		{Pattern: "Deploy", Behavior: BehaviorAllow},
		{Pattern: `Deploy(env = "prod")`, Behavior: BehaviorSchedule, Delay: Duration(90 * time.Second)},
	}})
	got := p.Evaluate(toolCall("Deploy", `{"env":"prod"}`), "perm-c7")
	want := ToolPermissionVerdict{Kind: VerdictSchedule, CorrelationID: "perm-c7", Delay: Duration(90 * time.Second)}
	if got != want {
		t.Errorf("verdict %+v, want %+v", got, want)
	}
	expectKind(t, p, "Deploy", `{"env":"dev"}`, VerdictAllow)
}

func TestPolicyAskWithTimeoutCarriesIt(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorAllow, Rules: []PolicyRule{
		{Pattern: "Bash(git push*)", Behavior: BehaviorAsk, Timeout: Duration(10 * time.Minute)},
	}})
	got := p.Evaluate(toolCall("Bash", `{"command":"git push origin"}`), "perm-c9")
	want := ToolPermissionVerdict{Kind: VerdictRequireConfirmation, CorrelationID: "perm-c9", Timeout: Duration(10 * time.Minute)}
	if got != want {
		t.Errorf("verdict %+v, want %+v", got, want)
	}
}

func TestPolicyEqualSpecificityFirstRuleWins(t *testing.T) {
	allowFirst := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("Bash(npm *)", "allow", "Bash(npm *)", "ask")})
	askFirst := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("Bash(npm *)", "ask", "Bash(npm *)", "allow")})
	expectKind(t, allowFirst, "Bash", `{"command":"npm install"}`, VerdictAllow)
	expectKind(t, askFirst, "Bash", `{"command":"npm install"}`, VerdictRequireConfirmation)
	// A primary glob and the equivalent field glob are equally specific (as in the original).
	fieldFirst := mustPolicy(t, PolicyConfig{Rules: rules(`Bash(command ~ "npm *")`, "allow", "Bash(npm *)", "ask")})
	expectKind(t, fieldFirst, "Bash", `{"command":"npm install"}`, VerdictAllow)
}

func TestPolicySpecificityOrdersNonDenyRules(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: []PolicyRule{
		{Pattern: "*", Behavior: BehaviorAsk},                                         // {2,0,0,0}
		{Pattern: "Bash", Behavior: BehaviorAllow},                                    // {3,0,0,0}
		{Pattern: "mcp__*(q = \"x\")", Behavior: BehaviorAllow},                       // {2,1,1,3}
		{Pattern: `Bash(command ~ "git *")`, Behavior: BehaviorAsk},                   // {3,1,1,2}
		{Pattern: `Bash(command = "git status")`, Behavior: BehaviorAllow},            // {3,1,1,3}
		{Pattern: `Bash(command ~ "git *", cwd ~ "/tmp/*")`, Behavior: BehaviorAllow}, // {3,1,2,4}
	}})
	tests := []struct {
		tool, args string
		rule       int
	}{
		{"Read", `{}`, 0},
		{"Bash", `{"command":"ls"}`, 1},
		{"mcp__db__x", `{"q":"x"}`, 2},
		{"Bash", `{"command":"git log"}`, 3},
		{"Bash", `{"command":"git status"}`, 4},
		{"Bash", `{"command":"git status","cwd":"/tmp/x"}`, 5},
	}
	for _, tt := range tests {
		d := p.Explain(toolCall(tt.tool, tt.args), "c")
		if d.Basis != BasisRule || d.RuleIndex != tt.rule {
			t.Errorf("%s %s: decided by %s rule %d, want rule %d", tt.tool, tt.args, d.Basis, d.RuleIndex, tt.rule)
		}
	}
}

func TestPolicyDenyReasonNamesTheTool(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("Bash(rm *)", "deny")})
	for _, c := range []ToolCall{toolCall("Bash", `{"command":"rm -rf /"}`), toolCall("Read", `{}`)} {
		v := p.Evaluate(c, "x")
		want := ToolPermissionVerdict{Kind: VerdictDeny, Reason: "tool " + c.ToolID + " denied by policy"}
		if v != want {
			t.Errorf("%s: verdict %+v, want %+v", c.ToolID, v, want)
		}
	}
	plan := mustPolicy(t, PolicyConfig{Mode: ModePlan})
	if v := plan.Evaluate(toolCall("Edit", `{}`), "x"); v.Reason != "tool Edit denied by policy" {
		t.Errorf("plan deny reason %q", v.Reason)
	}
}

func TestPolicyNullOrEmptyArgumentsAreAnEmptyObject(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorDeny, Rules: rules("T({})", "allow")})
	for _, args := range []string{``, `null`, ` null `, `{}`} {
		expectKind(t, p, "T", args, VerdictAllow)
	}
}

func TestPolicyInvalidArgumentsAreDenied(t *testing.T) {
	for _, mode := range []PolicyMode{ModeDefault, ModeBypassPermissions, ModePlan} {
		// Neither a tool-only allow nor bypass lets a call with broken arguments through:
		// no argument rule (in particular no deny) could have been evaluated on them.
		p := mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorAllow, Mode: mode,
			Rules: rules("Bash", "allow", `Bash(command ~ "rm *")`, "deny")})
		for _, args := range []string{`{"command":"rm -rf /"`, `{"a":1}x`, `nope`} {
			d := p.Explain(toolCall("Bash", args), "c")
			if d.Verdict.Kind != VerdictDeny || d.Basis != BasisInvalidArguments {
				t.Errorf("mode %s args %s: %+v, want an invalid-arguments deny", mode, args, d)
			}
		}
		// A call no rule looks at is still denied.
		if d := p.Explain(toolCall("Other", `{`), "c"); d.Basis != BasisInvalidArguments {
			t.Errorf("mode %s: unmatched tool with broken args: %+v", mode, d)
		}
	}
}

func TestDenyAllToolsDeniesEverything(t *testing.T) {
	p := DenyAllTools("tools are disabled for this Run")
	for _, c := range []ToolCall{toolCall("Read", `{}`), toolCall("mcp__x__y", `{"a":1}`), toolCall("", ``)} {
		d := p.Explain(c, "c")
		want := ToolPermissionVerdict{Kind: VerdictDeny, Reason: "tools are disabled for this Run"}
		if d.Verdict != want || d.Basis != BasisDenyAll {
			t.Errorf("%q: %+v, want %+v", c.ToolID, d, want)
		}
	}
	if v := DenyAllTools("").Evaluate(toolCall("Read", `{}`), "c"); v.Kind != VerdictDeny || v.Reason == "" {
		t.Errorf("DenyAllTools(\"\") verdict %+v, want a deny with a reason", v)
	}
}

func TestNilAndZeroPolicies(t *testing.T) {
	var nilPolicy *Policy
	if d := nilPolicy.Explain(toolCall("Read", `{}`), "c"); d.Verdict.Kind != VerdictDeny || d.Basis != BasisNoPolicy {
		t.Errorf("nil policy: %+v, want a deny", d)
	}
	if nilPolicy.Mode() != ModeDefault || nilPolicy.DefaultBehavior() != BehaviorAsk {
		t.Errorf("nil policy accessors: %s %s", nilPolicy.Mode(), nilPolicy.DefaultBehavior())
	}
	zero := &Policy{}
	if v := zero.Evaluate(toolCall("Read", `{}`), "c"); v.Kind != VerdictRequireConfirmation {
		t.Errorf("zero policy: %+v, want ask (the default default)", v)
	}
}

func TestCompilePolicyNormalisesDefaults(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{})
	if p.Mode() != ModeDefault || p.DefaultBehavior() != BehaviorAsk {
		t.Errorf("empty config: mode %q default %q, want default/ask", p.Mode(), p.DefaultBehavior())
	}
	p = mustPolicy(t, PolicyConfig{DefaultBehavior: BehaviorDeny, Mode: ModePlan})
	if p.Mode() != ModePlan || p.DefaultBehavior() != BehaviorDeny {
		t.Errorf("mode %q default %q", p.Mode(), p.DefaultBehavior())
	}
}

func TestCompilePolicyRejectsInvalidConfig(t *testing.T) {
	tooMany := make([]PolicyRule, MaxPolicyRules+1)
	for i := range tooMany {
		tooMany[i] = PolicyRule{Pattern: "Read", Behavior: BehaviorAllow}
	}
	tests := []struct {
		name  string
		cfg   PolicyConfig
		field string
		msg   string
	}{
		{"schedule default", PolicyConfig{DefaultBehavior: BehaviorSchedule}, "default_behavior", `"schedule" is not allowed as a default`},
		{"unknown default", PolicyConfig{DefaultBehavior: "deni"}, "default_behavior", `unknown behavior "deni"`},
		{"unknown mode", PolicyConfig{Mode: "bypasspermissions"}, "mode", `unknown mode "bypasspermissions"`},
		{"too many rules", PolicyConfig{Rules: tooMany}, "rules", "more than the limit of 1024"},
		{"bad pattern", PolicyConfig{Rules: rules("Read", "allow", "Bash(npm *", "deny")}, "rules[1].pattern", `permission pattern "Bash(npm *"`},
		{"missing behavior", PolicyConfig{Rules: []PolicyRule{{Pattern: "Read"}}}, "rules[0].behavior", "missing"},
		{"unknown behavior", PolicyConfig{Rules: rules("Read", "denyy")}, "rules[0].behavior", `unknown behavior "denyy"`},
		{"schedule without delay", PolicyConfig{Rules: rules("Deploy", "schedule")}, "rules[0].delay", "needs a delay > 0"},
		{"negative delay", PolicyConfig{Rules: []PolicyRule{{Pattern: "D", Behavior: BehaviorSchedule, Delay: -1}}}, "rules[0].delay", "negative delay"},
		{"delay on allow", PolicyConfig{Rules: []PolicyRule{{Pattern: "D", Behavior: BehaviorAllow, Delay: Duration(time.Second)}}}, "rules[0].delay", `only to behavior schedule, not "allow"`},
		{"timeout on allow", PolicyConfig{Rules: []PolicyRule{{Pattern: "D", Behavior: BehaviorAllow, Timeout: Duration(time.Second)}}}, "rules[0].timeout", `only to behavior ask, not "allow"`},
		{"timeout on deny", PolicyConfig{Rules: []PolicyRule{{Pattern: "D", Behavior: BehaviorDeny, Timeout: Duration(time.Second)}}}, "rules[0].timeout", `not "deny"`},
		{"timeout on schedule", PolicyConfig{Rules: []PolicyRule{{Pattern: "D", Behavior: BehaviorSchedule, Delay: Duration(time.Second), Timeout: Duration(time.Second)}}}, "rules[0].timeout", `not "schedule"`},
		{"negative timeout", PolicyConfig{Rules: []PolicyRule{{Pattern: "D", Behavior: BehaviorAsk, Timeout: -1}}}, "rules[0].timeout", "negative timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CompilePolicy(tt.cfg)
			if err == nil {
				t.Fatalf("CompilePolicy succeeded: %+v", p)
			}
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *PolicyError", err, err)
			}
			if pe.Field != tt.field {
				t.Errorf("Field = %q, want %q", pe.Field, tt.field)
			}
			if !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to contain %q", pe.Msg, tt.msg)
			}
			if !strings.HasPrefix(err.Error(), "permission policy: "+tt.field+": ") {
				t.Errorf("Error() = %q does not start with the field path", err.Error())
			}
		})
	}
}

func TestCompilePolicyFromWireJSON(t *testing.T) {
	var cfg PolicyConfig
	wire := `{"default_behavior":"deny","mode":"acceptEdits","rules":[
		{"pattern":"Read","behavior":"allow"},
		{"pattern":"Bash(git push*)","behavior":"ask","timeout":"5m"},
		{"pattern":"Deploy","behavior":"schedule","delay":"30s"}]}`
	if err := json.Unmarshal([]byte(wire), &cfg); err != nil {
		t.Fatal(err)
	}
	p := mustPolicy(t, cfg)
	if v := p.Evaluate(toolCall("Bash", `{"command":"git push"}`), "c"); v.Timeout != Duration(5*time.Minute) {
		t.Errorf("ask verdict %+v, want a 5m timeout", v)
	}
	if v := p.Evaluate(toolCall("Deploy", `{}`), "c"); v.Kind != VerdictSchedule || v.Delay != Duration(30*time.Second) {
		t.Errorf("schedule verdict %+v", v)
	}
	expectKind(t, p, "Edit", `{}`, VerdictDeny)
}

func TestPolicyIsSafeForConcurrentUse(t *testing.T) {
	p := mustPolicy(t, PolicyConfig{Rules: rules("Bash", "allow", "Bash(rm *)", "deny", `Edit(path ~ "src/**")`, "ask")})
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				c := toolCall("Bash", `{"command":"rm -rf /"}`)
				if (g+i)%2 == 0 {
					c = toolCall("Edit", `{"path":"src/a/b.go"}`)
				}
				v := p.Evaluate(c, "c")
				if c.ToolID == "Bash" && v.Kind != VerdictDeny || c.ToolID == "Edit" && v.Kind != VerdictRequireConfirmation {
					t.Errorf("concurrent evaluation of %s gave %+v", c.ToolID, v)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}
