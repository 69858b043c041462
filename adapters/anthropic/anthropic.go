// Package anthropic connects the official Anthropic Go SDK
// (github.com/anthropics/anthropic-sdk-go/v2) to awaken: the tool catalog as SDK tool
// params, the model's tool_use blocks as the calls of a submission, and awaken's results
// as the tool_result blocks of the next user message, with is_error set on error results.
//
// It is a module of its own, so awaken's main module never depends on a provider SDK.
// The SDK's module also requires the AWS, Azure and Google Cloud SDKs, for its Bedrock,
// Vertex and Foundry variants; this package imports only the SDK's root package, so those
// appear in a platform's go.sum but none of their packages is compiled into its build.
//
// Tool names: the catalog lists each tool under its provider-safe name; the calls keep the
// name the model used and awaken resolves it to the tool it stands for. tool_use ids are
// passed through verbatim, and the input object as it is.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Names maps every provider-safe tool name of a catalog to the awaken tool id it stands
// for (the catalog's "names").
type Names map[string]string

// Tools returns the tool catalog as Messages tools (format anthropic), narrowed to
// agentTools (nil: every tool).
func Tools(ctx context.Context, c *client.Client, agentTools []string) ([]anthropic.ToolUnionParam, Names, error) {
	raw, err := c.ToolsFor(ctx, contracts.ToolsRequest{Format: contracts.CatalogFormatAnthropic, AgentTools: agentTools})
	if err != nil {
		return nil, nil, fmt.Errorf("anthropic adapter: %w", err)
	}
	var doc contracts.ProviderCatalog[contracts.AnthropicTool]
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, nil, fmt.Errorf("anthropic adapter: catalog: %w", err)
	}
	tools := make([]anthropic.ToolUnionParam, len(doc.Tools))
	for i, t := range doc.Tools {
		var schema map[string]any
		if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
			return nil, nil, fmt.Errorf("anthropic adapter: catalog tool %s: %w", t.Name, err)
		}
		in := anthropic.ToolInputSchemaParam{Properties: schema["properties"], ExtraFields: map[string]any{}}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range schema {
			if k != "type" && k != "properties" && k != "required" {
				in.ExtraFields[k] = v
			}
		}
		tools[i] = anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: t.Name, Description: anthropic.String(t.Description), InputSchema: in,
		}}
	}
	return tools, doc.Names, nil
}

// Calls returns the tool_use blocks of an assistant message as awaken calls, in order.
func Calls(msg *anthropic.Message) []contracts.ToolCall {
	var calls []contracts.ToolCall
	for _, b := range msg.Content {
		if b.Type != "tool_use" {
			continue
		}
		tu := b.AsToolUse()
		calls = append(calls, contracts.ToolCall{CallID: tu.ID, ToolID: tu.Name, Arguments: tu.Input})
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

// ResultMessage is the user message that answers a batch: one tool_result block per
// result, in model order.
func ResultMessage(res *client.BatchResult) anthropic.MessageParam {
	blocks := make([]anthropic.ContentBlockParamUnion, len(res.Results))
	for i, r := range res.Results {
		blocks[i] = anthropic.ContentBlockParamUnion{OfToolResult: ToolResult(r.Output)}
	}
	return anthropic.NewUserMessage(blocks...)
}

// ToolResult is the tool_result block of an output: is_error as awaken says, base64
// images as image blocks, every other block in its text-only rendering
// ([contracts.ToolOutput.RenderText]), structured content included.
func ToolResult(out contracts.ToolOutput) *anthropic.ToolResultBlockParam {
	out = out.WithStructuredText()
	b := &anthropic.ToolResultBlockParam{ToolUseID: out.CallID, IsError: anthropic.Bool(out.IsError)}
	for _, blk := range out.Content {
		if blk.Type == contracts.BlockImage && blk.Source != nil && blk.Source.Type == "base64" {
			img := anthropic.NewImageBlockBase64(blk.Source.MediaType, blk.Source.Data).OfImage
			b.Content = append(b.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: img})
			continue
		}
		text := contracts.ToolOutput{Content: []contracts.ContentBlock{blk}}.RenderText()
		b.Content = append(b.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: text}})
	}
	return b
}
