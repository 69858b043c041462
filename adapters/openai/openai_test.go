package openai_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	adapter "github.com/awaken-dev/awaken/adapters/openai"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/devserver"
)

const testConfig = `
storage: {memory: true}
tools:
  - id: echo
    description: Returns its text argument.
    target: brain
  - id: ask_me
    description: Runs after a human approves it.
    builtin: ran
policy:
  default_behavior: allow
  rules:
    - {pattern: ask_me, behavior: ask, timeout: 1h}
`

// stack runs awaken on an embedded server, with the api's micro service for the catalog.
func stack(t *testing.T) *devserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{ConfigYAML: []byte(testConfig), WithAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// scripted is a model server that answers each request with the next scripted reply and
// records what the SDK sent.
type scripted struct {
	t       *testing.T
	mu      sync.Mutex
	replies []string
	bodies  []map[string]any
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		s.t.Errorf("the SDK sent %s: %v", body, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.replies) == 0 {
		s.t.Errorf("an unscripted request to %s", r.URL.Path)
		http.Error(w, "unscripted", http.StatusInternalServerError)
		return
	}
	s.bodies = append(s.bodies, m)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, s.replies[0])
	s.replies = s.replies[1:]
}

// settle approves the ask_me call's ticket once it is open and waits for the batch.
func settle(ctx context.Context, t *testing.T, c *client.Client, sub contracts.BatchSubmission, askCallID string) *client.BatchResult {
	t.Helper()
	if _, err := c.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	ticket, err := c.WaitTicket(ctx, sub.RunID, sub.Step, askCallID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Approve(ctx, ticket, "fine"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Await(ctx, sub.RunID, sub.Step)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

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
	srv := stack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tools, names, err := adapter.ChatTools(ctx, srv.Client, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if names["echo"] != "echo" || names["ask_me"] != "ask_me" || len(tools) != 2 {
		t.Fatalf("catalog %d tools, names %v", len(tools), names)
	}
	model := &scripted{t: t, replies: []string{
		`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
		  "message":{"role":"assistant","content":null,"tool_calls":[
		    {"id":"call_Xk3mP9qR2sT7","type":"function","function":{"name":"echo","arguments":"{\"text\":\"hi\"}"}},
		    {"id":"functions.ask_me:1","type":"function","function":{"name":"ask_me","arguments":""}},
		    {"id":"call_trunc","type":"function","function":{"name":"echo","arguments":"{\"text\":"}}]}}]}`,
		`{"id":"chatcmpl-2","object":"chat.completion","created":2,"model":"m","choices":[{"index":0,"finish_reason":"stop",
		  "message":{"role":"assistant","content":"all done"}}]}`,
	}}
	ts := httptest.NewServer(model)
	defer ts.Close()
	oc := openai.NewClient(option.WithBaseURL(ts.URL+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	params := openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hi, then ask")},
		Tools:    tools,
	}
	first, err := oc.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolNames(model.bodies[0], true); strings.Join(got, ",") != "echo,ask_me" {
		t.Errorf("the SDK sent the tools %v", got)
	}
	if fn := model.bodies[0]["tools"].([]any)[0].(map[string]any)["function"].(map[string]any); fn["strict"] != true {
		t.Errorf("echo was not sent strict: %v", fn)
	}
	msg := first.Choices[0].Message
	sub := adapter.Submission("run-chat", "thread-1", "snap-1", 1, []string{"echo", "ask_me"}, adapter.ChatCalls(msg))
	res := settle(ctx, t, srv.Client, sub, "functions.ask_me:1")

	params.Messages = append(params.Messages, msg.ToParam())
	params.Messages = append(params.Messages, adapter.ToolMessages(res)...)
	second, err := oc.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Choices[0].Message.Content != "all done" {
		t.Errorf("second reply %+v", second.Choices[0].Message)
	}
	msgs := model.bodies[1]["messages"].([]any)
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
	srv := stack(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
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
	model := &scripted{t: t, replies: []string{
		`{"id":"resp_1","object":"response","created_at":1,"model":"m","status":"completed","output":[
		   {"type":"function_call","id":"fc_1","call_id":"call_r1","name":"echo","arguments":"{\"text\":\"from responses\"}","status":"completed"},
		   {"type":"function_call","id":"fc_2","call_id":"call_r2","name":"ask_me","arguments":"{}","status":"completed"}]}`,
		`{"id":"resp_2","object":"response","created_at":2,"model":"m","status":"completed","output":[
		   {"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"done","annotations":[]}]}]}`,
	}}
	ts := httptest.NewServer(model)
	defer ts.Close()
	oc := openai.NewClient(option.WithBaseURL(ts.URL+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("go", responses.EasyInputMessageRoleUser)}
	first, err := oc.Responses.New(ctx, responses.ResponseNewParams{
		Model: "m", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}, Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := model.bodies[0]["tools"].([]any)
	if got := toolNames(model.bodies[0], false); strings.Join(got, ",") != "echo,ask_me" || sent[0].(map[string]any)["type"] != "function" {
		t.Errorf("the SDK sent the tools %v", sent)
	}
	calls := adapter.ResponseCalls(first)
	res := settle(ctx, t, srv.Client, adapter.Submission("run-responses", "thread-1", "snap-1", 1, []string{"echo", "ask_me"}, calls), "call_r2")
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
	items := model.bodies[1]["input"].([]any)
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
