package toolpattern

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func mustPattern(t testing.TB, s string) Pattern {
	t.Helper()
	p, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return p
}

func TestParseToolPatternAcceptsTheGrammar(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		canonical string
		spec      Specificity
	}{
		{"exact tool", "Bash", "Bash", Specificity{3, 0, 0, 0}},
		{"surrounding space ignored", " \t Bash \n", "Bash", Specificity{3, 0, 0, 0}},
		{"explicit any args", "Bash(*)", "Bash", Specificity{3, 0, 0, 0}},
		{"explicit any args with space", "Bash(  *  )", "Bash", Specificity{3, 0, 0, 0}},
		{"glob tool star", "mcp__github__*", "mcp__github__*", Specificity{2, 0, 0, 0}},
		{"glob tool question mark", "mcp_?_read", "mcp_?_read", Specificity{2, 0, 0, 0}},
		{"glob tool class", "tool_[ab]", "tool_[ab]", Specificity{2, 0, 0, 0}},
		{"primary glob", "Bash(npm *)", "Bash(npm *)", Specificity{3, 1, 1, 2}},
		{"primary glob without wildcard", "Bash(git status)", "Bash(git status)", Specificity{3, 1, 1, 2}},
		{"space before args", "Bash (npm *)", "Bash(npm *)", Specificity{3, 1, 1, 2}},
		{"primary trimmed", "Bash(   npm *   )", "Bash(npm *)", Specificity{3, 1, 1, 2}},
		{"primary starting with star", "Read(*.txt)", "Read(*.txt)", Specificity{3, 1, 1, 2}},
		{"primary star then text", "Bash(* --force)", "Bash(* --force)", Specificity{3, 1, 1, 2}},
		{"primary nested parens", "Bash(echo (a) b)", "Bash(echo (a) b)", Specificity{3, 1, 1, 2}},
		{"primary with quotes", `Bash(echo "hi")`, `Bash(echo "hi")`, Specificity{3, 1, 1, 2}},
		{"glob tool with primary", "mcp__*(x*)", "mcp__*(x*)", Specificity{2, 1, 1, 2}},
		{"field glob", `Edit(file_path ~ "src/**/*.rs")`, `Edit(file_path ~ "src/**/*.rs")`, Specificity{3, 1, 1, 2}},
		{"field exact", `Bash(command = "ls")`, `Bash(command = "ls")`, Specificity{3, 1, 1, 3}},
		{"field not glob", `Bash(command !~ "rm *")`, `Bash(command !~ "rm *")`, Specificity{3, 1, 1, 2}},
		{"field not exact", `Bash(command != "rm")`, `Bash(command != "rm")`, Specificity{3, 1, 1, 3}},
		{"operators without spaces", `T(f~"a",g="b")`, `T(f ~ "a", g = "b")`, Specificity{3, 1, 2, 5}},
		{"two conditions", `T(f1 ~ "a", f2 = "b")`, `T(f1 ~ "a", f2 = "b")`, Specificity{3, 1, 2, 5}},
		{"nested path any index", `Tool(a.b[*].c ~ "pat")`, `Tool(a.b[*].c ~ "pat")`, Specificity{3, 1, 1, 2}},
		{"specific index", `Tool(items[0] = "val")`, `Tool(items[0] = "val")`, Specificity{3, 1, 1, 3}},
		{"index chain", `Tool(m[1][*][2] = "v")`, `Tool(m[1][*][2] = "v")`, Specificity{3, 1, 1, 3}},
		{"leading key wildcard", `Tool(*.id = "val")`, `Tool(*.id = "val")`, Specificity{3, 1, 1, 3}},
		{"inner key wildcard", `Tool(a.*.b = "x")`, `Tool(a.*.b = "x")`, Specificity{3, 1, 1, 3}},
		{"bare key wildcard", `Tool(* = "x")`, `Tool(* = "x")`, Specificity{3, 1, 1, 3}},
		{"wildcard then index", `Tool(*[0] = "x")`, `Tool(*[0] = "x")`, Specificity{3, 1, 1, 3}},
		{"hyphenated field", `T(my-field ~ "x")`, `T(my-field ~ "x")`, Specificity{3, 1, 1, 2}},
		{"spaces inside path", `T( a . b [ 0 ] = "x" )`, `T(a.b[0] = "x")`, Specificity{3, 1, 1, 3}},
		{"escaped quote", `T(f = "say \"hi\"")`, `T(f = "say \"hi\"")`, Specificity{3, 1, 1, 3}},
		{"escaped backslash", `T(f = "a\\b")`, `T(f = "a\\b")`, Specificity{3, 1, 1, 3}},
		{"other escape kept verbatim", `T(f = "a\nb")`, `T(f = "a\\nb")`, Specificity{3, 1, 1, 3}},
		{"empty value", `T(f = "")`, `T(f = "")`, Specificity{3, 1, 1, 3}},
		{"unicode value", `T(f ~ "é*")`, `T(f ~ "é*")`, Specificity{3, 1, 1, 2}},
		{"glob tool with fields", `mcp__*(*.password ~ "*")`, `mcp__*(*.password ~ "*")`, Specificity{2, 1, 1, 2}},
		{"tool name with dots", "server.tool", "server.tool", Specificity{3, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPattern(t, tt.in)
			if got := p.String(); got != tt.canonical {
				t.Errorf("String() = %q, want %q", got, tt.canonical)
			}
			if got := p.Specificity(); got != tt.spec {
				t.Errorf("Specificity() = %+v, want %+v", got, tt.spec)
			}
			again := mustPattern(t, p.String())
			if !reflect.DeepEqual(p, again) {
				t.Errorf("re-parsing %q gives a different pattern", p.String())
			}
		})
	}
}

