package contracts

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/awaken-dev/awaken/pkg/contracts/typeschema"
)

// This file holds the text-only view of an output, for consumers that can hand a model
// text only (an OpenAI tool message, a log line), and the rule that keeps structured
// content visible to them.

// WithStructuredText returns o with its structured content also in its content: a text
// block holding the structured content as compact JSON is appended, unless a text block of
// o already holds JSON equal to it (MCP asks servers to send that block themselves). An
// output without structured content is returned unchanged. It is idempotent.
func (o ToolOutput) WithStructuredText() ToolOutput {
	if len(bytes.TrimSpace(o.StructuredContent)) == 0 || o.carriesStructured() {
		return o
	}
	text, err := compactJSON(o.StructuredContent)
	if err != nil {
		text = "[structured content that is not valid JSON]"
	}
	content := make([]ContentBlock, 0, len(o.Content)+1)
	content = append(content, o.Content...)
	// An output that was only a placeholder for "no output" now has something to say.
	if len(content) == 1 && content[0].Type == BlockText && (content[0].Text == EmptySuccessText || content[0].Text == EmptyFailureText) {
		content = content[:0]
	}
	o.Content = append(content, ContentBlock{Type: BlockText, Text: text})
	return o
}

// carriesStructured reports whether a text block of o holds JSON equal to its structured
// content.
func (o ToolOutput) carriesStructured() bool {
	for _, b := range o.Content {
		if b.Type != BlockText {
			continue
		}
		t := bytes.TrimSpace([]byte(b.Text))
		if len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) && batchJSONEqual(t, o.StructuredContent) {
			return true
		}
	}
	return false
}

// RenderText is the text-only rendering of o, the one every text-only consumer uses: each
// block in order, joined by "\n" — text as it is; an image as "[image: {media type or
// url}]"; audio as "[audio: {media type}, {n} bytes]"; a resource link as "[resource link]
// {title or name}: {uri} ({mimeType})" with its description on the next line; an embedded
// resource as "[resource {uri}]" and its text on the next line, or "[resource {uri}:
// {mimeType}, {n} bytes of binary content]"; a tool_result's nested blocks likewise; a
// tool_use as "[tool_use {name}]". Structured content follows as a JSON text block unless a
// text block already holds it ([ToolOutput.WithStructuredText]).
func (o ToolOutput) RenderText() string {
	var parts []string
	renderBlocksText(o.WithStructuredText().Content, &parts)
	return strings.Join(parts, "\n")
}

func renderBlocksText(blocks []ContentBlock, parts *[]string) {
	for _, b := range blocks {
		switch b.Type {
		case BlockText:
			*parts = append(*parts, b.Text)
		case BlockImage:
			what := "image"
			if b.Source != nil && b.Source.URL != "" {
				what = b.Source.URL
			} else if b.Source != nil {
				what = b.Source.MediaType
			}
			*parts = append(*parts, "[image: "+what+"]")
		case BlockAudio:
			mt, n := "", 0
			if b.Source != nil {
				mt, n = b.Source.MediaType, base64.StdEncoding.DecodedLen(len(b.Source.Data))
				if raw, err := base64.StdEncoding.DecodeString(b.Source.Data); err == nil {
					n = len(raw)
				}
			}
			*parts = append(*parts, fmt.Sprintf("[audio: %s, %d bytes]", mt, n))
		case BlockResourceLink:
			var s strings.Builder
			s.WriteString("[resource link] ")
			name := b.Title
			if name == "" {
				name = b.Name
			}
			if name != "" {
				s.WriteString(name + ": ")
			}
			s.WriteString(b.URI)
			if b.MimeType != "" {
				s.WriteString(" (" + b.MimeType + ")")
			}
			if b.Description != "" {
				s.WriteString("\n" + b.Description)
			}
			*parts = append(*parts, s.String())
		case BlockResource:
			r := b.Resource
			if r == nil {
				continue
			}
			if r.Blob != "" {
				raw, _ := base64.StdEncoding.DecodeString(r.Blob)
				mt := r.MimeType
				if mt == "" {
					mt = "unknown type"
				}
				*parts = append(*parts, fmt.Sprintf("[resource %s: %s, %d bytes of binary content]", r.URI, mt, len(raw)))
				continue
			}
			*parts = append(*parts, "[resource "+r.URI+"]\n"+r.Text)
		case BlockToolResult:
			renderBlocksText(b.Content, parts)
		case BlockToolUse:
			*parts = append(*parts, "[tool_use "+b.Name+"]")
		}
	}
}

// compactJSON renders raw as compact JSON without HTML escaping (a model reads it, no
// browser).
func compactJSON(raw json.RawMessage) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	text, err := typeschema.Marshal(v)
	return string(text), err
}
