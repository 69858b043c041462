//go:build unix

package mcpbridge_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestToolCatalog runs the pipeline, the api and a real MCP server and reads the tool
// catalog through every door: each tool's schema comes from the one place it is defined
// (the typed tool's Go argument type, published by brain-exec; the configuration's
// parameters for a sandbox tool; the MCP server's inputSchema), in registry order, in
// the awaken, openai and mcp formats, narrowed like agent.tools.
func TestToolCatalog(t *testing.T) {
	log := newCallLog(t)
	ctx, c, get := startCatalogStack(t, `
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: {mode: replay_safe, max_attempts: 3}
  - id: wc
    description: Counts words.
    target: sandbox
    module: /nonexistent/wc.wasm
    parameters:
      type: object
      properties: {text: {type: string}}
      required: [text]
  - id: stub
    description: Fixed.
    set_result: {text: fixed}
executors:
  sandbox: {enabled: false}
  mcp:
    - {name: test, command: %q, args: ["-log", %q]}
`, serverBin, string(log))

	var cat contracts.ToolCatalog
	get("/v1/tools", &cat)
	var ids []string
	byID := map[string]contracts.CatalogTool{}
	for _, tl := range cat.Tools {
		ids = append(ids, tl.ID)
		byID[tl.ID] = tl
	}
	if len(ids) < 4 || !slices.Equal(ids[:3], []string{"echo", "wc", "stub"}) || !slices.Contains(ids, "mcp__test__add") {
		t.Fatalf("catalog ids %v: want echo, wc, stub (registry order), then the MCP server's tools", ids)
	}
	for _, c := range []struct{ id, want string }{
		{"echo", `"text"`}, // from EchoArgs, published by brain-exec
		{"wc", `"required":["text"]`},
		{"mcp__test__add", `"b"`}, // the MCP server's inputSchema
	} {
		if p := string(byID[c.id].Parameters); !strings.Contains(p, c.want) {
			t.Errorf("%s parameters %s lack %s", c.id, p, c.want)
		}
	}
	if e := byID["echo"]; e.Target != contracts.TargetBrain || e.Capability != contracts.CapabilityReplaySafe || e.Kind != contracts.KindRegular || e.Description == "" {
		t.Errorf("echo entry %+v", e)
	}
	if w := byID["wc"]; w.Target != contracts.TargetSandbox || w.Description != "Counts words." {
		t.Errorf("wc entry %+v", w)
	}

	var openai struct {
		Tools []contracts.OpenAITool `json:"tools"`
	}
	get("/v1/tools?format=openai&agent_tools=wc,mcp__test__add,nope", &openai)
	if len(openai.Tools) != 2 || openai.Tools[0].Type != "function" || openai.Tools[0].Function.Name != "wc" ||
		openai.Tools[1].Function.Name != "mcp__test__add" || !strings.Contains(string(openai.Tools[1].Function.Parameters), `"a"`) {
		t.Errorf("openai format narrowed to wc, mcp__test__add: %+v", openai.Tools)
	}
	var mcpDoc struct {
		Tools []contracts.MCPTool `json:"tools"`
	}
	get("/v1/tools?format=mcp&agent_tools=echo", &mcpDoc)
	if len(mcpDoc.Tools) != 1 || mcpDoc.Tools[0].Name != "echo" || !strings.Contains(string(mcpDoc.Tools[0].InputSchema), `"text"`) {
		t.Errorf("mcp format: %+v", mcpDoc.Tools)
	}

	// The micro door, through pkg/client.
	tools, err := c.Tools(ctx, "stub", "echo")
	if err != nil || len(tools) != 2 || tools[0].ID != "echo" || tools[1].ID != "stub" {
		t.Errorf("client.Tools: %v %+v", err, tools)
	}
	if _, err := c.ToolsDocument(ctx, "yaml", nil); err == nil {
		t.Error("an unknown format was accepted")
	}
}