func TestParseToolPatternRejectsWithPosition(t *testing.T) {
	manyConds := "T(" + strings.TrimSuffix(strings.Repeat(`f = "x", `, MaxConditions+1), ", ") + ")"
	deepPath := "T(" + strings.TrimSuffix(strings.Repeat("a.", MaxPathDepth+1), ".") + ` = "x")`
	tests := []struct {
		name string
		in   string
		pos  int
		msg  string
	}{
		{"empty", "", 0, "empty pattern"},
		{"only space", "   ", 0, "empty pattern"},
		{"no tool name", "(x)", 0, "expected a tool name"},
		{"regex tool name", "/mcp__.*/", 0, `regular-expression tool names ("/…/") are not allowed`},
		{"regex operator", `Bash(command =~ "rm")`, 13, `regular-expression operator "=~" is not allowed in permission patterns`},
		{"negated regex operator", `Bash(command !=~ "rm")`, 13, `regular-expression operator "!=~" is not allowed in permission patterns`},
		{"regex operator without spaces", `Bash(command=~"rm")`, 12, `"=~"`},
		{"unclosed args", "Bash(npm *", 10, "expected ')' to close the arguments, found end of pattern"},
		{"empty args", "Bash()", 5, "empty argument pattern"},
		{"trailing text", "Bash extra", 5, `unexpected "extra" after the pattern`},
		{"text after args", "Bash(*)x", 7, `unexpected "x" after the pattern`},
		{"paren in tool name", "Bash)", 4, `unexpected ')' in tool name`},
		{"quote in tool name", `Bash"`, 4, `unexpected '"' in tool name`},
		{"unterminated value", `T(f = "unterminated)`, 6, "unterminated quoted value"},
		{"unterminated escape", `T(f = "end\`, 10, "unterminated escape"},
		{"unquoted value", `T(f = noquote)`, 6, `expected '"' to start the value, found 'n'`},
		{"unquoted value looking like a path", `Bash(ls ~/foo)`, 9, `expected '"' to start the value`},
		{"double equals", `T(f == "x")`, 5, `expected '"' to start the value, found '='`},
		{"trailing comma", `T(f = "x",)`, 10, "expected a field name, found ')'"},
		{"missing comma", `T(f = "x" g = "y")`, 10, "expected ')' to close the arguments, found 'g'"},
		{"empty path segment", `T(a. = "x")`, 5, "expected a field name, found '='"},
		{"bad index", `T(a[x] = "x")`, 4, "expected an array index or * in [ ]"},
		{"huge index", `T(a[99999999999] = "x")`, 4, "expected an array index"},
		{"unclosed index", `T(a[0 = "x")`, 3, `argument glob: unterminated character class "["`},
		{"unclosed index before a later bracket", `T(a[0 = "x", b[1] = "y")`, 6, "expected ']', found '='"},
		{"unterminated class in value", `T(f ~ "[a")`, 6, `value glob: unterminated character class "["`},
		{"trailing backslash in glob value", `T(f ~ "a\\")`, 6, `value glob: trailing "\" escapes nothing`},
		{"unterminated class in tool", "tool_[ab", 5, `tool name glob: unterminated character class "["`},
		{"reversed range in tool", "tool_[z-a]", 7, `character range 'z'-'a' is reversed`},
		{"unterminated class in primary", "Bash(x[)", 6, `argument glob: unterminated character class "["`},
		{"too long", strings.Repeat("a", MaxLength+1), MaxLength, "longer than 1024 bytes"},
		{"invalid utf-8", "Bash\xff", 4, "not valid UTF-8"},
		{"too many conditions", manyConds, 2 + MaxConditions*len(`f = "x", `), "more than 32 field conditions"},
		{"path too deep", deepPath, 2 + MaxPathDepth*2, "field path deeper than 32 segments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.in)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded", tt.in)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *Error", err, err)
			}
			if pe.Pattern != tt.in {
				t.Errorf("Pattern = %q, want %q", pe.Pattern, tt.in)
			}
			if pe.Pos != tt.pos {
				t.Errorf("Pos = %d, want %d (msg %q)", pe.Pos, tt.pos, pe.Msg)
			}
			if !strings.Contains(pe.Msg, tt.msg) {
				t.Errorf("Msg = %q, want it to contain %q", pe.Msg, tt.msg)
			}
			if !strings.Contains(err.Error(), "permission pattern ") || !strings.Contains(err.Error(), pe.Msg) {
				t.Errorf("Error() = %q does not name the pattern and the problem", err.Error())
			}
		})
	}
}

