package mcpbridge

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// structured is out with its structured content set to raw.
func structured(out contracts.ToolOutput, raw string) contracts.ToolOutput {
	out.StructuredContent = json.RawMessage(raw)
	return out
}

func TestRenderResult(t *testing.T) {
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")
	pngBlock := contracts.ContentBlock{Type: contracts.BlockImage, Source: &contracts.ImageSource{
		Type: "base64", MediaType: "image/png", Data: base64.StdEncoding.EncodeToString(png)}}
	text := func(s string) contracts.ContentBlock {
		return contracts.ContentBlock{Type: contracts.BlockText, Text: s}
	}
	size := int64(9)
	tests := []struct {
		name string
		res  *mcp.CallToolResult
		want contracts.ToolOutput
	}{
		{"nil result", nil, contracts.BlocksOutput("", nil, false)},
		{"no content", &mcp.CallToolResult{}, contracts.BlocksOutput("", nil, false)},
		{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, contracts.TextOutput("", "hi")},
		{"is error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no"}}}, contracts.ErrorOutput("", "no")},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: png}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{pngBlock}, false)},
		{"image without an image type", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "text/plain", Data: png}}},
			contracts.TextOutput("", "[image omitted: text/plain, 68 bytes: not a valid image]")},
		{"empty image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png"}}},
			contracts.TextOutput("", "[image omitted: image/png, 0 bytes: not a valid image]")},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{{Type: contracts.BlockAudio, Source: &contracts.ImageSource{Type: "base64", MediaType: "audio/wav", Data: "UklGRg=="}}}, false)},
		{"audio without an audio type", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "", Data: []byte("RIFF")}}},
			contracts.TextOutput("", "[audio omitted: unknown type, 4 bytes: not a valid audio]")},
		{"resource link", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ResourceLink{URI: "file:///a", Name: "a", Title: "A", MIMEType: "text/plain", Description: "the a file", Size: &size}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{{Type: contracts.BlockResourceLink, URI: "file:///a", Name: "a", Title: "A", MimeType: "text/plain", Description: "the a file", Size: 9}}, false)},
		{"embedded text resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///n", Text: "body"}}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///n", Text: "body"}}}, false)},
		{"embedded image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///p.png", MIMEType: "image/png", Blob: png}}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///p.png", MimeType: "image/png", Blob: pngBlock.Source.Data}}}, false)},
		{"embedded binary", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b", MIMEType: "application/zip", Blob: []byte("PK")}}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///b", MimeType: "application/zip", Blob: "UEs="}}}, false)},
		{"empty embedded resource", &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{}}},
			contracts.TextOutput("", "[empty embedded resource]")},
		{"structured content without text", &mcp.CallToolResult{StructuredContent: map[string]any{"q": "<a&b>", "n": 1}},
			structured(contracts.TextOutput("", `{"n":1,"q":"<a&b>"}`), `{"n":1,"q":"<a&b>"}`)},
		{"structured content next to an image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: png}}, StructuredContent: []int{1}},
			structured(contracts.BlocksOutput("", []contracts.ContentBlock{pngBlock, text("[1]")}, false), `[1]`)},
		{"structured content with text that carries it is not repeated", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{ "n": 1 }`}}, StructuredContent: map[string]any{"n": 1}},
			structured(contracts.TextOutput("", `{ "n": 1 }`), `{"n":1}`)},
		{"structured content with other text is appended", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Graph read successfully"}}, StructuredContent: map[string]any{"entities": []any{}}},
			structured(contracts.BlocksOutput("", []contracts.ContentBlock{text("Graph read successfully"), text(`{"entities":[]}`)}, false), `{"entities":[]}`)},
		{"order is kept", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{MIMEType: "image/png", Data: png}, &mcp.TextContent{Text: "b"}}},
			contracts.BlocksOutput("", []contracts.ContentBlock{text("a"), pngBlock, text("b")}, false)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := renderResult(tc.res)
			if !got.Equal(tc.want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(tc.want)
				t.Fatalf("\n got %s\nwant %s", g, w)
			}
			for i, b := range got.Content {
				if err := b.Validate(); err != nil {
					t.Errorf("block %d invalid: %v", i, err)
				}
			}
		})
	}
}

func TestDescriptorFor(t *testing.T) {
	tests := []struct {
		name       string
		tool       *mcp.Tool
		wantID     string
		wantDesc   string
		wantParams string
		wantErr    bool
	}{
		{"schema kept and canonical", &mcp.Tool{Name: "q", Description: "Query.", InputSchema: map[string]any{
			"type": "object", "properties": map[string]any{"sql": map[string]any{"type": "string"}}, "required": []any{"sql"}}},
			"mcp__db__q", "Query.", `{"properties":{"sql":{"type":"string"}},"required":["sql"],"type":"object"}`, false},
		{"missing schema", &mcp.Tool{Name: "q"}, "mcp__db__q", "", `{"properties":{},"type":"object"}`, false},
		{"title when no description", &mcp.Tool{Name: "q", Title: "Run a query", InputSchema: map[string]any{}},
			"mcp__db__q", "Run a query", `{"properties":{},"type":"object"}`, false},
		{"non-object schema", &mcp.Tool{Name: "q", InputSchema: map[string]any{"type": "array"}}, "", "", "", true},
		{"empty name", &mcp.Tool{Name: "", InputSchema: map[string]any{}}, "", "", "", true},
		{"control character in the name", &mcp.Tool{Name: "a\u200bb", InputSchema: map[string]any{}}, "", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := descriptorFor("db", tc.tool)
			if tc.wantErr {
				if err == nil || !errors.Is(err, contracts.ErrInvalidDescriptor) {
					t.Fatalf("error %v, want an invalid descriptor", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.ID != tc.wantID || d.Description != tc.wantDesc || string(d.Parameters) != tc.wantParams ||
				d.Kind != contracts.KindRegular || d.RecoveryPolicy != contracts.DefaultRecoveryPolicy() {
				t.Fatalf("descriptor %+v (params %s)", d, d.Parameters)
			}
		})
	}
}

func TestObjectArguments(t *testing.T) {
	tests := []struct {
		name, in, want string
		invalid        bool
	}{
		{"empty", "", "{}", false},
		{"null", " null ", "{}", false},
		{"object", ` {"a":1} `, `{"a":1}`, false},
		{"array", `[1]`, "", true},
		{"string", `"x"`, "", true},
		{"truncated", `{"a":`, "", true},
		{"trailing data", `{} {}`, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := objectArguments(json.RawMessage(tc.in))
			var te *contracts.ToolError
			if tc.invalid {
				if !errors.As(err, &te) || te.Kind != contracts.ToolErrorInvalidArguments {
					t.Fatalf("error %v, want invalid arguments", err)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s, %v; want %s", got, err, tc.want)
			}
		})
	}
}
