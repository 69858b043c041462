package api_test

import (
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// stepOne is step 1 of run with calls, of which the model sees tools.
func stepOne(run string, tools []string, calls ...contracts.ToolCall) contracts.BatchSubmission {
	return contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: calls,
	}
}

// submitCalls submits step 1 of run with calls.
func (h *harness) submitCalls(run string, tools []string, calls ...contracts.ToolCall) {
	h.t.Helper()
	if _, err := h.client.Submit(ctxFor(h.t, waitLong), stepOne(run, tools, calls...)); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

// parkCall submits step 1 of run with one call, c1, of tool (a tool behind an approval)
// with args, and waits for its ticket.
func (h *harness) parkCall(run, tool string, args any) contracts.ResumeTicket {
	h.t.Helper()
	return stacktest.Park(h.t, ctxFor(h.t, waitLong), h.client, stepOne(run, []string{tool}, call("c1", tool, args)), "c1")
}
