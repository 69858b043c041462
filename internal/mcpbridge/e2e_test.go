//go:build unix

package mcpbridge_test

import (
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestPipeline_mcpToolsPassThroughTheGate runs the five real services on an embedded
// JetStream server with an MCP server mounted in brain-exec, and shows that MCP calls are
// ordinary tool calls to the gate: an allowed one runs once, one denied by a glob rule is
// blocked and never reaches the server, one that asks parks until a human approves it and
// then runs once with its operation id, and one on a server that is down fails as
// unavailable without a body run.
func TestPipeline_mcpToolsPassThroughTheGate(t *testing.T) {
	log := newCallLog(t)
	ctx, stack := startPipeline(t, app.Options{}, `
policy:
  default_behavior: deny
  rules:
    - {pattern: mcp__test__add, behavior: allow}
    - {pattern: "mcp__test__f*", behavior: deny}
    - {pattern: mcp__test__echo_meta, behavior: ask, timeout: 1h}
    - {pattern: "mcp__down__*", behavior: allow}
executors:
  brain: {unavailable_retries: 2}
  body_ledger: true
  mcp:
    - {name: test, command: %q, args: ["-log", %q]}
    - {name: down, command: /nonexistent/mcp-server}
`, serverBin, string(log))
	c := stack.client

	const run = "run-mcp"
	tools := []string{"mcp__test__add", "mcp__test__fail", "mcp__test__echo_meta", "mcp__down__add"}
	sub := contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: []contracts.ToolCall{
			{CallID: "c1", ToolID: "mcp__test__add", Arguments: []byte(`{"a":2,"b":3}`)},
			{CallID: "c2", ToolID: "mcp__test__fail", Arguments: []byte(`{}`)},
			{CallID: "c3", ToolID: "mcp__test__echo_meta", Arguments: []byte(`{}`)},
			{CallID: "c4", ToolID: "mcp__down__add", Arguments: []byte(`{"a":1,"b":1}`)},
		},
	}
	ticket := stacktest.Park(t, ctx, c, sub, "c3")
	if ticket.Reason != contracts.ReasonPermission || ticket.ToolID != "mcp__test__echo_meta" {
		t.Fatalf("ticket %+v", ticket)
	}
	op := func(callID string) string { return contracts.OperationID(run, 1, callID) }
	if n := log.count(t, "echo_meta "+op("c3")); n != 0 {
		t.Fatalf("the parked call reached the server %d times before approval", n)
	}
	if _, err := c.Approve(ctx, ticket, "fine"); err != nil {
		t.Fatal(err)
	}
	res, err := c.Await(ctx, run, 1)
	if err != nil {
		t.Fatal(err)
	}

	want := []struct {
		text    string
		isError bool
	}{
		{"5", false},
		{"blocked: ", true},
		{op("c3"), false},
		{"tool executor unavailable before dispatch: mcp server \"down\" is unreachable", true},
	}
	if len(res.Results) != len(want) {
		t.Fatalf("%d results, want %d", len(res.Results), len(want))
	}
	for i, w := range want {
		r := res.Results[i]
		if !strings.HasPrefix(r.Output.Text(), w.text) || r.Output.IsError != w.isError {
			t.Errorf("%s: %q (is_error %v), want prefix %q (is_error %v)", r.CallID, r.Output.Text(), r.Output.IsError, w.text, w.isError)
		}
	}
	// The server saw the allowed call and the approved call once each, never the denied one.
	for line, n := range map[string]int{"add " + op("c1"): 1, "fail " + op("c2"): 0, "echo_meta " + op("c3"): 1} {
		if got := log.count(t, line); got != n {
			t.Errorf("server saw %q %d times, want %d", line, got, n)
		}
	}
	if lines := log.lines(t); len(lines) != 2 {
		t.Errorf("server call log %q, want exactly the two permitted calls", lines)
	}
	// The body-run ledger agrees: a body start only for the calls that reached a server.
	for callID, n := range map[string]int{"c1": 1, "c2": 0, "c3": 1, "c4": 0} {
		if got := stack.Ledger(run, 1, callID); got != n {
			t.Errorf("ledger of %s is %d, want %d", callID, got, n)
		}
	}
}
