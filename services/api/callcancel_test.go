package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/app"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestCancelCallBeforeStart: cancelling a call parked on its approval ends it, before its
// body ever ran, with the model-visible "cancelled before start" result; the rest of the
// batch goes on (counter runs after it) and the batch publishes. Cancelling it again is a
// 409 call_terminal that changes nothing; an unknown operation id is a 404.
func TestCancelCallBeforeStart(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-call-cancel-start"
	tk := h.park(run, map[string]string{})
	op := contracts.OperationID(run, 1, "c2")
	r := h.post("/v1/calls/"+op+"/cancel", `{"reason":"not needed"}`)
	if r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var res client.CallCancelResult
	r.json(t, &res)
	if res.OperationID != op || res.Status != contracts.CancelBeforeStart || res.Outcome != contracts.OutcomeCompleted ||
		res.Reason != "not needed" || res.Actor == "" {
		t.Fatalf("cancel reply = %+v", res)
	}
	out := h.results(run)
	got := texts(out)
	if !strings.HasPrefix(got[1], contracts.CancelledBeforeStartPrefix+"not needed") || !out.Results[1].Output.IsError {
		t.Fatalf("cancelled call's result = %q (error %v), want %q", got[1], out.Results[1].Output.IsError, contracts.CancelledBeforeStartPrefix)
	}
	if out.Results[0].Outcome != contracts.OutcomeCompleted || got[2] != "1" {
		t.Fatalf("the rest of the batch: %v, want echo and counter completed", got)
	}
	if n := h.ledger(run, "c2"); n != 0 {
		t.Fatalf("cancelled ask_me ran %d times", n)
	}
	r = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "")
	if r.status != http.StatusConflict && r.status != http.StatusNotFound {
		t.Fatalf("approve after the call cancel: %d %s, want it refused", r.status, r.body)
	}
	r = h.post("/v1/calls/"+op+"/cancel", `{}`)
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != api.CodeCallTerminal {
		t.Fatalf("cancel of a terminal call: %d %s, want 409 %s", r.status, r.body, api.CodeCallTerminal)
	}
	r = h.post("/v1/calls/"+contracts.OperationID(run, 1, "c9")+"/cancel", `{}`)
	if r.status != http.StatusNotFound {
		t.Fatalf("cancel of an unknown call: %d %s, want 404", r.status, r.body)
	}
}

// TestCancelCallInFlight: cancelling a call whose body runs stops the body (its context is
// cancelled), the call ends indeterminate "cancelled_in_flight", the never_replay body is
// not run again, and the next call of the sequential batch runs and the batch publishes.
func TestCancelCallInFlight(t *testing.T) {
	cfg := strings.Replace(testConfig, "tools:\n", "tools:\n  - id: slow\n    recovery_policy: { mode: never_replay }\n", 1)
	h := newHarnessConfig(t, cfg, api.Options{}, append(app.AllServices(), app.API))
	const run = "run-call-cancel-flight"
	sub := contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"slow", "echo"}},
		Calls: []contracts.ToolCall{
			call("c1", "slow", map[string]int{"ms": 60000}),
			call("c2", "echo", map[string]string{"text": "after"}),
		},
	}
	if _, err := h.client.Submit(ctxFor(t, waitLong), sub); err != nil {
		t.Fatalf("submit: %v", err)
	}
	natstest.WaitFor(t, waitLong, func() bool { return h.ledger(run, "c1") == 1 }, "the slow body to start")
	op := contracts.OperationID(run, 1, "c1")
	r := h.post("/v1/calls/"+op+"/cancel", `{"reason":"too slow"}`)
	if r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var res client.CallCancelResult
	r.json(t, &res)
	if res.Status != contracts.CancelInFlight || res.Outcome != contracts.OutcomeIndeterminate || res.Reason != "too slow" {
		t.Fatalf("cancel reply = %+v", res)
	}
	out := h.results(run)
	got := texts(out)
	if out.Results[0].Outcome != contracts.OutcomeIndeterminate || got[0] != contracts.IndeterminatePrefix+contracts.CancelInFlight {
		t.Fatalf("stopped call = %v %q, want indeterminate %s", out.Results[0].Outcome, got[0], contracts.CancelInFlight)
	}
	if out.Results[1].Outcome != contracts.OutcomeCompleted || got[1] != "after" {
		t.Fatalf("the next call = %v %q, want echo completed", out.Results[1].Outcome, got[1])
	}
	if n := h.ledger(run, "c1"); n != 1 {
		t.Fatalf("the never_replay body ran %d times, want 1", n)
	}
}
