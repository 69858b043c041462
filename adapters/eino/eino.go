// Package eino connects CloudWeGo Eino (github.com/cloudwego/eino) agents to awaken: the
// tool catalog as Eino tool infos to bind to a chat model, and a tools node that submits
// the tool calls of each assistant message as one awaken batch and returns the published
// results as tool messages, in the model's order.
//
// It is a module of its own, so awaken's main module never depends on Eino. It imports
// Eino's schema, compose and components/model packages and the JSON Schema type of tool
// infos only (no flow, adk or provider implementation), so a platform on Eino compiles no
// more of Eino than its graphs need.
//
// The tools node: Eino's own [compose.ToolsNode] (and the ReAct agent of flow/agent/react,
// which builds one from a [compose.ToolsNodeConfig]) runs each tool call on its own, one
// tool invocation per call, so no tool there sees the turn's other calls and the turn
// cannot be one batch. [Run.ToolsNode] is a [compose.Lambda] with the ToolsNode's shape
// (an assistant message in, its tool messages out) that any graph can use in its place,
// and [NewAgent] is the ReAct loop built with it: the chat model, then the awaken tools
// node while the model calls tools, then the model again with the results.
//
// Approvals and errors: a call the policy asks about waits, durably, until someone answers
// its ticket (`awaken tickets approve …`, the console or [client.Client.Approve]); the turn
// waits with it, bounded by its context. A blocked, denied or failed call, and one whose
// arguments are not a JSON object, comes back as that call's tool message with awaken's
// error text prefixed "Error: " (an Eino tool message has no error flag); the rest of the
// batch runs and the model sees every outcome.
//
// Tool names: the catalog lists each tool under its provider-safe name (the openai
// format's names: what Eino's chat model implementations pass to their providers); calls
// keep the name the model used and awaken resolves it to the tool it stands for. Call ids
// are passed through verbatim, and the arguments as the JSON string Eino carries.
package eino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Names maps every provider-safe tool name of a catalog to the awaken tool id it stands
// for (the catalog's "names").
type Names map[string]string

// Offered is the names the model is offered, for a batch's agent.tools (sorted).
func (n Names) Offered() []string {
	out := make([]string, 0, len(n))
	for name := range n {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Tools returns the tool catalog as Eino tool infos, narrowed to agentTools (nil: every
// tool), each with its JSON Schema as parameters: bind them with the chat model's
// WithTools.
func Tools(ctx context.Context, c *client.Client, agentTools []string) ([]*schema.ToolInfo, Names, error) {
	raw, err := c.ToolsFor(ctx, contracts.ToolsRequest{Format: contracts.CatalogFormatOpenAI, AgentTools: agentTools})
	if err != nil {
		return nil, nil, fmt.Errorf("eino adapter: %w", err)
	}
	var doc contracts.ProviderCatalog[contracts.OpenAITool]
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("eino adapter: catalog: %w", err)
	}
	infos := make([]*schema.ToolInfo, len(doc.Tools))
	for i, t := range doc.Tools {
		info := &schema.ToolInfo{Name: t.Function.Name, Desc: t.Function.Description}
		if len(t.Function.Parameters) > 0 {
			var params jsonschema.Schema
			if err := json.Unmarshal(t.Function.Parameters, &params); err != nil {
				return nil, nil, fmt.Errorf("eino adapter: catalog tool %s: %w", t.Function.Name, err)
			}
			info.ParamsOneOf = schema.NewParamsOneOfByJSONSchema(&params)
		}
		infos[i] = info
	}
	return infos, doc.Names, nil
}

// Calls returns the tool calls of an assistant message as awaken calls, in the model's
// order: call id verbatim, the tool name the model used, the arguments string as sent.
func Calls(msg *schema.Message) []contracts.ToolCall {
	calls := make([]contracts.ToolCall, len(msg.ToolCalls))
	for i, tc := range msg.ToolCalls {
		args, _ := json.Marshal(tc.Function.Arguments) // a JSON string: awaken decodes the object it holds
		calls[i] = contracts.ToolCall{CallID: tc.ID, ToolID: tc.Function.Name, Arguments: args}
	}
	return calls
}

// Submission is the awaken batch of one model turn: calls to the tools agentTools (the
// names or ids the model was offered) of run step.
func Submission(runID, threadID, snapshotID string, step int64, agentTools []string, calls []contracts.ToolCall) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: runID, ThreadID: threadID, Step: step,
		Agent: contracts.AgentSnapshot{SnapshotID: snapshotID, Tools: agentTools},
		Calls: calls,
	}
}

// ErrMissingResult is returned when a batch's published results lack a call of the
// assistant message they answer.
var ErrMissingResult = errors.New("eino adapter: no result for a tool call")

// ToolMessages returns the tool messages that answer msg from the results of its batch:
// one per tool call, in msg's order, each naming its call id and the tool the model
// called.
func ToolMessages(msg *schema.Message, res *client.BatchResult) ([]*schema.Message, error) {
	byID := make(map[string]contracts.ToolOutput, len(res.Results))
	for _, r := range res.Results {
		byID[r.CallID] = r.Output
	}
	out := make([]*schema.Message, len(msg.ToolCalls))
	for i, tc := range msg.ToolCalls {
		o, ok := byID[tc.ID]
		if !ok {
			return nil, fmt.Errorf("%w %q of batch %s", ErrMissingResult, tc.ID, res.BatchID)
		}
		out[i] = schema.ToolMessage(Text(o), tc.ID, schema.WithToolName(tc.Function.Name))
	}
	return out, nil
}