// TestToolCatalog_providerFormats: a real MCP server's tool whose name no provider accepts
// is listed under a provider-safe name in the openai, openai-responses and anthropic
// formats (the mapping stated in names, strict schemas on request), and a submission that
// names the safe name runs that very tool, recorded under its id.
func TestToolCatalog_providerFormats(t *testing.T) {
	log := newCallLog(t)
	ctx, c, get := startCatalogStack(t, `
tools:
  - id: echo
  - id: open
    description: Takes any extra property.
    parameters: {type: object, properties: {a: {type: string}}, additionalProperties: true}
    set_result: {text: fixed}
policy: {default_behavior: allow}
executors:
  mcp:
    - {name: test, command: %q, args: ["-log", %q]}
`, serverBin, string(log))
	const greetID = "mcp__test__greet (structured)"
	safe := contracts.SafeToolName(greetID)
	if safe == greetID || !providerName.MatchString(safe) {
		t.Fatalf("safe name %q", safe)
	}

	var responses contracts.ProviderCatalog[contracts.OpenAIResponsesTool]
	get("/v1/tools?format=openai-responses&strict=true", &responses)
	var greet *contracts.OpenAIResponsesTool
	for i, tl := range responses.Tools {
		if tl.Type != "function" || !providerName.MatchString(tl.Name) || responses.Names[tl.Name] == "" {
			t.Errorf("responses tool %+v (names %v)", tl, responses.Names)
		}
		if tl.Name == safe {
			greet = &responses.Tools[i]
		}
	}
	if greet == nil || responses.Names[safe] != greetID || responses.Names["echo"] != "echo" {
		t.Fatalf("responses catalog %+v lacks %s → %s", responses, safe, greetID)
	}
	if greet.Strict == nil || !*greet.Strict || string(greet.Parameters) !=
		`{"additionalProperties":false,"properties":{"name":{"type":"string"},"title":{"type":"string"}},"required":["name","title"],"type":"object"}` {
		t.Errorf("strict greet: strict %v parameters %s", greet.Strict, greet.Parameters)
	}
	// open allows undeclared properties: left non-strict, with the reason.
	if r := responses.NotStrict["open"]; !strings.Contains(r, "allows properties it does not declare") {
		t.Errorf("not_strict %v", responses.NotStrict)
	}

	var chat contracts.ProviderCatalog[contracts.OpenAITool]
	get("/v1/tools?format=openai&agent_tools="+url.QueryEscape(greetID), &chat)
	if len(chat.Tools) != 1 || chat.Tools[0].Function.Name != safe || chat.Tools[0].Function.Strict != nil || chat.Names[safe] != greetID {
		t.Errorf("chat catalog %+v", chat)
	}

	raw, err := c.ToolsFor(ctx, contracts.ToolsRequest{Format: contracts.CatalogFormatAnthropic, AgentTools: []string{greetID, "echo"}})
	if err != nil {
		t.Fatal(err)
	}
	var anthropic contracts.ProviderCatalog[contracts.AnthropicTool]
	if err := json.Unmarshal(raw, &anthropic); err != nil {
		t.Fatal(err)
	}
	if len(anthropic.Tools) != 2 || anthropic.Tools[0].Name != "echo" || anthropic.Tools[1].Name != safe ||
		!strings.Contains(string(anthropic.Tools[1].InputSchema), `"required":["name"]`) || anthropic.Names[safe] != greetID {
		t.Errorf("anthropic catalog %s", raw)
	}

	// The model calls the safe name; awaken runs the tool it stands for.
	sub := contracts.BatchSubmission{
		RunID: "run-safe-names", ThreadID: "thread-1", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{safe}},
		Calls: []contracts.ToolCall{{CallID: "call_1", ToolID: safe, Arguments: json.RawMessage(`"{\"name\":\"Ada\"}"`)}},
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	res, err := c.SubmitAndWait(wctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Output.Text() != "hello Ada" || r.Output.IsError || r.ToolID != greetID {
		t.Errorf("result %+v: %q", r, r.Output.Text())
	}
	if n := log.count(t, "greet (structured) "+contracts.OperationID("run-safe-names", 1, "call_1")); n != 1 {
		t.Errorf("the server ran the tool %d times", n)
	}
}

// providerName is what OpenAI and Anthropic accept as a tool name.
var providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// startCatalogStack runs every service and the api on the configuration configYAML
// formats with args ([startPipeline]), and returns the test's context, a client and a GET
// of the api that decodes a 200 answer into v.
func startCatalogStack(t *testing.T, configYAML string, args ...any) (context.Context, *client.Client, func(path string, v any)) {
	t.Helper()
	ctx, stack := startPipeline(t, app.Options{Services: withAPI()}, configYAML, args...)
	base := strings.TrimSuffix(stack.APIService.URL(), "/")
	return ctx, stack.client, func(path string, v any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
	}
}
