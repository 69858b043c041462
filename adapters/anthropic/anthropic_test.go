package anthropic_test

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

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	adapter "github.com/awaken-dev/awaken/adapters/anthropic"
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
	if len(s.replies) == 0 || r.URL.Path != "/v1/messages" {
		s.t.Errorf("an unscripted request to %s", r.URL.Path)
		http.Error(w, "unscripted", http.StatusInternalServerError)
		return
	}
	s.bodies = append(s.bodies, m)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, s.replies[0])
	s.replies = s.replies[1:]
}

// TestMessagesLoop: catalog → a Messages request (the SDK sends the catalog's tools) → a
// parallel batch of tool_use blocks (one needs an approval, one has arguments the tool's
// schema refuses) → awaken → tool_result blocks with is_error → the second request
// carries them.
func TestMessagesLoop(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := devserver.Start(ctx, devserver.Options{ConfigYAML: []byte(testConfig), WithAPI: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	tools, names, err := adapter.Tools(ctx, srv.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || names["echo"] != "echo" {
		t.Fatalf("catalog %d tools, names %v", len(tools), names)
	}
	model := &scripted{t: t, replies: []string{
		`{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1},"content":[
		   {"type":"text","text":"on it"},
		   {"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"echo","input":{"text":"hi"}},
		   {"type":"tool_use","id":"toolu_02ask","name":"ask_me","input":{}},
		   {"type":"tool_use","id":"toolu_03bad","name":"echo","input":{"txt":"typo"}}]}`,
		`{"id":"msg_2","type":"message","role":"assistant","model":"m","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1},"content":[{"type":"text","text":"all done"}]}`,
	}}
	ts := httptest.NewServer(model)
	defer ts.Close()
	ac := anthropic.NewClient(option.WithBaseURL(ts.URL+"/"), option.WithAPIKey("test"), option.WithMaxRetries(0))

	params := anthropic.MessageNewParams{
		Model: "m", MaxTokens: 1024, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("say hi, then ask"))},
	}
	first, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	sent := model.bodies[0]["tools"].([]any)
	if len(sent) != 2 || sent[0].(map[string]any)["name"] != "echo" || sent[0].(map[string]any)["input_schema"].(map[string]any)["type"] != "object" {
		t.Errorf("the SDK sent the tools %v", sent)
	}
	sub := adapter.Submission("run-anthropic", "thread-1", "snap-1", 1, []string{"echo", "ask_me"}, adapter.Calls(first))
	if _, err := srv.Client.Submit(ctx, sub); err != nil {
		t.Fatal(err)
	}
	ticket, err := srv.Client.WaitTicket(ctx, sub.RunID, sub.Step, "toolu_02ask")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Client.Approve(ctx, ticket, "fine"); err != nil {
		t.Fatal(err)
	}
	res, err := srv.Client.Await(ctx, sub.RunID, sub.Step)
	if err != nil {
		t.Fatal(err)
	}
	params.Messages = append(params.Messages, first.ToParam(), adapter.ResultMessage(res))
	second, err := ac.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Content[0].Text != "all done" {
		t.Errorf("second reply %+v", second.Content)
	}
	msgs := model.bodies[1]["messages"].([]any)
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