// Text is the content of the tool message for an output: its text-only rendering
// ([contracts.ToolOutput.RenderText]: structured content included), prefixed with
// "Error: " when the output is an error.
func Text(out contracts.ToolOutput) string {
	text := out.RenderText()
	if out.IsError {
		return "Error: " + text
	}
	return text
}

// Run is one agent run's side of awaken: each assistant message with tool calls it is
// given is the run's next step, submitted as one batch. Its turns are serial (awaken keeps
// one active batch per run): a turn holds the run until its results are published.
type Run struct {
	// Client is the awaken client the batches go through.
	Client *client.Client
	// ID, ThreadID and SnapshotID are the batches' run_id, thread_id and
	// agent.snapshot_id.
	ID, ThreadID, SnapshotID string
	// Tools is every batch's agent.tools: the names the model was offered
	// ([Names.Offered]).
	Tools []string
	// Steps is how many batches the run has submitted: the next turn submits step
	// Steps+1. Zero for a new run; a process that continues a run sets it to the steps
	// already taken (resubmitting a step with the same calls is a no-op that returns its
	// published results). Read it between turns only.
	Steps int64

	mu sync.Mutex
}

// Invoke is the tools node's work: it submits the tool calls of msg as the run's next
// batch, waits for its results (an approval included) and returns one tool message per
// call, in msg's order. A message without tool calls submits nothing and returns none.
func (r *Run) Invoke(ctx context.Context, msg *schema.Message) ([]*schema.Message, error) {
	if msg == nil || len(msg.ToolCalls) == 0 {
		return []*schema.Message{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sub := Submission(r.ID, r.ThreadID, r.SnapshotID, r.Steps+1, r.Tools, Calls(msg))
	res, err := r.Client.SubmitAndWait(ctx, sub)
	if err != nil {
		return nil, fmt.Errorf("eino adapter: batch %s: %w", sub.BatchID(), err)
	}
	r.Steps = sub.Step
	return ToolMessages(msg, res)
}

// ToolsNode is [Run.Invoke] as a graph node, in the place of a [compose.ToolsNode]:
// input an assistant message, output its tool messages.
func (r *Run) ToolsNode() *compose.Lambda {
	return compose.InvokableLambda(r.Invoke)
}

// Node keys of the graph [NewAgent] builds.
const (
	ModelNode = "model"
	ToolsNode = "tools"
)

// history is the agent graph's state: the conversation so far, which each model turn
// is given whole.
type history struct {
	messages []*schema.Message
}

// NewAgent builds the ReAct loop on awaken: chatModel, bound to tools, answers the
// conversation; while its message calls tools, run's tools node submits them as one batch
// and the model is called again with the conversation and the tool messages. The
// runnable's input is the new messages of the conversation (a user message), its output
// the model's final message. opts are added to the compile options (for example
// [compose.WithMaxRunSteps], which bounds the turns: two graph steps each).
func NewAgent(ctx context.Context, chatModel model.ToolCallingChatModel, tools []*schema.ToolInfo, run *Run, opts ...compose.GraphCompileOption) (compose.Runnable[[]*schema.Message, *schema.Message], error) {
	bound, err := chatModel.WithTools(tools)
	if err != nil {
		return nil, fmt.Errorf("eino adapter: bind tools: %w", err)
	}
	g := compose.NewGraph[[]*schema.Message, *schema.Message](compose.WithGenLocalState(func(context.Context) *history {
		return &history{}
	}))
	toModel := func(_ context.Context, in []*schema.Message, h *history) ([]*schema.Message, error) {
		h.messages = append(h.messages, in...)
		return h.messages, nil
	}
	toTools := func(_ context.Context, in *schema.Message, h *history) (*schema.Message, error) {
		h.messages = append(h.messages, in)
		return in, nil
	}
	callsTools := func(_ context.Context, msg *schema.Message) (string, error) {
		if len(msg.ToolCalls) > 0 {
			return ToolsNode, nil
		}
		return compose.END, nil
	}
	steps := []error{
		g.AddChatModelNode(ModelNode, bound, compose.WithStatePreHandler(toModel)),
		g.AddLambdaNode(ToolsNode, run.ToolsNode(), compose.WithStatePreHandler(toTools)),
		g.AddEdge(compose.START, ModelNode),
		g.AddBranch(ModelNode, compose.NewGraphBranch(callsTools, map[string]bool{ToolsNode: true, compose.END: true})),
		g.AddEdge(ToolsNode, ModelNode),
	}
	if err := errors.Join(steps...); err != nil {
		return nil, fmt.Errorf("eino adapter: agent graph: %w", err)
	}
	compileOpts := append([]compose.GraphCompileOption{
		compose.WithGraphName("AwakenAgent"), compose.WithNodeTriggerMode(compose.AnyPredecessor),
	}, opts...)
	runnable, err := g.Compile(ctx, compileOpts...)
	if err != nil {
		return nil, fmt.Errorf("eino adapter: agent graph: %w", err)
	}
	return runnable, nil
}
