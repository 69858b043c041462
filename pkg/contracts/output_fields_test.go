package contracts

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// everyFieldOutput is an output with every field of ToolOutput set, as an executor can
// produce it: an MCP result with structured content (kept whole and as a JSON text block)
// that also stages state.
func everyFieldOutput(callID string) ToolOutput {
	out := BlocksOutput(callID, []ContentBlock{{Type: BlockText, Text: "Graph read successfully"}}, true)
	out.StructuredContent = json.RawMessage(`{"entities":[{"name":"Ada","observations":["wrote the first program"]}]}`)
	out = out.WithStructuredText().WithState(Command{Key: "k", Scope: ScopeRun, Merge: MergeDisjoint,
		Action: Action{Kind: ActionSet, Value: json.RawMessage(`{"x":1}`)}})
	return out.Normalize()
}

// toolOutputJSONFields is the JSON name of every field of ToolOutput, read from its tags.
func toolOutputJSONFields(t *testing.T) []string {
	t.Helper()
	var names []string
	typ := reflect.TypeFor[ToolOutput]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("ToolOutput.%s has no JSON name", typ.Field(i).Name)
		}
		names = append(names, name)
	}
	return names
}

// TestCompletedPhaseAcceptsEveryToolOutputField: the stored Completed phase is decoded
// strictly, and the fields it accepts must be exactly ToolOutput's. Every field of an
// output is written to the call record and must decode again, and reach the results
// payload unchanged; a field added to ToolOutput later fails here until the sample sets it.
func TestCompletedPhaseAcceptsEveryToolOutputField(t *testing.T) {
	out := everyFieldOutput("c1")
	v := reflect.ValueOf(out)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the sample output leaves ToolOutput.%s unset: set it so its round trip is tested", v.Type().Field(i).Name)
		}
	}
	if err := out.Validate(); err != nil {
		t.Fatalf("the sample output is not one an executor can commit: %v", err)
	}

	// Each field on its own, with the required ones, is accepted by the phase decoder.
	whole := map[string]json.RawMessage{}
	if err := json.Unmarshal(btMustJSON(t, out), &whole); err != nil {
		t.Fatal(err)
	}
	for _, name := range toolOutputJSONFields(t) {
		t.Run(name, func(t *testing.T) {
			body := map[string]json.RawMessage{"call_id": whole["call_id"], "content": whole["content"], "is_error": whole["is_error"], name: whole[name]}
			data := btMustJSON(t, map[string]any{"Completed": body})
			var p ToolCallPhase
			if err := json.Unmarshal(data, &p); err != nil {
				t.Fatalf("a Completed phase with %q does not decode: %v", name, err)
			}
			if got := btMustJSON(t, p); !strings.Contains(string(got), `"`+name+`":`) {
				t.Fatalf("%q lost on the way: %s", name, got)
			}
		})
	}

	// The whole output, stored in a call record → decoded → published → decoded.
	rec := CallRecord{Index: 0, CallID: "c1", ToolID: "mcp__memory__read_graph", Phase: CompletedPhase(out),
		Policy: DefaultRecoveryPolicy(), Timeline: []TimelineMark{{Stage: "completed", At: time.Unix(1, 0).UTC()}}}
	got := storeAndPublish(t, rec)
	if !got.Equal(out) {
		t.Fatalf("published output %s, want %s", btMustJSON(t, got), btMustJSON(t, out))
	}
}

// storeAndPublish encodes rec as the call record is stored, decodes it as the publisher
// reads it, and returns its output as a consumer decodes it from the batch's results
// payload.
func storeAndPublish(t testing.TB, rec CallRecord) ToolOutput {
	t.Helper()
	stored, err := json.Marshal(rec)
	if err != nil {
		t.Fatalf("encode call record: %v", err)
	}
	var read CallRecord
	if err := json.Unmarshal(stored, &read); err != nil {
		t.Fatalf("stored call record does not decode: %v\n%s", err, stored)
	}
	if err := read.Validate(); err != nil {
		t.Fatalf("stored call record is invalid: %v\n%s", err, stored)
	}
	out, ok := read.Output()
	if !ok {
		t.Fatalf("stored call record has no output: %s", stored)
	}
	payload, err := json.Marshal(BatchResults{BatchID: "b", RunID: "r", Results: []ToolResultEvent{{
		BatchID: "b", RunID: "r", CallID: read.CallID, ToolID: read.ToolID, Outcome: read.Outcome(), Output: out}}})
	if err != nil {
		t.Fatalf("encode results: %v", err)
	}
	var published BatchResults
	if err := json.Unmarshal(payload, &published); err != nil {
		t.Fatalf("results payload does not decode: %v\n%s", err, payload)
	}
	return published.Results[0].Output
}
