package mcpbridge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// renderResult maps an MCP tool result to the output (its call id is left empty: the
// executor sets it), keeping every content item: text → text block, image → image block,
// audio → audio block, resource link → resource_link block, embedded resource → resource
// block, each in MCP's own fields. An item that cannot be a valid block (an "image" whose
// MIME type is not an image type, empty data) becomes a text block saying what it was,
// never silently dropped. structuredContent is kept whole in the output's
// structured_content and, unless a text block already holds the same JSON, appended to
// the content as a JSON text block ([contracts.ToolOutput.WithStructuredText]), so a
// consumer that reads only content still sees the data. IsError makes the output an error
// output: the model reads the server's explanation and the run goes on.
func renderResult(res *mcp.CallToolResult) contracts.ToolOutput {
	if res == nil {
		return contracts.BlocksOutput("", nil, false)
	}
	blocks := make([]contracts.ContentBlock, 0, len(res.Content)+1)
	for _, c := range res.Content {
		if c != nil {
			blocks = append(blocks, renderContent(c))
		}
	}
	out := contracts.BlocksOutput("", blocks, res.IsError)
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			out.Content = append(out.Content, textBlock("[structured content that cannot be rendered as JSON: "+err.Error()+"]"))
			return out
		}
		out.StructuredContent = raw
		out = out.WithStructuredText()
	}
	return out
}

// renderContent maps one content item.
func renderContent(c mcp.Content) contracts.ContentBlock {
	switch c := c.(type) {
	case *mcp.TextContent:
		return textBlock(c.Text)
	case *mcp.ImageContent:
		return mediaBlock(contracts.BlockImage, c.MIMEType, c.Data, "image")
	case *mcp.AudioContent:
		return mediaBlock(contracts.BlockAudio, c.MIMEType, c.Data, "audio")
	case *mcp.ResourceLink:
		b := contracts.ContentBlock{Type: contracts.BlockResourceLink, URI: c.URI, Name: c.Name,
			MimeType: c.MIMEType, Title: c.Title, Description: c.Description}
		if c.Size != nil && *c.Size > 0 {
			b.Size = *c.Size
		}
		if b.Name == "" {
			b.Name = c.URI
		}
		if err := b.Validate(); err != nil {
			return textBlock(fmt.Sprintf("[resource link omitted: %v]", err))
		}
		return b
	case *mcp.EmbeddedResource:
		return renderEmbedded(c)
	default:
		if text, err := typeschema.Marshal(c); err == nil { // compact, no HTML escaping: the model reads it
			return textBlock(string(text))
		}
		return textBlock(fmt.Sprintf("[%T content omitted]", c))
	}
}

// mediaBlock returns a base64 image or audio block, or a text block saying why the item
// was not kept as one (no media type of its kind, no data).
func mediaBlock(typ contracts.ContentBlockType, mimeType string, data []byte, what string) contracts.ContentBlock {
	b := contracts.ContentBlock{Type: typ, Source: &contracts.ImageSource{
		Type: "base64", MediaType: mimeType, Data: base64.StdEncoding.EncodeToString(data),
	}}
	if err := b.Validate(); err != nil {
		return textBlock(fmt.Sprintf("[%s omitted: %s, %d bytes: not a valid %s]", what, orUnknown(mimeType), len(data), typ))
	}
	return b
}

func renderEmbedded(c *mcp.EmbeddedResource) contracts.ContentBlock {
	r := c.Resource
	if r == nil || r.URI == "" {
		return textBlock("[empty embedded resource]")
	}
	b := contracts.ContentBlock{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{
		URI: r.URI, MimeType: r.MIMEType, Text: r.Text,
	}}
	if len(r.Blob) > 0 {
		b.Resource.Text = ""
		b.Resource.Blob = base64.StdEncoding.EncodeToString(r.Blob)
	}
	return b
}

func textBlock(text string) contracts.ContentBlock {
	return contracts.ContentBlock{Type: contracts.BlockText, Text: text}
}

func orUnknown(mimeType string) string {
	if mimeType == "" {
		return "unknown type"
	}
	return mimeType
}

// reportResultCost passes the cost a server reported in the result's _meta
// ([contracts.MetaCost]) to the executor, which charges the host's budgets with it. A value
// that is not a number ≥ 0 is ignored: the tool's configured cost stands.
func reportResultCost(ctx context.Context, res *mcp.CallToolResult) {
	if res == nil || res.Meta == nil {
		return
	}
	if v, ok := res.Meta[contracts.MetaCost].(float64); ok {
		tool.ReportCost(ctx, v)
	}
}
