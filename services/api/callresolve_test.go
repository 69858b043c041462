package api_test

import (
	"net/http"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// stopInFlight starts the never_replay slow call c1 of run's step 1 (before calls), and
// cancels it in flight: it ends indeterminate (cancelled_in_flight) after its body ran
// once.
func (h *harness) stopInFlight(run string, tools []string, after ...contracts.ToolCall) string {
	h.t.Helper()
	h.submitCalls(run, tools, append([]contracts.ToolCall{call("c1", "slow", map[string]int{"ms": 60000})}, after...)...)
	natstest.WaitFor(h.t, waitLong, func() bool { return h.ledger(run, "c1") == 1 }, "the slow body to start")
	op := contracts.OperationID(run, 1, "c1")
	h.cancelCall(op, `{"reason":"stuck"}`)
	return op
}

// TestResolveCallBeforePublication: an indeterminate call of a batch
// that is not published yet (its next call waits for an approval) is resolved by an
// operator as ran with its output; the batch publishes that output as the call's
// completed result, the body never ran again, and the call record names who resolved it,
// with which role and note. Refusals change nothing: a call that is not indeterminate
// (409 call_not_indeterminate), a second resolution (409 call_already_resolved), a bad
// request (422 invalid_resolution), an unknown call (404).
func TestResolveCallBeforePublication(t *testing.T) {
	h := slowHarness(t, api.Options{})
	const run = "run-resolve-open"
	op := h.stopInFlight(run, []string{"slow", "ask_me"}, call("c2", "ask_me", map[string]string{}))
	tk, err := h.client.WaitTicket(ctxFor(t, waitLong), run, 1, "c2")
	if err != nil {
		t.Fatalf("wait for the ticket: %v", err)
	}

	for name, tc := range map[string]struct {
		op, body string
		status   int
		code     string
	}{
		"not indeterminate": {contracts.OperationID(run, 1, "c2"), `{"outcome":"not_run"}`, http.StatusConflict, httpapi.CodeCallNotIndeterminate},
		"unknown outcome":   {op, `{"outcome":"maybe"}`, http.StatusUnprocessableEntity, httpapi.CodeInvalidResolution},
		"ran, no output":    {op, `{"outcome":"ran"}`, http.StatusUnprocessableEntity, httpapi.CodeInvalidResolution},
		"other call's output": {op, `{"outcome":"ran","output":{"call_id":"c2","content":[{"type":"text","text":"x"}]}}`,
			http.StatusUnprocessableEntity, httpapi.CodeInvalidResolution},
		"invalid output": {op, `{"outcome":"ran","output":{"call_id":"c1","content":[{"type":"nonsense"}]}}`,
			http.StatusUnprocessableEntity, httpapi.CodeInvalidResolution},
		"not_run with output": {op, `{"outcome":"not_run","output":{"call_id":"c1","content":[]}}`,
			http.StatusUnprocessableEntity, httpapi.CodeInvalidResolution},
		"unknown call": {contracts.OperationID(run, 1, "c9"), `{"outcome":"not_run"}`, http.StatusNotFound, httpapi.CodeNotFound},
	} {
		r := h.post("/v1/calls/"+tc.op+"/resolve", tc.body)
		if e := r.apiError(t); r.status != tc.status || e.Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.body, tc.status, tc.code)
		}
	}

	r := h.post("/v1/calls/"+op+"/resolve",
		`{"outcome":"ran","output":{"call_id":"c1","content":[{"type":"text","text":"sent (checked in the mail log)"}]},"note":"mail log says sent"}`)
	if r.status != http.StatusOK {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	var res client.CallResolveResult
	r.json(t, &res)
	if res.Status != contracts.ResolutionResolved || res.Outcome != contracts.ReconcileRan || res.Actor == "" ||
		res.Role != "operator" || res.Note != "mail log says sent" || res.Output.Text() != "sent (checked in the mail log)" {
		t.Fatalf("resolve reply = %+v", res)
	}
	r = h.post("/v1/calls/"+op+"/resolve", `{"outcome":"not_run"}`)
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != httpapi.CodeCallAlreadyResolved {
		t.Fatalf("second resolution: %d %s, want 409 %s", r.status, r.body, httpapi.CodeCallAlreadyResolved)
	}

	if r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", `{}`); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	out := h.results(run)
	got := texts(out)
	if out.Results[0].Outcome != contracts.OutcomeCompleted || got[0] != "sent (checked in the mail log)" || out.Results[0].Output.IsError {
		t.Fatalf("resolved call published as %s %q, want completed with the operator's output", out.Results[0].Outcome, got[0])
	}
	if n := h.ledger(run, "c1"); n != 1 {
		t.Fatalf("the never_replay body ran %d times, want 1", n)
	}
	corrections, err := h.client.Corrections(ctxFor(t, waitLong), run)
	if err != nil || len(corrections) != 0 {
		t.Fatalf("corrections = %v (%v), want none: the results carry the resolution", corrections, err)
	}
}

// TestResolveCallAfterPublication: an indeterminate call whose batch is published is
// resolved as not run; the published results never change, the resolution is recorded on
// the call as a correction and published as io.awaken.tool.result.corrected.v1 beside
// them, naming the result it corrects. The micro endpoint then refuses a second one.
func TestResolveCallAfterPublication(t *testing.T) {
	h := slowHarness(t, api.Options{})
	const run = "run-resolve-published"
	op := h.stopInFlight(run, []string{"slow", "echo"}, call("c2", "echo", map[string]string{"text": "after"}))
	before := h.results(run)
	if before.Results[0].Outcome != contracts.OutcomeIndeterminate {
		t.Fatalf("stopped call published as %s", before.Results[0].Outcome)
	}

	r := h.post("/v1/calls/"+op+"/resolve", `{"outcome":"not_run","note":"the provider shows no charge"}`)
	if r.status != http.StatusOK {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	var res client.CallResolveResult
	r.json(t, &res)
	want := contracts.NotRunPrefix + "the provider shows no charge"
	if res.Status != contracts.ResolutionCorrected || res.Outcome != contracts.ReconcileNotRun || res.Output.Text() != want || !res.Output.IsError {
		t.Fatalf("resolve reply = %+v", res)
	}
	corrections, err := h.client.Corrections(ctxFor(t, waitLong), run)
	if err != nil {
		t.Fatal(err)
	}
	if len(corrections) != 1 {
		t.Fatalf("corrections = %+v, want one", corrections)
	}
	c := corrections[0]
	if c.OperationID != op || c.Index != 0 || c.Corrected.Text() != want ||
		c.Published.Text() != contracts.IndeterminatePrefix+contracts.CancelInFlight || c.Actor == "" || c.Role != "operator" {
		t.Fatalf("correction = %+v", c)
	}
	after := h.results(run)
	if after.Sequence != before.Sequence || texts(after)[0] != texts(before)[0] {
		t.Fatalf("the published batch changed: %v → %v", texts(before), texts(after))
	}
	m := h.microRequest(httpapi.EndpointCallsResolve, []byte(`{"operation_id":"`+op+`","outcome":"not_run"}`))
	if code := m.Header.Get("Nats-Service-Error-Code"); code != httpapi.CodeCallAlreadyResolved || m.Header.Get(httpapi.HeaderStatus) != "409" {
		t.Fatalf("micro second resolution: code %q status %q, want %s 409", code, m.Header.Get(httpapi.HeaderStatus), httpapi.CodeCallAlreadyResolved)
	}
}
