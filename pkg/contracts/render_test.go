package contracts

import (
	"encoding/json"
	"testing"
)

// TestRenderText: the text-only rendering of every block kind, with structured content
// appended once unless a text block already carries it.
func TestRenderText(t *testing.T) {
	every := ToolOutput{CallID: "c", Content: []ContentBlock{
		{Type: BlockText, Text: "Graph read successfully"},
		{Type: BlockImage, Source: &ImageSource{Type: "base64", MediaType: "image/png", Data: "AA=="}},
		{Type: BlockAudio, Source: &ImageSource{Type: "base64", MediaType: "audio/wav", Data: "UklGRgA="}},
		{Type: BlockResourceLink, URI: "file:///d.csv", Name: "d.csv", Title: "Data", MimeType: "text/csv", Description: "rows"},
		{Type: BlockResource, Resource: &EmbeddedResource{URI: "file:///n", Text: "remember"}},
		{Type: BlockResource, Resource: &EmbeddedResource{URI: "file:///b", MimeType: "application/zip", Blob: "AQID"}},
	}, StructuredContent: json.RawMessage(`{"entities": [ {"name":"Ada"} ]}`)}
	for i, b := range every.Content {
		if err := b.Validate(); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
	}
	if err := every.Validate(); err != nil {
		t.Fatal(err)
	}
	want := "Graph read successfully\n[image: image/png]\n[audio: audio/wav, 5 bytes]\n[resource link] Data: file:///d.csv (text/csv)\nrows\n" +
		"[resource file:///n]\nremember\n[resource file:///b: application/zip, 3 bytes of binary content]\n" + `{"entities":[{"name":"Ada"}]}`
	if got := every.RenderText(); got != want {
		t.Errorf("RenderText\n got %q\nwant %q", got, want)
	}
	with := every.WithStructuredText()
	if len(with.Content) != len(every.Content)+1 || !with.WithStructuredText().Equal(with) {
		t.Errorf("WithStructuredText appends one block and is idempotent: %d blocks", len(with.Content))
	}
	carried := ToolOutput{Content: []ContentBlock{{Type: BlockText, Text: "{\"entities\":[{\"name\":\"Ada\"}]}\n"}}, StructuredContent: every.StructuredContent}
	if got := carried.RenderText(); got != carried.Content[0].Text {
		t.Errorf("a text that carries the structured content is not repeated: %q", got)
	}
	placeholder := ToolOutput{Content: []ContentBlock{{Type: BlockText, Text: EmptySuccessText}}, StructuredContent: json.RawMessage(`[1]`)}
	if got := placeholder.RenderText(); got != "[1]" {
		t.Errorf("the no-output placeholder gives way to the structured content: %q", got)
	}
	if !every.Equal(every) || every.Equal(ToolOutput{CallID: "c", Content: every.Content}) {
		t.Error("Equal compares structured content")
	}
	bad := every
	bad.StructuredContent = json.RawMessage(`{`)
	if bad.Validate() == nil {
		t.Error("invalid structured content passed Validate")
	}
}
