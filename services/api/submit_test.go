package api_test

import "github.com/awaken-dev/awaken/pkg/contracts"

// submitCalls submits step 1 of run with calls.
func (h *harness) submitCalls(run string, tools []string, calls ...contracts.ToolCall) {
	h.t.Helper()
	sub := contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: tools},
		Calls: calls,
	}
	if _, err := h.client.Submit(ctxFor(h.t, waitLong), sub); err != nil {
		h.t.Fatalf("submit: %v", err)
	}
}

// parkCall submits step 1 of run with one call, c1, of tool (a tool behind an approval)
// with args, and waits for its ticket.
func (h *harness) parkCall(run, tool string, args any) contracts.ResumeTicket {
	h.t.Helper()
	h.submitCalls(run, []string{tool}, call("c1", tool, args))
	tk, err := h.client.WaitTicket(ctxFor(h.t, waitLong), run, 1, "c1")
	if err != nil {
		h.t.Fatalf("wait for the ticket: %v", err)
	}
	return tk
}
