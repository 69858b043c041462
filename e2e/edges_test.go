package e2e_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
	wantCompleted(t, res, func(got, want string) bool { return got == want },
		resultWant{"object", "as object", false},
		resultWant{"string", "as string", false},
		resultWant{"truncated", "invalid tool arguments: arguments are a string that does not hold a JSON object: unexpected EOF", true},
		resultWant{"empty", "stubbed: this tool is in maintenance", false},
		resultWant{"array", "invalid tool arguments: arguments are a string that does not hold a JSON object: it holds an array", true},
		resultWant{"after", "still runs", false},
	)
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

// TestEdges_providerCallIDs: call ids as every provider makes them — including ids a naive
// encoding would merge, and a 256-byte one — run through the whole pipeline, a permission
// ticket and a client-executed ticket included, and come back verbatim in the results, the
// tickets, the resolutions and the finalized event.
func TestEdges_providerCallIDs(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("é.", contracts.MaxCallIDLength/3) + strings.Repeat("x", contracts.MaxCallIDLength%3)
	if len(long) != contracts.MaxCallIDLength {
		t.Fatalf("long id is %d bytes", len(long))
	}
	ids := []string{
		"call_Xk3mP9qR2sT7uV1wY5zA8bC4", // OpenAI
		"toolu_01A09q90qw90lq917835lq9", // Anthropic
		"D681PevKs",                     // Mistral
		"functions.echo:0",              // OpenAI-compatible servers
		"functions.echo_0",              // a naive '.'/':' → '_' would merge these three
		"functions_echo_0",
		"=ZnVuY3Rpb25zLmVjaG86MA", // what functions.echo:0 encodes to, sent as an id
		long,
	}
	var calls []contracts.ToolCall
	for i, id := range ids {
		calls = append(calls, call(id, "echo", map[string]any{"text": fmt.Sprint("echo ", i)}))
	}
	askID, clientID := "functions.ask_me:8", "toolu_client/9 ✓"
	calls = append(calls, call(askID, "ask_me", map[string]any{}), call(clientID, "client_pick", map[string]any{}))
	sub := batch("run-callids", 1, []string{"echo", "ask_me", "client_pick"}, calls...)
	ctx := ctxFor(t, 90*time.Second)

	ticket := h.submitUntilParked(ctx, sub, askID)
	if ticket.CallID != askID || ticket.CorrelationID != contracts.CorrelationID(contracts.ReasonPermission, "run-callids", 1, askID) {
		t.Fatalf("ticket %+v", ticket)
	}
	if got, err := h.client.Ticket(ctx, ticket.CorrelationID); err != nil || got.CallID != askID {
		t.Fatalf("ticket by correlation id: %+v, %v", got, err)
	}
	res, err := h.client.Approve(ctx, ticket, "ok")
	if err != nil || res.Code != "approved" || res.CallID != askID {
		t.Fatalf("approve: %+v, %v", res, err)
	}
	ct, err := h.client.WaitTicket(ctx, "run-callids", 1, clientID)
	if err != nil || ct.CallID != clientID || ct.Reason != contracts.ReasonClientExecution {
		t.Fatalf("client ticket %+v, %v", ct, err)
	}
	if res, err := h.client.CompleteClientCall(ctx, ct, contracts.TextOutput(clientID, "picked")); err != nil || res.Code != "completed" {
		t.Fatalf("client result: %+v, %v", res, err)
	}
	out, err := h.client.Await(ctx, "run-callids", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string(nil), ids...), askID, clientID)
	if len(out.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(out.Results), len(want))
	}
	for i, id := range want {
		r := out.Results[i]
		if r.CallID != id || r.Output.CallID != id || r.Output.IsError {
			t.Errorf("result %d: call_id %q, output call_id %q, %q; want %q", i, r.CallID, r.Output.CallID, r.Output.Text(), id)
		}
		if i < len(ids) && r.Output.Text() != fmt.Sprint("echo ", i) {
			t.Errorf("result %d (%q) is %q: the calls' names collided", i, id, r.Output.Text())
		}
	}
	if got := out.Finalized.CallIDs; !slices.Equal(got, want) {
		t.Errorf("finalized call_ids %q", got)
	}
	for _, id := range want {
		rec, _, err := h.stack.Env.Calls.Get(ctx, h.callKey("run-callids", 1, id))
		if err != nil || rec.CallID != id || !rec.Phase.IsTerminal() {
			t.Errorf("call record of %q: %+v, %v", id, rec, err)
		}
	}
}
