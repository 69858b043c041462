package mcpbridge

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// renderResult maps an MCP tool result to the model-visible output (its call id is left
// empty: the executor sets it). Text becomes a text block and an image a base64 image
// block; every other kind of content is rendered as text, since the model can only see
// text and images. Structured content is rendered as JSON text when the result has no
// text content of its own, so a server that answers only with structured content is not
// seen as answering nothing. IsError makes the output an error output: the model reads
// the server's explanation and the run goes on.
func renderResult(res *mcp.CallToolResult) contracts.ToolOutput {
	if res == nil {
		return contracts.BlocksOutput("", nil, false)
	}
	blocks := make([]contracts.ContentBlock, 0, len(res.Content)+1)
	hasText := false
	for _, c := range res.Content {
		if _, ok := c.(*mcp.TextContent); ok {
			hasText = true
		}
		if c != nil {
			blocks = append(blocks, renderContent(c))
		}
	}
	if !hasText && res.StructuredContent != nil {
		if text, err := jsonText(res.StructuredContent); err == nil {
			blocks = append(blocks, textBlock(text))
		} else {
			blocks = append(blocks, textBlock("[structured content that cannot be rendered as JSON: "+err.Error()+"]"))
		}
	}
	return contracts.BlocksOutput("", blocks, res.IsError)
}

// renderContent maps one content item.
func renderContent(c mcp.Content) contracts.ContentBlock {
	switch c := c.(type) {
	case *mcp.TextContent:
		return textBlock(c.Text)
	case *mcp.ImageContent:
		return imageBlock(c.MIMEType, c.Data, "image")
	case *mcp.AudioContent:
		return textBlock(fmt.Sprintf("[audio omitted: %s, %d bytes]", orUnknown(c.MIMEType), len(c.Data)))
	case *mcp.ResourceLink:
		return textBlock(renderResourceLink(c))
	case *mcp.EmbeddedResource:
		return renderEmbedded(c)
	default:
		if text, err := jsonText(c); err == nil {
			return textBlock(text)
		}
		return textBlock(fmt.Sprintf("[%T content omitted]", c))
	}
}

// imageBlock returns a base64 image block, or a text block saying why the image was
// dropped when it would not be a valid block (no image media type, no data).
func imageBlock(mimeType string, data []byte, what string) contracts.ContentBlock {
	b := contracts.ContentBlock{Type: contracts.BlockImage, Source: &contracts.ImageSource{
		Type: "base64", MediaType: mimeType, Data: base64.StdEncoding.EncodeToString(data),
	}}
	if err := b.Validate(); err != nil {
		return textBlock(fmt.Sprintf("[%s omitted: %s, %d bytes: not a valid image]", what, orUnknown(mimeType), len(data)))
	}
	return b
}

func renderResourceLink(c *mcp.ResourceLink) string {
	var s strings.Builder
	s.WriteString("[resource link] ")
	name := c.Title
	if name == "" {
		name = c.Name
	}
	if name != "" {
		s.WriteString(name)
		s.WriteString(": ")
	}
	s.WriteString(c.URI)
	if c.MIMEType != "" {
		s.WriteString(" (" + c.MIMEType + ")")
	}
	if c.Description != "" {
		s.WriteString("\n" + c.Description)
	}
	return s.String()
}

func renderEmbedded(c *mcp.EmbeddedResource) contracts.ContentBlock {
	r := c.Resource
	switch {
	case r == nil:
		return textBlock("[empty embedded resource]")
	case len(r.Blob) > 0 && strings.HasPrefix(r.MIMEType, "image/"):
		return imageBlock(r.MIMEType, r.Blob, "embedded image "+r.URI)
	case len(r.Blob) > 0:
		return textBlock(fmt.Sprintf("[resource %s: %s, %d bytes of binary content omitted]", r.URI, orUnknown(r.MIMEType), len(r.Blob)))
	default:
		return textBlock(fmt.Sprintf("[resource %s]\n%s", r.URI, r.Text))
	}
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

// jsonText renders v as compact JSON without HTML escaping (the model reads it, no browser).
func jsonText(v any) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