func TestToolPatternMatches(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		tool    string
		args    string
		want    bool
	}{
		// Tool names.
		{"exact matches", "Bash", "Bash", `{"command":"ls"}`, true},
		{"exact other tool", "Bash", "Read", `{}`, false},
		{"exact is case-sensitive", "Bash", "bash", `{}`, false},
		{"exact is not a prefix", "Bash", "BashX", `{}`, false},
		{"glob namespace", "mcp__*", "mcp__github__issues", `{}`, true},
		{"glob namespace other", "mcp__*", "read_file", `{}`, false},
		{"question mark one char", "mcp_?_read", "mcp_a_read", `{}`, true},
		{"question mark not two", "mcp_?_read", "mcp_ab_read", `{}`, false},
		{"class a", "tool_[ab]", "tool_a", `{}`, true},
		{"class b", "tool_[ab]", "tool_b", `{}`, true},
		{"class c", "tool_[ab]", "tool_c", `{}`, false},
		{"negated class", "tool_[!ab]", "tool_c", `{}`, true},
		{"negated class excludes", "tool_[!ab]", "tool_a", `{}`, false},
		{"range class", "tool_[a-c]", "tool_b", `{}`, true},
		{"zero pattern matches nothing", "", "", `{}`, false},

		// Primary glob.
		{"primary single key", "Bash(npm *)", "Bash", `{"command":"npm install"}`, true},
		{"primary single key miss", "Bash(npm *)", "Bash", `{"command":"git status"}`, false},
		{"primary star crosses slash", "Read(/etc/*)", "Read", `{"path":"/etc/ssh/sshd_config"}`, true},
		{"primary multi key stringified", "Bash(*npm*)", "Bash", `{"a":"npm","b":"x"}`, true},
		{"primary multi key stringified miss", "Bash(*cargo*)", "Bash", `{"a":"npm","b":"x"}`, false},
		{"primary canonical json sorted keys", `T({"a":1,"b":true})`, "T", `{ "b" : true, "a" : 1 }`, true},
		{"primary canonical json no html escaping", `T({"x":"<a&b>","y":null})`, "T", `{"y":null,"x":"<a&b>"}`, true},
		{"primary single number value", "T(42)", "T", `{"n":42}`, true},
		{"primary single bool value", "T(true)", "T", `{"f":true}`, true},
		{"primary single object value", `T({"x":1})`, "T", `{"o":{"x":1}}`, true},
		{"primary single null value is empty", "T(**)", "T", `{"o":null}`, true},
		{"primary single null value is not one char", "T(?*)", "T", `{"o":null}`, false},
		{"primary empty object", "T({})", "T", `{}`, true},
		{"primary null args are empty object", "T({})", "T", `null`, true},
		{"primary absent args are empty object", "T({})", "T", ``, true},
		{"primary non-object args", "T(npm *)", "T", `"npm ci"`, true},
		{"primary wrong tool", "Bash(npm *)", "Read", `{"command":"npm install"}`, false},

		// Field conditions.
		{"field glob", `Edit(file_path ~ "/etc/*")`, "Edit", `{"file_path":"/etc/passwd"}`, true},
		{"field glob miss", `Edit(file_path ~ "/etc/*")`, "Edit", `{"file_path":"src/main.rs"}`, false},
		{"field globstar zero dirs", `Edit(file_path ~ "src/**/*.rs")`, "Edit", `{"file_path":"src/main.rs"}`, true},
		{"field globstar deep", `Edit(file_path ~ "src/**/*.rs")`, "Edit", `{"file_path":"src/sub/lib.rs"}`, true},
		{"field globstar other root", `Edit(file_path ~ "src/**/*.rs")`, "Edit", `{"file_path":"tests/t.rs"}`, false},
		{"field exact", `Bash(command = "ls")`, "Bash", `{"command":"ls"}`, true},
		{"field exact miss", `Bash(command = "ls")`, "Bash", `{"command":"ls -la"}`, false},
		{"field not glob", `Bash(command !~ "rm *")`, "Bash", `{"command":"ls"}`, true},
		{"field not glob miss", `Bash(command !~ "rm *")`, "Bash", `{"command":"rm -rf /"}`, false},
		{"field not exact", `Bash(command != "rm")`, "Bash", `{"command":"ls"}`, true},
		{"field not exact miss", `Bash(command != "rm")`, "Bash", `{"command":"rm"}`, false},
		{"missing field glob", `Bash(command ~ "*")`, "Bash", `{}`, false},
		{"missing field exact", `Bash(command = "")`, "Bash", `{}`, false},
		{"missing field not glob", `Bash(command !~ "rm *")`, "Bash", `{}`, false},
		{"missing field not exact", `Bash(command != "rm")`, "Bash", `{"other":"x"}`, false},
		{"missing field with null args", `Bash(command != "rm")`, "Bash", `null`, false},
		{"null value is empty string", `T(f = "")`, "T", `{"f":null}`, true},
		{"null value is present", `T(f != "")`, "T", `{"f":null}`, false},
		{"integer as json text", `T(n = "5")`, "T", `{"n":5}`, true},
		{"float keeps its text", `T(n = "5")`, "T", `{"n":5.0}`, false},
		{"exponent keeps its text", `T(n = "1e3")`, "T", `{"n":1e3}`, true},
		{"big integer exact", `T(n = "12345678901234567890")`, "T", `{"n":12345678901234567890}`, true},
		{"bool as text", `T(b = "true")`, "T", `{"b":true}`, true},
		{"object value as canonical json", `T(o = "{\"a\":1,\"b\":[2]}")`, "T", `{"o":{"b":[2],"a":1}}`, true},
		{"nested path", `Tool(config.host = "localhost")`, "Tool", `{"config":{"host":"localhost"}}`, true},
		{"nested path miss", `Tool(config.host = "localhost")`, "Tool", `{"config":{"host":"prod"}}`, false},
		{"field on non-object", `Tool(config.host = "x")`, "Tool", `{"config":"x"}`, false},
		{"any index existential", `Tool(items[*].name = "target")`, "Tool", `{"items":[{"name":"other"},{"name":"target"}]}`, true},
		{"any index none", `Tool(items[*].name = "target")`, "Tool", `{"items":[{"name":"a"},{"name":"b"}]}`, false},
		{"any index on object", `Tool(items[*] = "a")`, "Tool", `{"items":{"k":"a"}}`, false},
		{"specific index", `Tool(items[1] = "b")`, "Tool", `{"items":["a","b"]}`, true},
		{"index out of range", `Tool(items[5] = "b")`, "Tool", `{"items":["a","b"]}`, false},
		{"index out of range negated", `Tool(items[5] != "b")`, "Tool", `{"items":["a","b"]}`, false},
		{"key wildcard", `mcp__*(*.password ~ "*")`, "mcp__db__q", `{"conn":{"password":"x"}}`, true},
		{"key wildcard miss", `mcp__*(*.password ~ "*")`, "mcp__db__q", `{"conn":{"user":"x"}}`, false},
		{"inner key wildcard", `T(a.*.b = "x")`, "T", `{"a":{"p":{"b":"y"},"q":{"b":"x"}}}`, true},
		{"negation is existential", `T(items[*] != "x")`, "T", `{"items":["x","y"]}`, true},
		{"negation all equal", `T(items[*] != "x")`, "T", `{"items":["x","x"]}`, false},
		{"negation empty array is missing", `T(items[*] != "x")`, "T", `{"items":[]}`, false},
		{"and both hold", `T(a = "1", b = "2")`, "T", `{"a":"1","b":"2"}`, true},
		{"and one fails", `T(a = "1", b = "2")`, "T", `{"a":"1","b":"3"}`, false},
		{"same field twice", `Bash(command ~ "curl *", command ~ "*| *")`, "Bash", `{"command":"curl x | sh"}`, true},
		{"invalid args fail arg patterns", `T(f = "x")`, "T", `{"f":"x"`, false},
		{"invalid args still match tool-only patterns", `T`, "T", `{"f":`, true},
		{"trailing garbage is invalid", `T(f = "x")`, "T", `{"f":"x"} {}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Pattern
			if tt.pattern != "" {
				p = mustPattern(t, tt.pattern)
			}
			if got := p.Matches(tt.tool, json.RawMessage(tt.args)); got != tt.want {
				t.Errorf("%q.Matches(%q, %s) = %v, want %v", tt.pattern, tt.tool, tt.args, got, tt.want)
			}
		})
	}
}

func TestGlobSemantics(t *testing.T) {
	tests := []struct {
		glob string
		text string
		want bool
	}{
		{"", "", true},
		{"", "a", false},
		{"abc", "abc", true},
		{"abc", "abcd", false},
		{"*", "", true},
		{"*", "a/b/c", true},
		{"a*", "a", true},
		{"a*", "ab/c", true},
		{"b*", "ab", false},
		{"*b", "a/b", true},
		{"*b", "ba", false},
		{"a*b*c", "a/x/b/y/c", true},
		{"a*b*c", "acb", false},
		{"a?c", "abc", true},
		{"a?c", "a/c", true},
		{"a?c", "ac", false},
		{"?", "é", true},
		{"é?", "éx", true},
		{"[ab]", "a", true},
		{"[ab]", "c", false},
		{"[!ab]", "c", true},
		{"[^ab]", "a", false},
		{"[a-c]", "b", true},
		{"[a-c]", "d", false},
		{"[]]", "]", true},
		{"[a-]", "-", true},
		{`[\]]`, "]", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`\?`, "?", true},
		{`a\b`, "ab", true},
		{"src/**/*.rs", "src/main.rs", true},
		{"src/**/*.rs", "src/a/b/c.rs", true},
		{"src/**/*.rs", "srcmain.rs", false},
		{"**/x", "x", true},
		{"**/x", "a/b/x", true},
		{"**/x", "ax", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/xb", false},
		{"a/**/b", "ab", false},
		{"a/**/**/b", "a/b", true},
		{"a/**/*", "a/", true},
		{"a/**", "a/", true},
		{"a/**", "a/b/c", true},
		{"a/**", "a", false},
		{"a**/b", "ab", false},
		{"a**/b", "a/b", true},
		{"/etc/*", "/etc/passwd", true},
		{"*a*a*a*a*b", strings.Repeat("a", 50) + "b", true},
		{"*a*a*a*a*b", strings.Repeat("a", 50), false},
	}
	for _, tt := range tests {
		t.Run(tt.glob+"~"+tt.text, func(t *testing.T) {
			g, off, msg := compileGlob(tt.glob)
			if msg != "" {
				t.Fatalf("compileGlob(%q): at %d: %s", tt.glob, off, msg)
			}
			if got := g.matchString(tt.text); got != tt.want {
				t.Errorf("glob %q on %q = %v, want %v", tt.glob, tt.text, got, tt.want)
			}
		})
	}
}

// TestGlobHostileInputStaysPolynomial runs inputs on which a backtracking matcher takes
// exponential time. It has no timing assertion: an exponential matcher never finishes,
// which the test binary's timeout reports.
func TestGlobHostileInputStaysPolynomial(t *testing.T) {
	glob := strings.Repeat("*a", 40) + "*b"
	g, _, msg := compileGlob(glob)
	if msg != "" {
		t.Fatal(msg)
	}
	text := strings.Repeat("a", 100_000)
	if g.matchString(text) {
		t.Fatal("matched a text without b")
	}
	if !g.matchString(text + "b") {
		t.Fatal("did not match a text ending in b")
	}
	dirs := strings.Repeat("**/a/", 20) + "b"
	g, _, msg = compileGlob(dirs)
	if msg != "" {
		t.Fatal(msg)
	}
	if g.matchString(strings.Repeat("a/", 50_000) + "xb") {
		t.Fatal("matched a path without b")
	}

	// A wide argument object walked by wildcards and matched by a hostile glob.
	obj := make(map[string]any, 2000)
	for i := range 2000 {
		obj[strings.Repeat("k", 1+i%7)+string(rune('a'+i%26))+strings.Repeat("x", i%5)] = []any{strings.Repeat("a", 200)}
	}
	args, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	p := mustPattern(t, `T(*[*] ~ "`+glob+`")`)
	if p.Matches("T", args) {
		t.Fatal("matched values without b")
	}
}

func TestSpecificityCompareIsLexicographic(t *testing.T) {
	tests := []struct {
		name string
		a, b Specificity
		want int
	}{
		{"equal", Specificity{3, 1, 1, 2}, Specificity{3, 1, 1, 2}, 0},
		{"tool kind dominates", Specificity{3, 0, 0, 0}, Specificity{2, 1, 9, 27}, 1},
		{"has args next", Specificity{2, 1, 0, 0}, Specificity{2, 0, 0, 0}, 1},
		{"conditions next", Specificity{3, 1, 1, 3}, Specificity{3, 1, 2, 4}, -1},
		{"precision last", Specificity{3, 1, 1, 2}, Specificity{3, 1, 1, 3}, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Compare(tt.b); got != tt.want {
				t.Errorf("Compare = %d, want %d", got, tt.want)
			}
			if got := tt.b.Compare(tt.a); got != -tt.want {
				t.Errorf("reverse Compare = %d, want %d", got, -tt.want)
			}
		})
	}
}
