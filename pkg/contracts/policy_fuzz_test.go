package contracts

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts/toolpattern"
)

var fuzzPatternSeeds = []string{
	"", "Bash", "  Bash  ", "Bash(*)", "Bash( * )", "mcp__github__*", "mcp_?_read", "tool_[ab]",
	"tool_[!a-c]", `tool_[\]]`, "Bash(npm *)", "Bash (npm *)", "Read(*.txt)", "Bash(* --force)",
	"Bash(echo (a) b)", `Bash(echo "x")`, `Edit(file_path ~ "src/**/*.rs")`, `Bash(command = "ls")`,
	`Bash(command !~ "rm *")`, `Bash(command != "rm")`, `T(f1 ~ "a", f2 = "b")`, `T(f~"a",g="b")`,
	`Tool(a.b[*].c ~ "pat")`, `Tool(items[0] = "val")`, `Tool(*.id = "val")`, `Tool(a.*.b = "x")`,
	`Tool(* = "x")`, `Tool(*[0] = "x")`, `T( a . b [ 0 ] = "x" )`, `T(f = "say \"hi\"")`,
	`T(f = "a\\b")`, `T(f = "a\nb")`, `T(f ~ "é*")`, `mcp__*(*.password ~ "*")`,
	// Rejected inputs.
	"(x)", "/mcp__.*/", `Bash(command =~ "rm")`, `Bash(command !=~ "rm")`, "Bash(npm *", "Bash()",
	"Bash extra", "Bash)", `T(f = "unterminated)`, `T(f = "end\`, `T(f = noquote)`, `Bash(ls ~/foo)`,
	`T(f = "x",)`, `T(a[99999999999] = "x")`, `T(a[0 = "x")`, `T(f ~ "[a")`, `T(f ~ "a\\")`,
	"tool_[z-a]", "Bash\xff", "Bash(((", "Bash(a))", `T(a.b.c.d[1][2][*].*.e != "\\\"")`,
}

// FuzzParseToolPattern: parsing never panics; a rejection is a *toolpattern.Error for the input
// with an in-range position; an accepted pattern's String() re-parses to an equal pattern,
// and matching it never panics.
func FuzzParseToolPattern(f *testing.F) {
	for _, s := range fuzzPatternSeeds {
		f.Add(s)
	}
	args := []json.RawMessage{
		json.RawMessage(`{"command":"npm install","items":[{"name":"x"}],"a":{"b":[{"c":"pat"}]}}`),
		json.RawMessage(`null`), json.RawMessage(`[1,"two",null,{"x":true}]`), json.RawMessage(`{`),
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := toolpattern.Parse(s)
		if err != nil {
			var pe *toolpattern.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *toolpattern.Error", err, err)
			}
			if pe.Pattern != s || pe.Pos < 0 || pe.Pos > len(s) || pe.Msg == "" {
				t.Fatalf("bad toolpattern.Error %+v for %q", pe, s)
			}
			return
		}
		canonical := p.String()
		q, err := toolpattern.Parse(canonical)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canonical, s, err)
		}
		if !reflect.DeepEqual(p, q) || q.String() != canonical {
			t.Fatalf("%q -> %q -> %q: patterns differ", s, canonical, q.String())
		}
		if p.Specificity() != q.Specificity() {
			t.Fatalf("specificity changed across the round trip of %q", s)
		}
		for _, a := range args {
			if p.Matches("Bash", a) != q.Matches("Bash", a) {
				t.Fatalf("%q and its canonical form disagree on %s", s, a)
			}
		}
	})
}

// fuzzPolicyConfig exercises every rule shape and behaviour.
var fuzzPolicyConfig = PolicyConfig{
	DefaultBehavior: BehaviorAsk,
	Rules: []PolicyRule{
		{Pattern: "Read", Behavior: BehaviorAllow},
		{Pattern: "Bash(npm *)", Behavior: BehaviorAllow},
		{Pattern: `Bash(command ~ "rm *")`, Behavior: BehaviorDeny},
		{Pattern: `Bash(command != "ls", cwd ~ "/tmp/**")`, Behavior: BehaviorAsk, Timeout: Duration(time.Minute)},
		{Pattern: `Edit(file_path ~ "src/**/*.go")`, Behavior: BehaviorAllow},
		{Pattern: `Edit(file_path ~ "/etc/*")`, Behavior: BehaviorDeny},
		{Pattern: `Deploy(items[*].env = "prod")`, Behavior: BehaviorSchedule, Delay: Duration(time.Hour)},
		{Pattern: `Deploy(items[0].n = "1")`, Behavior: BehaviorAllow},
		{Pattern: `mcp__*(*.password ~ "*")`, Behavior: BehaviorDeny},
		{Pattern: `*(a.*.b[*] !~ "x*")`, Behavior: BehaviorAsk},
		{Pattern: "mcp__github__*", Behavior: BehaviorAllow},
		{Pattern: "T({})", Behavior: BehaviorAllow},
	},
}

// FuzzPolicyEvaluate: evaluation of arbitrary tool ids and argument bytes never panics, in
// every mode, and agrees with the specification (oracleVerdict); arguments that are not
// JSON are always denied.
func FuzzPolicyEvaluate(f *testing.F) {
	for _, seed := range []struct{ tool, args string }{
		{"Read", `{}`}, {"Bash", `{"command":"npm install"}`}, {"Bash", `{"command":"rm -rf /"}`},
		{"Bash", `{"command":"cat","cwd":"/tmp/a/b"}`}, {"Edit", `{"file_path":"src/a/b.go"}`},
		{"Edit", `{"file_path":"/etc/passwd"}`}, {"Deploy", `{"items":[{"env":"dev"},{"env":"prod"}]}`},
		{"Deploy", `{"items":[{"n":1}]}`}, {"mcp__db__query", `{"conn":{"password":"hunter2"}}`},
		{"mcp__github__x", `{"a":{"k":{"b":["y","x1"]}}}`}, {"T", `null`}, {"T", ``}, {"T", `  `},
		{"Bash", `{"command":`}, {"Bash", `[1,2,{"command":"rm x"}]`}, {"Bash", `"rm -rf"`},
		{"Bash", `{"command":"rm x"} trailing`}, {"Bash", "{\"command\":\"\xff\"}"},
		{"", `{}`}, {"mcp__github__*", `{"a":1e400}`}, {"Bash", `{"command":null}`},
	} {
		f.Add(seed.tool, []byte(seed.args))
	}
	var policies []*Policy
	var configs []PolicyConfig
	for _, mode := range []PolicyMode{ModeDefault, ModeAcceptEdits, ModePlan, ModeBypassPermissions} {
		cfg := fuzzPolicyConfig
		cfg.Mode = mode
		p, err := CompilePolicy(cfg)
		if err != nil {
			f.Fatal(err)
		}
		policies, configs = append(policies, p), append(configs, cfg)
	}
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		call := ToolCall{CallID: "c", ToolID: tool, Arguments: json.RawMessage(args)}
		_, argErr := toolpattern.DecodeArgs(call.Arguments)
		for i, p := range policies {
			v := p.Evaluate(call, "perm-c")
			if want := oracleVerdict(configs[i], call, "perm-c"); v != want {
				t.Fatalf("mode %s: Evaluate(%q, %q) = %+v, specification says %+v", configs[i].Mode, tool, args, v, want)
			}
			if argErr != nil && v.Kind != VerdictDeny {
				t.Fatalf("mode %s: arguments %q are not JSON but the verdict is %+v", configs[i].Mode, args, v)
			}
		}
	})
}
