package contracts

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

var providerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestSafeToolName(t *testing.T) {
	long := "mcp__server__" + strings.Repeat("x", 80)
	ids := []string{
		"echo", "mcp__test__add", strings.Repeat("a", 64), // already safe: unchanged
		"mcp__everything__greet (structured)", "mcp__everything__greet [structured]", "mcp__everything__greet_structured_",
		"a b", "a_b", "a.b", "a:b", "é", "工具", long, long + "y", strings.Repeat("a", 65),
	}
	seen := map[string]string{}
	for _, id := range ids {
		n := SafeToolName(id)
		if !providerNameRE.MatchString(n) {
			t.Errorf("%q → %q is not provider-safe", id, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("%q and %q share the name %q", prev, id, n)
		}
		seen[n] = id
		if SafeToolName(id) != n {
			t.Errorf("%q: not deterministic", id)
		}
		if providerNameRE.MatchString(id) && n != id {
			t.Errorf("safe id %q renamed to %q", id, n)
		}
		list := func(yield func(string) bool) {
			for _, c := range ids {
				if !yield(c) {
					return
				}
			}
		}
		if got, ok := ResolveToolName(n, list); !ok || got != id {
			t.Errorf("ResolveToolName(%q) = %q, %v; want %q", n, got, ok, id)
		}
	}
	// The names are a pure function of the id: the same on every start (a golden value).
	if got := SafeToolName("mcp__everything__greet (structured)"); got != "mcp__everything__greet__structured__"+hash8("mcp__everything__greet (structured)") ||
		got != "mcp__everything__greet__structured__60b75007" {
		t.Errorf("golden name %q", got)
	}
	if _, ok := ResolveToolName("nope", func(yield func(string) bool) { yield("echo") }); ok {
		t.Error("an unknown name resolved")
	}
}

func hash8(id string) string { n := SafeToolName(id); return n[len(n)-8:] }

func TestStrictSchema(t *testing.T) {
	for _, tc := range []struct{ name, in, want, err string }{
		{"closes and requires every property",
			`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"object","properties":{"x":{"type":"integer"}}},"l":{"type":"array","items":{"type":"object","properties":{"y":{"type":"string"}}}}},"required":["b"]}`,
			`{"additionalProperties":false,"properties":{"a":{"additionalProperties":false,"properties":{"x":{"type":"integer"}},"required":["x"],"type":"object"},"b":{"type":"string"},"l":{"items":{"additionalProperties":false,"properties":{"y":{"type":"string"}},"required":["y"],"type":"object"},"type":"array"}},"required":["a","b","l"],"type":"object"}`, ""},
		{"no parameters", `{"type":"object","properties":{}}`, `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}`, ""},
		{"any object", `{}`, "", "declares no parameters schema"},
		{"not an object", `{"type":"string"}`, "", "not of type object"},
		{"object without properties", `{"type":"object"}`, "", "declares no properties"},
		{"open object", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`, "", "allows properties it does not declare"},
		{"open nested object", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}}}`, "", "parameters.m declares no properties"},
		{"oneOf", `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`, "", `uses "oneOf"`},
		{"allOf", `{"type":"object","allOf":[],"properties":{}}`, "", `uses "allOf"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StrictSchema(json.RawMessage(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %s, %v; want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s, %v\nwant %s", got, err, tc.want)
			}
		})
	}
}

// TestRenderCatalogFor_providerFormats: each provider format has the provider's own shape,
// safe names, the mapping, and strict only when asked.
func TestRenderCatalogFor_providerFormats(t *testing.T) {
	tools := []CatalogTool{
		{ID: "echo", Description: "Echoes.", Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{ID: "mcp__e__greet (structured)", Description: "Greets.", Parameters: json.RawMessage(`{}`)},
		{ID: "paused", Parameters: json.RawMessage(`{}`), Paused: true},
	}
	render := func(req ToolsRequest) string {
		doc, err := RenderCatalogFor(tools, req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(doc)
		return string(b)
	}
	greet := SafeToolName("mcp__e__greet (structured)")
	names := `"names":{"echo":"echo","` + greet + `":"mcp__e__greet (structured)"}`
	if got, want := render(ToolsRequest{Format: CatalogFormatOpenAIResponses}),
		`{"tools":[{"type":"function","name":"echo","description":"Echoes.","parameters":{"type":"object","properties":{"text":{"type":"string"}}}},`+
			`{"type":"function","name":"`+greet+`","description":"Greets.","parameters":{}}],`+names+`}`; got != want {
		t.Errorf("openai-responses\n got %s\nwant %s", got, want)
	}
	if got, want := render(ToolsRequest{Format: CatalogFormatOpenAIResponses, Strict: true}),
		`{"tools":[{"type":"function","name":"echo","description":"Echoes.","parameters":{"additionalProperties":false,"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"},"strict":true},`+
			`{"type":"function","name":"`+greet+`","description":"Greets.","parameters":{},"strict":false}],`+names+
			`,"not_strict":{"`+greet+`":"the tool declares no parameters schema: any object is accepted, which a closed schema would refuse"}}`; got != want {
		t.Errorf("openai-responses strict\n got %s\nwant %s", got, want)
	}
	if got := render(ToolsRequest{Format: CatalogFormatOpenAI}); !strings.HasPrefix(got, `{"tools":[{"type":"function","function":{"name":"echo",`) || !strings.Contains(got, names) {
		t.Errorf("openai %s", got)
	}
	if got, want := render(ToolsRequest{Format: CatalogFormatAnthropic, Strict: true}),
		`{"tools":[{"name":"echo","description":"Echoes.","input_schema":{"type":"object","properties":{"text":{"type":"string"}}}},`+
			`{"name":"`+greet+`","description":"Greets.","input_schema":{}}],`+names+`}`; got != want {
		t.Errorf("anthropic\n got %s\nwant %s", got, want)
	}
	if got := render(ToolsRequest{Format: CatalogFormatMCP}); !strings.Contains(got, `"name":"mcp__e__greet (structured)"`) {
		t.Errorf("mcp keeps the ids: %s", got)
	}
	if _, err := RenderCatalogFor(tools, ToolsRequest{Format: "yaml"}); err == nil {
		t.Error("unknown format accepted")
	}
}
