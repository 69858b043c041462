package eino_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	adapter "github.com/awaken-dev/awaken/adapters/eino"
	"github.com/awaken-dev/awaken/adapters/internal/adaptertest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// script is a chat model that answers each Generate with the next scripted message and
// records what it was given: the conversation and the tools bound to it.
type script struct {
	mu      sync.Mutex
	replies []*schema.Message
	inputs  [][]*schema.Message
	tools   [][]string
}

// scriptedModel is [script] bound to tools, as WithTools returns it.
type scriptedModel struct {
	s     *script
	tools []*schema.ToolInfo
}

var errUnscripted = errors.New("an unscripted model call")

func (m scriptedModel) Generate(_ context.Context, input []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	var names []string
	for _, t := range m.tools {
		names = append(names, t.Name)
	}
	m.s.inputs = append(m.s.inputs, slices.Clone(input))
	m.s.tools = append(m.s.tools, names)
	if len(m.s.replies) == 0 {
		return nil, errUnscripted
	}
	reply := m.s.replies[0]
	m.s.replies = m.s.replies[1:]
	return reply, nil
}

func (m scriptedModel) Stream(ctx context.Context, input []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, input, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m scriptedModel) WithTools(tools []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return scriptedModel{s: m.s, tools: tools}, nil
}

func (s *script) calls() ([][]*schema.Message, [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.inputs), slices.Clone(s.tools)
}

func toolCall(id, name, args string) schema.ToolCall {
	return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}
}

// answerTickets approves the ticket of call approve and denies that of call deny of batch
// (run, step) once each is open, while the agent waits on the batch.
func answerTickets(ctx context.Context, t *testing.T, c *client.Client, run string, step int64, approve, deny string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, d := range []struct {
			call     string
			decision contracts.PermissionDecision
		}{
			{approve, contracts.PermissionDecision{Decision: contracts.DecisionAllow, Note: "fine"}},
			{deny, contracts.PermissionDecision{Decision: contracts.DecisionDeny, Reason: "not today"}},
		} {
			tk, err := c.WaitTicket(ctx, run, step, d.call)
			if err != nil {
				t.Errorf("ticket of %s: %v", d.call, err)
				return
			}
			if _, err := c.Decide(ctx, tk, d.decision, ""); err != nil {
				t.Errorf("answer to %s: %v", d.call, err)
				return
			}
		}
	}()
	return done
}

