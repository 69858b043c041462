package mcpbridge

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"pgregory.net/rapid"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPropertyExecutorOutputsSurviveStoreAndPublish draws MCP tool results of every kind
// the bridge renders (text, image, audio, resource links, embedded resources, structured
// content, errors), renders them as brain-exec does, lets some stage state as typed tools
// do, finishes them as the executor does before committing, and stores each in a call
// record: decoding the record and encoding it into the batch's results payload must give
// back the very output that was committed.
func TestPropertyExecutorOutputsSurviveStoreAndPublish(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		out := renderResult(drawCallToolResult(t))
		if rapid.Bool().Draw(t, "stages_state") {
			out = out.WithState(contracts.Command{Key: "k", Scope: contracts.ScopeThread, Merge: contracts.MergeCommutative,
				Action: contracts.Action{Kind: contracts.ActionSet, Value: drawJSON(t, "state_value")}})
		}
		committed := execcore.FinishOutput("c1", out)
		rec := contracts.CallRecord{Index: 0, CallID: "c1", ToolID: "mcp__test__every",
			Phase: contracts.CompletedPhase(committed), Policy: contracts.DefaultRecoveryPolicy()}

		stored, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("encode call record: %v", err)
		}
		var read contracts.CallRecord
		if err := json.Unmarshal(stored, &read); err != nil {
			t.Fatalf("stored call record does not decode: %v\n%s", err, stored)
		}
		got, ok := read.Output()
		if !ok {
			t.Fatalf("stored call record has no output: %s", stored)
		}
		payload, err := json.Marshal(contracts.BatchResults{BatchID: "b", RunID: "r", Results: []contracts.ToolResultEvent{{
			BatchID: "b", RunID: "r", CallID: read.CallID, ToolID: read.ToolID, Outcome: read.Outcome(), Output: got}}})
		if err != nil {
			t.Fatalf("encode results payload: %v", err)
		}
		var published contracts.BatchResults
		if err := json.Unmarshal(payload, &published); err != nil {
			t.Fatalf("results payload does not decode: %v\n%s", err, payload)
		}
		if p := published.Results[0].Output; !p.Equal(committed) {
			t.Fatalf("published output differs from the committed one:\n got  %s\n want %s", mustJSON(t, p), mustJSON(t, committed))
		}
	})
}

func mustJSON(t *rapid.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// drawCallToolResult draws a result as an MCP server can return it.
func drawCallToolResult(t *rapid.T) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: rapid.Bool().Draw(t, "is_error")}
	n := rapid.IntRange(0, 4).Draw(t, "n_content")
	for i := range n {
		label := fmt.Sprintf("content_%d", i)
		switch rapid.IntRange(0, 5).Draw(t, label) {
		case 0:
			res.Content = append(res.Content, &mcp.TextContent{Text: rapid.String().Draw(t, label+"_text")})
		case 1:
			res.Content = append(res.Content, &mcp.ImageContent{MIMEType: rapid.SampledFrom([]string{"image/png", "text/plain", ""}).Draw(t, label+"_mime"),
				Data: rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, label+"_data")})
		case 2:
			res.Content = append(res.Content, &mcp.AudioContent{MIMEType: "audio/wav", Data: rapid.SliceOfN(rapid.Byte(), 0, 16).Draw(t, label+"_data")})
		case 3:
			size := rapid.Int64Range(-1, 1<<20).Draw(t, label+"_size")
			res.Content = append(res.Content, &mcp.ResourceLink{URI: rapid.SampledFrom([]string{"file:///data.csv", "https://x.example/a?b=1", ""}).Draw(t, label+"_uri"),
				Name: rapid.String().Draw(t, label+"_name"), Title: rapid.String().Draw(t, label+"_title"), MIMEType: "text/csv", Size: &size})
		case 4:
			r := &mcp.ResourceContents{URI: "file:///notes.txt", MIMEType: "text/plain", Text: rapid.String().Draw(t, label+"_text")}
			if rapid.Bool().Draw(t, label+"_blob") {
				r.Text, r.Blob = "", rapid.SliceOfN(rapid.Byte(), 1, 16).Draw(t, label+"_bytes")
			}
			res.Content = append(res.Content, &mcp.EmbeddedResource{Resource: r})
		default:
			res.Content = append(res.Content, &mcp.EmbeddedResource{})
		}
	}
	if rapid.Bool().Draw(t, "structured") {
		obj := map[string]any{}
		for i := range rapid.IntRange(0, 3).Draw(t, "n_keys") {
			obj[rapid.String().Draw(t, fmt.Sprintf("key_%d", i))] = drawValue(t, fmt.Sprintf("value_%d", i), 2)
		}
		res.StructuredContent = obj
	}
	return res
}

// drawValue draws a JSON value (as encoding/json decodes one) nested at most depth deep.
func drawValue(t *rapid.T, label string, depth int) any {
	kinds := 5
	if depth > 0 {
		kinds = 7
	}
	switch rapid.IntRange(0, kinds-1).Draw(t, label) {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, label+"_bool")
	case 2:
		return rapid.Float64Range(-1e12, 1e12).Draw(t, label+"_number")
	case 3:
		return rapid.IntRange(-1<<53, 1<<53).Draw(t, label+"_int")
	case 4:
		return rapid.String().Draw(t, label+"_string")
	case 5:
		var a []any
		for i := range rapid.IntRange(0, 3).Draw(t, label+"_len") {
			a = append(a, drawValue(t, fmt.Sprintf("%s_%d", label, i), depth-1))
		}
		return a
	default:
		m := map[string]any{}
		for i := range rapid.IntRange(0, 3).Draw(t, label+"_len") {
			m[rapid.String().Draw(t, fmt.Sprintf("%s_key_%d", label, i))] = drawValue(t, fmt.Sprintf("%s_%d", label, i), depth-1)
		}
		return m
	}
}

// drawJSON draws a JSON document.
func drawJSON(t *rapid.T, label string) json.RawMessage {
	b, err := json.Marshal(drawValue(t, label, 2))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
