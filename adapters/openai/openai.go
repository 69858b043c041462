// Package openai connects the official OpenAI Go SDK (github.com/openai/openai-go/v3) to
// awaken: the tool catalog as SDK tool params (Chat Completions and Responses), the model's
// tool calls as the calls of a submission, and awaken's results as the messages the next
// model request carries.
//
// It is a module of its own, so awaken's main module never depends on a provider SDK.
// The SDK's module also requires the AWS and Azure SDKs, for its Bedrock and Azure
// variants; this package imports only the SDK's root and responses packages, so those
// appear in a platform's go.sum but none of their packages is compiled into its build.
//
// Tool names: the catalog lists each tool under its provider-safe name (at most 64
// characters of [a-zA-Z0-9_-]); the calls keep the name the model used and awaken resolves
// it to the tool it stands for. Call ids are passed through verbatim, and arguments as the
// JSON string OpenAI sends (awaken decodes it; a string that is not a JSON object comes
// back as that call's error result, the rest of the batch runs).
//
// Errors: OpenAI's tool messages and function_call_output items have no error flag, so an
// error result is sent as its text prefixed with "Error: " (awaken's error texts already
// say what failed: "blocked: …", "invalid tool arguments: …", "tool execution failed: …").
package openai

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Names maps every provider-safe tool name of a catalog to the awaken tool id it stands
// for (the catalog's "names").
type Names map[string]string

// ChatTools returns the tool catalog as Chat Completions tools (format openai), narrowed
// to agentTools (nil: every tool), strict where the tools' schemas allow it when strict.
func ChatTools(ctx context.Context, c *client.Client, agentTools []string, strict bool) ([]openai.ChatCompletionToolUnionParam, Names, error) {
	// The catalog's tools are in the SDK's own shape: each decodes as it is.
	return catalogTools(ctx, c, contracts.CatalogFormatOpenAI, agentTools, strict,
		func(raw json.RawMessage) (tool openai.ChatCompletionToolUnionParam, err error) {
			return tool, json.Unmarshal(raw, &tool)
		})
}

// ResponsesTools returns the tool catalog as Responses function tools (format
// openai-responses), narrowed and strict as [ChatTools].
func ResponsesTools(ctx context.Context, c *client.Client, agentTools []string, strict bool) ([]responses.ToolUnionParam, Names, error) {
	return catalogTools(ctx, c, contracts.CatalogFormatOpenAIResponses, agentTools, strict,
		func(t contracts.OpenAIResponsesTool) (responses.ToolUnionParam, error) {
			var params map[string]any
			if err := json.Unmarshal(t.Parameters, &params); err != nil {
				return responses.ToolUnionParam{}, fmt.Errorf("%s: %w", t.Name, err)
			}
			// The Responses API requires strict on a function tool: false unless the
			// catalog made the tool strict.
			fn := responses.FunctionToolParam{Name: t.Name, Parameters: params, Description: openai.String(t.Description),
				Strict: openai.Bool(t.Strict != nil && *t.Strict)}
			return responses.ToolUnionParam{OfFunction: &fn}, nil
		})
}

// catalogTools reads the catalog in format, its tools decoded as T, and turns each into the
// SDK's tool param P with convert.
func catalogTools[T, P any](ctx context.Context, c *client.Client, format string, agentTools []string, strict bool, convert func(T) (P, error)) ([]P, Names, error) {
	raw, err := c.ToolsFor(ctx, contracts.ToolsRequest{Format: format, AgentTools: agentTools, Strict: strict})
	if err != nil {
		return nil, nil, fmt.Errorf("openai adapter: %w", err)
	}
	var doc contracts.ProviderCatalog[T]
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("openai adapter: catalog: %w", err)
	}
	tools := make([]P, len(doc.Tools))
	for i, t := range doc.Tools {
		if tools[i], err = convert(t); err != nil {
			return nil, nil, fmt.Errorf("openai adapter: catalog tool %d: %w", i, err)
		}
	}
	return tools, doc.Names, nil
}

// ChatCalls returns the function tool calls of an assistant message as awaken calls, in
// the model's order: call id verbatim, the tool name the model used, the arguments string
// as sent. Custom (non-function) tool calls are not awaken's and are skipped.
func ChatCalls(msg openai.ChatCompletionMessage) []contracts.ToolCall {
	calls := make([]contracts.ToolCall, 0, len(msg.ToolCalls))
	for _, tc := range msg.ToolCalls {
		if tc.Type != "function" {
			continue
		}
		calls = append(calls, call(tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	return calls
}

// ResponseCalls returns the function_call items of a Responses output as awaken calls, in
// order (the call_id, not the item id, is the call id).
func ResponseCalls(resp *responses.Response) []contracts.ToolCall {
	var calls []contracts.ToolCall
	for _, item := range resp.Output {
		if item.Type != "function_call" {
			continue
		}
		fc := item.AsFunctionCall()
		calls = append(calls, call(fc.CallID, fc.Name, fc.Arguments))
	}
	return calls
}

func call(id, name, arguments string) contracts.ToolCall {
	args, _ := json.Marshal(arguments) // a JSON string: awaken decodes the object it holds
	return contracts.ToolCall{CallID: id, ToolID: name, Arguments: args}
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

// ToolMessages returns one Chat Completions tool message per result, in model order.
func ToolMessages(res *client.BatchResult) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, len(res.Results))
	for i, r := range res.Results {
		out[i] = openai.ToolMessage(Text(r.Output), r.CallID)
	}
	return out
}

// FunctionCallOutputs returns one Responses function_call_output item per result, in
// model order.
func FunctionCallOutputs(res *client.BatchResult) []responses.ResponseInputItemUnionParam {
	out := make([]responses.ResponseInputItemUnionParam, len(res.Results))
	for i, r := range res.Results {
		item := responses.ResponseInputItemParamOfFunctionCallOutput(Text(r.Output))
		item.OfFunctionCallOutput.CallID = openai.String(r.CallID)
		out[i] = item
	}
	return out
}

// Text is the text OpenAI gets for an output: its text-only rendering
// ([contracts.ToolOutput.RenderText]: structured content included), prefixed with
// "Error: " when the output is an error.
func Text(out contracts.ToolOutput) string {
	text := out.RenderText()
	if out.IsError {
		return "Error: " + text
	}
	return text
}
