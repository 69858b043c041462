package anthropic_test

import (
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	adapter "github.com/awaken-dev/awaken/adapters/anthropic"
	"github.com/awaken-dev/awaken/adapters/internal/adaptertest"
)

// TestMessagesLoop: catalog → a Messages request (the SDK sends the catalog's tools) → a
// parallel batch of tool_use blocks (one needs an approval, one has arguments the tool's
// schema refuses) → awaken → tool_result blocks with is_error → the second request
// carries them.
func TestMessagesLoop(t *testing.T) {
	srv, ctx := adaptertest.Stack(t)
	tools, names, err := adapter.Tools(ctx, srv.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || names["echo"] != "echo" {
		t.Fatalf("catalog %d tools, names %v", len(tools), names)
	}
	model := adaptertest.NewModel(t, "/v1/messages",
		`{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1},"content":[
		   {"type":"text","text":"on it"},
		   {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"echo","input":{"text":"hi"}},
		   {"type":"tool_use","id":"toolu_02ask","name":"ask_me","input":{}},
		   {"type":"tool_use","id":"toolu_03bad","name":"echo","input":{"txt":"typo"}}]}`,
		`{"id":"msg_2","type":"message","role":"assistant","model":"m","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1},"content":[{"type":"text","text":"all done"}]}`,
	)
	ac := anthropic.NewClient(option.WithBaseURL(model.URL+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	params := anthropic.MessageNewParams{
		Model: "m", MaxTokens: 1024, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hi, then ask"))},
	}
	first, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	sent := model.Body(0)["tools"].([]any)
	if len(sent) != 2 || sent[0].(map[string]any)["name"] != "echo" || sent[0].(map[string]any)["input_schema"].(map[string]any)["type"] != "object" {
		t.Errorf("the SDK sent the tools %v", sent)
	}
	sub := adapter.Submission("run-anthropic", "thread-1", "snap-1", 1, []string{"echo", "ask_me"}, adapter.Calls(first))
	res := adaptertest.Settle(ctx, t, srv.Client, sub, "toolu_02ask")
	params.Messages = append(params.Messages, first.ToParam(), adapter.ResultMessage(res))
	second, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Content[0].Text != "all done" {
		t.Errorf("second reply %+v", second.Content)
	}
	msgs := model.Body(1)["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("the second request has %d messages", len(msgs))
	}
	results := msgs[2].(map[string]any)["content"].([]any)
	want := []struct {
		id, text string
		isError  bool
	}{
		{"toolu_01A09q90qw90lq917835lq9", "hi", false},
		{"toolu_02ask", "ran ask_me", false},
		{"toolu_03bad", "invalid tool arguments:", true},
	}
	if len(results) != len(want) {
		t.Fatalf("tool results %v", results)
	}
	for i, w := range want {
		r := results[i].(map[string]any)
		content := r["content"].([]any)[0].(map[string]any)
		isErr, _ := r["is_error"].(bool)
		if r["type"] != "tool_result" || r["tool_use_id"] != w.id || isErr != w.isError || !strings.HasPrefix(content["text"].(string), w.text) {
			t.Errorf("tool_result %d: %v, want %s %q is_error=%v", i, r, w.id, w.text, w.isError)
		}
	}
}

// TestCompilesNoCloudSDK: the adapter imports the SDK's root package only, never its
// Bedrock, Vertex or Foundry variants, so a platform on it compiles no AWS, Azure or
// Google Cloud SDK package (the SDK's module requires them, for those variants).
func TestCompilesNoCloudSDK(t *testing.T) {
	adaptertest.ForbidDeps(t, "github.com/aws/", "github.com/Azure/azure-sdk-for-go/", "cloud.google.com/",
		"github.com/anthropics/anthropic-sdk-go/v2/bedrock", "github.com/anthropics/anthropic-sdk-go/v2/vertex",
		"github.com/anthropics/anthropic-sdk-go/v2/foundry")
}