// TestAgentLoop: the catalog bound to an Eino chat model (scripted) → the agent graph →
// one turn of four tool calls (one approved while the turn waits, one denied, one with
// truncated arguments) submitted as one awaken batch → four tool messages in the model's
// order → the model's second call carries them and answers; a second conversation turn
// on the same run, streamed, is the run's step 2.
func TestAgentLoop(t *testing.T) {
	srv, ctx := adaptertest.Stack(t)
	tools, names, err := adapter.Tools(ctx, srv.Client, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || tools[0].Name != "echo" || tools[1].Name != "ask_me" || names["echo"] != "echo" {
		t.Fatalf("catalog %v, names %v", tools, names)
	}
	params, err := tools[0].ParamsOneOf.ToJSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	if params == nil || params.Properties == nil {
		t.Fatalf("echo's parameters %+v", params)
	}
	if _, ok := params.Properties.Get("text"); !ok {
		t.Errorf("echo's parameters lack text: %+v", params)
	}

	s := &script{replies: []*schema.Message{
		schema.AssistantMessage("", []schema.ToolCall{
			toolCall("call_echo", "echo", `{"text":"hi"}`),
			toolCall("call_yes", "ask_me", `{}`),
			toolCall("call_no", "ask_me", ``),
			toolCall("call_trunc", "echo", `{"text":`),
		}),
		schema.AssistantMessage("all done", nil),
		schema.AssistantMessage("", []schema.ToolCall{toolCall("call_again", "echo", `{"text":"again"}`)}),
		schema.AssistantMessage("said again", nil),
	}}
	run := &adapter.Run{Client: srv.Client, ID: "run-eino", ThreadID: "thread-1", SnapshotID: "snap-1", Tools: names.Offered()}
	agent, err := adapter.NewAgent(ctx, scriptedModel{s: s}, tools, run, compose.WithMaxRunSteps(20))
	if err != nil {
		t.Fatal(err)
	}

	answered := answerTickets(ctx, t, srv.Client, "run-eino", 1, "call_yes", "call_no")
	out, err := agent.Invoke(ctx, []*schema.Message{schema.UserMessage("say hi, then ask twice")})
	if err != nil {
		t.Fatal(err)
	}
	<-answered
	if out.Content != "all done" {
		t.Errorf("final message %+v", out)
	}
	inputs, bound := s.calls()
	if len(inputs) != 2 {
		t.Fatalf("the model was called %d times, want 2", len(inputs))
	}
	for i, b := range bound {
		if strings.Join(b, ",") != "echo,ask_me" {
			t.Errorf("model call %d was bound to %v", i, b)
		}
	}
	second := inputs[1]
	if len(second) != 6 || second[0].Role != schema.User || second[1].Role != schema.Assistant {
		t.Fatalf("the second model call got %d messages, want user, assistant and four tool messages: %v", len(second), second)
	}
	want := []struct{ id, tool, content string }{
		{"call_echo", "echo", "hi"},
		{"call_yes", "ask_me", "ran ask_me"},
		{"call_no", "ask_me", "Error: blocked: not today"},
		{"call_trunc", "echo", "Error: invalid tool arguments: arguments are a string that does not hold a JSON object: unexpected EOF"},
	}
	for i, w := range want {
		m := second[2+i]
		if m.Role != schema.Tool || m.ToolCallID != w.id || m.ToolName != w.tool || m.Content != w.content {
			t.Errorf("tool message %d: %s %s %s %q, want %s %s %q", i, m.Role, m.ToolCallID, m.ToolName, m.Content, w.id, w.tool, w.content)
		}
	}
	// The turn was one batch: step 1 of the run holds all four calls.
	res, err := srv.Client.Results(ctx, "run-eino", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 4 || run.Steps != 1 {
		t.Errorf("batch 1 has %d results, the run took %d steps; want 4 results in one step", len(res.Results), run.Steps)
	}

	// The run goes on: the next conversation turn's tool calls are step 2, this time with
	// the agent streaming (Eino concatenates the model's chunks before the branch).
	stream, err := agent.Stream(ctx, []*schema.Message{schema.UserMessage("say it again")})
	if err != nil {
		t.Fatal(err)
	}
	out, err = schema.ConcatMessageStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	if out.Content != "said again" || run.Steps != 2 {
		t.Errorf("final message %q after %d steps", out.Content, run.Steps)
	}
	res, err = srv.Client.Results(ctx, "run-eino", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 1 || res.Results[0].CallID != "call_again" || res.Results[0].Output.RenderText() != "again" {
		t.Errorf("batch 2: %+v", res.Results)
	}
}

// TestToolsNodeKeepsModelOrder: the tools node answers in the order of the assistant
// message's calls (ids out of lexical order), each with its call id and tool name, a call
// of a tool the run does not offer included, and a message without calls submits
// nothing.
func TestToolsNodeKeepsModelOrder(t *testing.T) {
	srv, ctx := adaptertest.Stack(t)
	run := &adapter.Run{Client: srv.Client, ID: "run-order", ThreadID: "thread-1", SnapshotID: "snap-1", Tools: []string{"echo"}}
	none, err := run.Invoke(ctx, schema.AssistantMessage("no tools", nil))
	if err != nil || len(none) != 0 || run.Steps != 0 {
		t.Fatalf("a message without calls: %v, %v, %d steps", none, err, run.Steps)
	}
	msg := schema.AssistantMessage("", []schema.ToolCall{
		toolCall("z", "echo", `{"text":"first"}`),
		toolCall("a", "echo", `{"text":"second"}`),
		toolCall("m", "ask_me", `{}`),
	})
	got, err := run.Invoke(ctx, msg)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range got {
		lines = append(lines, m.ToolCallID+"/"+m.ToolName+"="+m.Content)
	}
	// ask_me is outside the run's agent.tools: awaken answers it as a tool the agent does
	// not have, and the model is told so.
	if w := "z/echo=first|a/echo=second|m/ask_me=Error: unknown tool: ask_me"; strings.Join(lines, "|") != w {
		t.Errorf("tool messages %q, want %q", lines, w)
	}
}

// TestCompilesOnlyEinoCore: the adapter imports Eino's schema, compose and
// components/model packages, not its agent flows, ADK or any eino-ext provider, so a
// platform on it compiles only the part of Eino its own graphs need.
func TestCompilesOnlyEinoCore(t *testing.T) {
	adaptertest.ForbidDeps(t, "github.com/cloudwego/eino/flow", "github.com/cloudwego/eino/adk",
		"github.com/cloudwego/eino-ext", "github.com/aws/", "github.com/Azure/azure-sdk-for-go/", "cloud.google.com/")
}
