package mcpserve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func oneResult(outcome contracts.Outcome, out contracts.ToolOutput) *client.BatchResult {
	return &client.BatchResult{BatchID: "b", Results: []contracts.ToolResultEvent{{CallID: "call-1", Outcome: outcome, Output: out}}}
}

// TestRenderIndeterminate: an indeterminate call is an error result whose first text
// says the effect may have happened, then the output's own text.
func TestRenderIndeterminate(t *testing.T) {
	res := render(oneResult(contracts.OutcomeIndeterminate, contracts.TextOutput("call-1", contracts.IndeterminatePrefix+"cancelled")), "b")
	if !res.IsError || len(res.Content) != 2 {
		t.Fatalf("%+v", res)
	}
	first := res.Content[0].(*mcp.TextContent).Text
	if !strings.HasPrefix(first, "indeterminate: ") || !strings.Contains(res.Content[1].(*mcp.TextContent).Text, "cancelled") {
		t.Fatalf("content %q, %+v", first, res.Content[1])
	}
	if res.Meta["awaken/outcome"] != "indeterminate" {
		t.Fatalf("meta %v", res.Meta)
	}
}

// TestRenderContent: blocks map to their MCP items, a stored object to a resource link
// saying how to read it, structured content (an object) to structuredContent; an error
// output stays an error.
func TestRenderContent(t *testing.T) {
	out := contracts.BlocksOutput("call-1", []contracts.ContentBlock{
		{Type: contracts.BlockText, Text: "hi"},
		{Type: contracts.BlockImage, Source: &contracts.ImageSource{Type: "base64", MediaType: "image/png", Data: "aGk="}},
		contracts.ResourceLink("op.abc", "text/plain", 2048),
		{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///x", Text: "x"}},
	}, true)
	out.StructuredContent = json.RawMessage(`{"n":1}`)
	res := render(oneResult(contracts.OutcomeCompleted, out), "b")
	if !res.IsError || len(res.Content) != 4 {
		t.Fatalf("%+v", res)
	}
	if img, ok := res.Content[1].(*mcp.ImageContent); !ok || string(img.Data) != "hi" || img.MIMEType != "image/png" {
		t.Errorf("image %+v", res.Content[1])
	}
	link, ok := res.Content[2].(*mcp.ResourceLink)
	if !ok || link.URI != contracts.ObjectURI("op.abc") || link.Size == nil || *link.Size != 2048 || !strings.Contains(link.Description, "/v1/objects/op.abc") {
		t.Errorf("link %+v", res.Content[2])
	}
	if er, ok := res.Content[3].(*mcp.EmbeddedResource); !ok || er.Resource.URI != "file:///x" {
		t.Errorf("resource %+v", res.Content[3])
	}
	if raw, _ := json.Marshal(res.StructuredContent); string(raw) != `{"n":1}` {
		t.Errorf("structuredContent %s", raw)
	}
}
