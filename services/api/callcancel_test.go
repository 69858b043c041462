package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
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
	res := h.cancelCall(op, `{"reason":"not needed"}`)
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
	r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "")
	if r.status != http.StatusConflict && r.status != http.StatusNotFound {
		t.Fatalf("approve after the call cancel: %d %s, want it refused", r.status, r.body)
	}
	r = h.post("/v1/calls/"+op+"/cancel", `{}`)
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != httpapi.CodeCallTerminal {
		t.Fatalf("cancel of a terminal call: %d %s, want 409 %s", r.status, r.body, httpapi.CodeCallTerminal)
	}
	// The micro endpoint refuses the same way, with the HTTP status beside the code.
	m := h.microRequest(httpapi.EndpointCallsCancel, []byte(op))
	if code := m.Header.Get("Nats-Service-Error-Code"); code != httpapi.CodeCallTerminal || m.Header.Get(httpapi.HeaderStatus) != "409" {
		t.Fatalf("micro cancel of a terminal call: code %q status %q, want %s 409", code, m.Header.Get(httpapi.HeaderStatus), httpapi.CodeCallTerminal)
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
	h := slowHarness(t, api.Options{})
	const run = "run-call-cancel-flight"
	h.submitCalls(run, []string{"slow", "echo"},
		call("c1", "slow", map[string]int{"ms": 60000}),
		call("c2", "echo", map[string]string{"text": "after"}))
	natstest.WaitFor(t, waitLong, func() bool { return h.ledger(run, "c1") == 1 }, "the slow body to start")
	op := contracts.OperationID(run, 1, "c1")
	res := h.cancelCall(op, `{"reason":"too slow"}`)
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

// slowHarness is the full stack with a never_replay slow tool besides the test tools.
func slowHarness(t *testing.T, opts api.Options) *harness {
	cfg := strings.Replace(testConfig, "tools:\n", "tools:\n  - id: slow\n    recovery_policy: { mode: never_replay }\n", 1)
	return newHarnessConfig(t, cfg, opts, append(app.AllServices(), contracts.ServiceAPI))
}

// cancelCall cancels the call op over HTTP with body and returns its 200 answer.
func (h *harness) cancelCall(op, body string) client.CallCancelResult {
	h.t.Helper()
	r := h.post("/v1/calls/"+op+"/cancel", body)
	if r.status != http.StatusOK {
		h.t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var res client.CallCancelResult
	r.json(h.t, &res)
	return res
}

// TestCancelCallAcknowledged: a body that returns an outcome when its call is cancelled
// (within the grace) ends with that outcome, marked acknowledged.
func TestCancelCallAcknowledged(t *testing.T) {
	h := slowHarness(t, api.Options{})
	const run = "run-call-cancel-ack"
	h.submitCalls(run, []string{"slow", "echo"},
		call("c1", "slow", map[string]any{"ms": 60000, "ack_cancel": true}),
		call("c2", "echo", map[string]string{"text": "after"}))
	natstest.WaitFor(t, waitLong, func() bool { return h.ledger(run, "c1") == 1 }, "the slow body to start")
	res := h.cancelCall(contracts.OperationID(run, 1, "c1"), `{}`)
	if res.Status != contracts.CancelAcknowledged || res.Outcome != contracts.OutcomeCompleted {
		t.Fatalf("cancel reply = %+v, want %s", res, contracts.CancelAcknowledged)
	}
	got := texts(h.results(run))
	if got[0] != "stopped" || got[1] != "after" {
		t.Fatalf("results = %q, want the acknowledged outcome then echo", got)
	}
}

// TestCancelCallNotReached: cancelling the 2nd call of a sequential batch while the 1st
// runs records the cancel; the 2nd ends cancelled before start when the batch reaches it
// (its body never runs) and the 3rd runs after it.
func TestCancelCallNotReached(t *testing.T) {
	h := slowHarness(t, api.Options{})
	const run = "run-call-cancel-later"
	h.submitCalls(run, []string{"slow", "echo", "counter"},
		call("c1", "slow", map[string]int{"ms": 1500}),
		call("c2", "echo", map[string]string{"text": "never"}),
		call("c3", "counter", map[string]string{"name": run}))
	natstest.WaitFor(t, waitLong, func() bool { return h.ledger(run, "c1") == 1 }, "the slow body to start")
	res := h.cancelCall(contracts.OperationID(run, 1, "c2"), `{"reason":"skip it"}`)
	if res.Status != contracts.CancelBeforeStart {
		t.Fatalf("cancel reply = %+v, want %s", res, contracts.CancelBeforeStart)
	}
	got := texts(h.results(run))
	if got[0] != "done" || got[1] != contracts.CancelledBeforeStartPrefix+"skip it" || got[2] != "1" {
		t.Fatalf("results = %q", got)
	}
	if n := h.ledger(run, "c2"); n != 0 {
		t.Fatalf("the cancelled echo ran %d times", n)
	}
}

// TestCancelCallTimeout: the cancel of a call its batch reaches only after an approval
// answers 504 call_cancel_timeout within the api's wait, and still applies: once the
// approval lets the batch go on, the call ends cancelled before start without running.
func TestCancelCallTimeout(t *testing.T) {
	h := newHarness(t, api.Options{ResolveTimeout: 500 * time.Millisecond})
	const run = "run-call-cancel-wait"
	tk := h.park(run, map[string]string{})
	r := h.post("/v1/calls/"+contracts.OperationID(run, 1, "c3")+"/cancel", `{}`)
	if e := r.apiError(t); r.status != http.StatusGatewayTimeout || e.Code != httpapi.CodeCallCancelTimeout {
		t.Fatalf("cancel of a call not reached: %d %s, want 504 %s", r.status, r.body, httpapi.CodeCallCancelTimeout)
	}
	if r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", ""); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	got := texts(h.results(run))
	if !strings.HasPrefix(got[2], contracts.CancelledBeforeStartPrefix) {
		t.Fatalf("results = %q, want the counter cancelled before start", got)
	}
	if n := h.ledger(run, "c3"); n != 0 {
		t.Fatalf("the cancelled counter ran %d times", n)
	}
}
