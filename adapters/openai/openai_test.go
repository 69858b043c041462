package openai_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/awaken-dev/awaken/adapters/internal/adaptertest"
	adapter "github.com/awaken-dev/awaken/adapters/openai"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// toolNames are the function names a request body offered.
func toolNames(body map[string]any, nested bool) []string {
	var names []string
	tools, _ := body["tools"].([]any)
	for _, tl := range tools {
		m, _ := tl.(map[string]any)
		if nested {
			m, _ = m["function"].(map[string]any)
		}
		name, _ := m["name"].(string)
		names = append(names, name)
	}
	return names
}

// TestChatCompletionsLoop: catalog → a Chat Completions request (the SDK sends the
// catalog's tools) → a parallel batch of three tool calls (one needs an approval, one has
// truncated arguments) → awaken → tool messages → the second request carries them.
func TestChatCompletionsLoop(t *testing.T) {
	srv, ctx := adaptertest.Stack(t)
	tools, names, err := adapter.ChatTools(ctx, srv.Client, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if names["echo"] != "echo" || names["ask_me"] != "ask_me" || len(tools) != 2 {
		t.Fatalf("catalog %d tools, names %v", len(tools), names)
	}
	model := adaptertest.NewModel(t, "/chat/completions",
		`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
		  "message":{"role":"assistant","content":null,"tool_calls":[
		    {"id":"call_Xk3mP9qR2sT7","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}},
		    {"id":"functions.ask_me:1","type":"function","function":{"name":"ask_me","arguments":""}},
		    {"id":"call_trunc","type":"function","function":{"name":"echo","arguments":"{\"text\":"}}]}}]}`,
		`{"id":"chatcmpl-2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"finish_reason":"stop",
		  "message":{"role":"assistant","content":"all done"}}]}`,
	)
	oc := openai.NewClient(option.WithBaseURL(model.URL+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	params := openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hi, then ask")},
		Tools:    tools,
	}
	first, err := oc.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(model.Body(0), true); strings.Join(got, ",") != "echo,ask_me" {
		t.Errorf("the SDK sent the tools %v", got)
	}
	if fn := model.Body(0)["tools"].([]any)[0].(map[string]any)["function"].(map[string]any); fn["strict"] != true {
		t.Errorf("echo was not sent strict: %v", fn)
	}
	msg := first.Choices[0].Message
	sub := adapter.Submission("run-chat", "thread-1", "snap-1", 1, []string{"echo", "ask_me"}, adapter.ChatCalls(msg))
	res := adaptertest.Settle(ctx, t, srv.Client, sub, "functions.ask_me:1")

	params.Messages = append(params.Messages, msg.ToParam())
	params.Messages = append(params.Messages, adapter.ToolMessages(res)...)
	second, err := oc.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].Message.Content != "all done" {
		t.Errorf("second reply %+v", second.Choices[0].Message)
	}
	msgs := model.Body(1)["messages"].([]any)
	if len(msgs) != 5 {
		t.Fatalf("the second request has %d messages, want user, assistant and three tool messages", len(msgs))
	}
	want := []struct{ id, content string }{
		{"call_Xk3mP9qR2sT7", "hi"},
		{"functions.ask_me:1", "ran ask_me"},
		{"call_trunc", "Error: invalid tool arguments: arguments are a string that does not hold a JSON object: unexpected EOF"},
	}
	for i, w := range want {
		m := msgs[2+i].(map[string]any)
		if m["role"] != "tool" || m["tool_call_id"] != w.id || m["content"] != w.content {
			t.Errorf("tool message %d: %v, want %s %q", i, m, w.id, w.content)
		}
	}
}

// TestResponsesLoop: the same loop over the Responses API: flat function tools, the
// function_call items → a submission, the results → function_call_output items.
func TestResponsesLoop(t *testing.T) {
	srv, ctx := adaptertest.Stack(t)
	tools, _, err := adapter.ResponsesTools(ctx, srv.Client, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	// The catalog document itself decodes straight into the SDK's Responses tool params
	// (the nested Chat Completions shape decoded to {"name":"","type":"function"}).
	raw, err := srv.Client.ToolsFor(ctx, contracts.ToolsRequest{Format: contracts.CatalogFormatOpenAIResponses})
	if err != nil {
		t.Fatal(err)
	}
	var decoded struct {
		Tools []responses.ToolUnionParam `json:"tools"`
	}
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded.Tools) != 2 || decoded.Tools[0].OfFunction == nil || decoded.Tools[0].OfFunction.Name != "echo" ||
		decoded.Tools[0].OfFunction.Parameters["properties"] == nil {
		t.Fatalf("the responses catalog decoded into %+v", decoded.Tools)
	}
	model := adaptertest.NewModel(t, "/responses",
		`{"id":"resp_1","object":"response","created_at":1,"model":"m","status":"completed","output":[
		   {"type":"function_call","id":"fc_1","call_id":"call_r1","name":"echo","arguments":"{\"text\":\"from responses\"}","status":"completed"},
		   {"type":"function_call","id":"fc_2","call_id":"call_r2","name":"ask_me","arguments":"{}","status":"completed"}]}`,
		`{"id":"resp_2","object":"response","created_at":2,"model":"m","status":"completed","output":[
		   {"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"done","annotations":[]}]}]}`,
	)
	oc := openai.NewClient(option.WithBaseURL(model.URL+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("go", responses.EasyInputMessageRoleUser)}
	first, err := oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}, Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := model.Body(0)["tools"].([]any)
	if got := toolNames(model.Body(0), false); strings.Join(got, ",") != "echo,ask_me" || sent[0].(map[string]any)["type"] != "function" {
		t.Errorf("the SDK sent the tools %v", sent)
	}
	calls := adapter.ResponseCalls(first)
	res := adaptertest.Settle(ctx, t, srv.Client, adapter.Submission("run-responses", "thread-1", "snap-1", 1, []string{"echo", "ask_me"}, calls), "call_r2")
	for _, item := range first.Output {
		if item.Type == "function_call" {
			p := item.AsFunctionCall().ToParam()
			input = append(input, responses.ResponseInputItemUnionParam{OfFunctionCall: &p})
		}
	}
	input = append(input, adapter.FunctionCallOutputs(res)...)
	second, err := oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}, Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.OutputText() != "done" {
		t.Errorf("second reply %q", second.OutputText())
	}
	items := model.Body(1)["input"].([]any)
	var outputs []string
	for _, it := range items {
		m := it.(map[string]any)
		if m["type"] == "function_call_output" {
			outputs = append(outputs, m["call_id"].(string)+"="+m["output"].(string))
		}
	}
	if strings.Join(outputs, "|") != "call_r1=from responses|call_r2=ran ask_me" {
		t.Errorf("function_call_output items %v", outputs)
	}
}

// TestCompilesNoCloudSDK: the adapter imports the SDK's root and responses packages,
// never its azure or bedrock package, so a platform on it compiles no AWS or Azure SDK
// package (the SDK's module requires them, for those variants).
func TestCompilesNoCloudSDK(t *testing.T) {
	adaptertest.ForbidDeps(t, "github.com/aws/", "github.com/Azure/azure-sdk-for-go/", "cloud.google.com/",
		"github.com/openai/openai-go/v3/azure", "github.com/openai/openai-go/v3/bedrock")
}
