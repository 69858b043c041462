package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

// rawCall is a call whose arguments are the JSON text raw, as a provider sent it.
func rawCall(id, tool, raw string) contracts.ToolCall {
	return contracts.ToolCall{CallID: id, ToolID: tool, Arguments: json.RawMessage(raw)}
}

// TestEdges_argumentsAsAString: arguments may be an object or a string holding one (the
// OpenAI shape); "" means {}; a string that holds no object gives that call an error
// result the model sees, and the rest of the batch runs.
func TestEdges_argumentsAsAString(t *testing.T) {
	h := newHarness(t)
	sub := batch("run-argstrings", 1, []string{"echo", "stub", "client_pick"},
		rawCall("object", "echo", `{"text":"as object"}`),
		rawCall("string", "echo", `"{\"text\":\"as string\"}"`),
		rawCall("truncated", "echo", `"{\"text\": \"cut"`),
		rawCall("empty", "stub", `""`),
		rawCall("array", "echo", `"[\"text\"]"`),
		rawCall("after", "echo", `"{\"text\":\"still runs\"}"`),
	)
	res := h.mustRun(sub)
	want := []struct {
		id, text string
		isError  bool
	}{
		{"object", "as object", false},
		{"string", "as string", false},
		{"truncated", "invalid tool arguments: arguments are a string that does not hold a JSON object: unexpected EOF", true},
		{"empty", "stubbed: this tool is in maintenance", false},
		{"array", "invalid tool arguments: arguments are a string that does not hold a JSON object: it holds an array", true},
		{"after", "still runs", false},
	}
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(res.Results), len(want))
	}
	for i, w := range want {
		r := res.Results[i]
		if r.CallID != w.id || r.Output.Text() != w.text || r.Output.IsError != w.isError || r.Outcome != contracts.OutcomeCompleted {
			t.Errorf("result %d: %s %s %q (is_error %v), want %s %q (is_error %v)", i, r.CallID, r.Outcome, r.Output.Text(), r.Output.IsError, w.id, w.text, w.isError)
		}
	}
	if n := h.ledger("run-argstrings", 1, "truncated"); n != 0 {
		t.Errorf("the body of a call with a broken argument string ran %d times", n)
	}
	// The same batch with the object form is the same content: a no-op, not a conflict.
	same := sub
	same.Calls = append([]contracts.ToolCall(nil), sub.Calls...)
	same.Calls[1] = rawCall("string", "echo", `{"text":"as string"}`)
	again := h.mustRun(same)
	if strings.Join(texts(again), "|") != strings.Join(texts(res), "|") {
		t.Errorf("resubmission with the object form answered %q", texts(again))
	}
}
