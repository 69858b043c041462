package mcpserve

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// render maps the published result of a one-call batch to an MCP tool result: every
// content block to its MCP content item (a resource_link kept as a link: an output stored
// by reference is read with resources/read or GET /v1/objects/{name}), the structured
// content whole, isError as the output says (a blocked or failed call). An indeterminate
// call is an error result that says so first: its effect may or may not have happened.
func render(b *client.BatchResult, batchID string) *mcp.CallToolResult {
	if b == nil || len(b.Results) != 1 {
		return toolError(CodeUnavailable, "batch %s was published without the call's result", batchID)
	}
	r := b.Results[0]
	out := &mcp.CallToolResult{IsError: r.Output.IsError}
	if r.Outcome == contracts.OutcomeIndeterminate {
		out.IsError = true
		text := "indeterminate: awaken cannot tell whether the call's effect happened (it was not run again)."
		if first := firstText(r.Output); !strings.HasPrefix(first, contracts.IndeterminatePrefix) && first != "" {
			text += " " + first
		}
		out.Content = append(out.Content, &mcp.TextContent{Text: text})
	}
	for _, blk := range r.Output.Content {
		out.Content = append(out.Content, content(blk))
	}
	if len(r.Output.StructuredContent) > 0 {
		// structuredContent is a JSON object in MCP; anything else stays in the text
		// block that content already carries.
		var obj map[string]any
		if json.Unmarshal(r.Output.StructuredContent, &obj) == nil && obj != nil {
			out.StructuredContent = json.RawMessage(r.Output.StructuredContent)
		}
	}
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	out.Meta = mcp.Meta{"awaken/batch_id": batchID, "awaken/call_id": r.CallID, "awaken/outcome": string(r.Outcome)}
	return out
}

func firstText(o contracts.ToolOutput) string {
	for _, b := range o.Content {
		if b.Type == contracts.BlockText {
			return b.Text
		}
	}
	return ""
}

// content maps one awaken content block to an MCP content item.
func content(b contracts.ContentBlock) mcp.Content {
	switch b.Type {
	case contracts.BlockText:
		return &mcp.TextContent{Text: b.Text}
	case contracts.BlockImage, contracts.BlockAudio:
		if b.Source != nil && b.Source.Type == "base64" {
			data, err := base64.StdEncoding.DecodeString(b.Source.Data)
			if err == nil && b.Type == contracts.BlockImage {
				return &mcp.ImageContent{MIMEType: b.Source.MediaType, Data: data}
			}
			if err == nil {
				return &mcp.AudioContent{MIMEType: b.Source.MediaType, Data: data}
			}
		}
		if b.Source != nil && b.Source.URL != "" {
			return &mcp.ResourceLink{URI: b.Source.URL, Name: b.Source.URL, MIMEType: b.Source.MediaType}
		}
		return &mcp.TextContent{Text: fmt.Sprintf("[%s without data]", b.Type)}
	case contracts.BlockResourceLink:
		l := &mcp.ResourceLink{URI: b.URI, Name: b.Name, MIMEType: b.MimeType, Title: b.Title, Description: b.Description}
		if b.Size > 0 {
			size := b.Size
			l.Size = &size
		}
		if name, ok := contracts.ObjectNameOfURI(b.URI); ok && l.Description == "" {
			l.Description = "an output awaken stored by reference: resources/read this uri, or GET /v1/objects/" + name
		}
		return l
	case contracts.BlockResource:
		if r := b.Resource; r != nil {
			rc := &mcp.ResourceContents{URI: r.URI, MIMEType: r.MimeType, Text: r.Text}
			if r.Blob != "" {
				if data, err := base64.StdEncoding.DecodeString(r.Blob); err == nil {
					rc.Text, rc.Blob = "", data
				}
			}
			return &mcp.EmbeddedResource{Resource: rc}
		}
	}
	// tool_use, tool_result and anything a newer awaken adds: their JSON, as text.
	raw, err := json.Marshal(b)
	if err != nil {
		return &mcp.TextContent{Text: fmt.Sprintf("[%s block]", b.Type)}
	}
	return &mcp.TextContent{Text: string(raw)}
}

// contents is the resources/read answer for an object's bytes: text when the object is
// text, else a blob.
func contents(uri, mimeType string, data []byte) *mcp.ResourceContents {
	if strings.HasPrefix(mimeType, "text/") || strings.Contains(mimeType, "json") {
		if utf8.Valid(data) {
			return &mcp.ResourceContents{URI: uri, MIMEType: mimeType, Text: string(data)}
		}
	}
	return &mcp.ResourceContents{URI: uri, MIMEType: mimeType, Blob: data}
}
