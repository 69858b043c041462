package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/internal/checker"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// waitParkedView waits until the batch view shows echo done and ask_me parked, then
// returns it.
func (h *harness) waitParkedView(batchID string) httpapi.BatchView {
	h.t.Helper()
	var v httpapi.BatchView
	natstest.WaitFor(h.t, waitLong, func() bool {
		v = h.batch(batchID)
		return v.Calls[0].Phase == contracts.PhaseCompleted && v.Calls[1].Phase == contracts.PhaseAwaiting
	}, "echo completed and ask_me awaiting in the batch view")
	return v
}

// TestHTTPApproveRunsParkedAndLaterCalls is the approval scenario over HTTP: a batch
// [echo, ask_me, counter] parks on ask_me with echo done and counter not gated; the ticket
// is listed and readable; approving it runs ask_me and counter exactly once and publishes
// the results in model order; a second approval is refused not_waiting (409) and the ticket
// is gone (404).
func TestHTTPApproveRunsParkedAndLaterCalls(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-approve"
	tk := h.park(run, map[string]string{"why": "needs a human"})

	var list httpapi.TicketList
	r := h.get("/v1/tickets")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/tickets: %d %s", r.status, r.body)
	}
	r.json(t, &list)
	if len(list.Tickets) != 1 || list.Tickets[0].CorrelationID != tk.CorrelationID || list.Tickets[0].ToolID != "ask_me" {
		t.Fatalf("tickets = %+v, want only %s", list.Tickets, tk.CorrelationID)
	}
	var got contracts.ResumeTicket
	r = h.get("/v1/tickets/" + tk.CorrelationID)
	if r.status != http.StatusOK {
		t.Fatalf("GET ticket: %d %s", r.status, r.body)
	}
	r.json(t, &got)
	if got.CallID != "c2" || got.RunID != run || got.Reason != contracts.ReasonPermission || string(got.Arguments) != `{"why":"needs a human"}` {
		t.Fatalf("ticket = %+v", got)
	}

	v := h.waitParkedView(contracts.BatchID(run, 1))
	if c := v.Calls[2]; c.Phase != contracts.PhaseRequested || c.Recorded || len(c.Timeline) != 0 {
		t.Fatalf("counter = %+v, want Requested and not gated while ask_me is parked", c)
	}
	if v.Phase != contracts.BatchPhaseOpen || v.Terminal != 1 {
		t.Fatalf("batch phase %s terminal %d, want open with 1 terminal call", v.Phase, v.Terminal)
	}

	r = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", `{"note":"looks fine"}`)
	if r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	var res contracts.TicketResolution
	r.json(t, &res)
	if res.Code != "approved" || res.CorrelationID != tk.CorrelationID || res.CallID != "c2" {
		t.Fatalf("resolution = %+v", res)
	}

	out := h.results(run)
	if want := []string{"before approval", "ran ask_me", "1"}; !slices.Equal(texts(out), want) {
		t.Fatalf("results = %q, want %q", texts(out), want)
	}
	for i, rr := range out.Results {
		if rr.Index != i || rr.Outcome != contracts.OutcomeCompleted || rr.Output.IsError {
			t.Fatalf("result %d = %+v", i, rr)
		}
	}
	if n := h.ledger(run, "c2"); n != 1 {
		t.Fatalf("ask_me body ran %d times, want 1", n)
	}
	if n, err := checker.Counter(ctxFor(t, waitLong), h.client, run); err != nil || n != 1 {
		t.Fatalf("counter = %d (%v), want 1", n, err)
	}

	r = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "")
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != "not_waiting" {
		t.Fatalf("second approve: %d %s, want 409 not_waiting", r.status, r.body)
	}
	r = h.get("/v1/tickets/" + tk.CorrelationID)
	if e := r.apiError(t); r.status != http.StatusNotFound || e.Code != "not_waiting" {
		t.Fatalf("GET resolved ticket: %d %s, want 404 not_waiting", r.status, r.body)
	}

	final := h.batch(contracts.BatchID(run, 1))
	for _, c := range final.Calls {
		if c.Phase != contracts.PhaseCompleted || len(c.Timeline) == 0 {
			t.Fatalf("call %s = %+v, want Completed with a timeline", c.CallID, c)
		}
	}
	if final.Calls[1].ResolvedBy == "" || final.Calls[1].Output == nil || final.Calls[1].Output.Text() != "ran ask_me" {
		t.Fatalf("ask_me view = %+v", final.Calls[1])
	}
}

// TestHTTPDenyBlocksOnlyTheParkedCall: denying completes ask_me as "blocked: {reason}"
// without running it, and counter still runs.
func TestHTTPDenyBlocksOnlyTheParkedCall(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-deny"
	tk := h.park(run, map[string]string{"why": "risky"})
	r := h.post("/v1/tickets/"+tk.CorrelationID+"/deny", `{"reason":"too risky"}`)
	if r.status != http.StatusOK {
		t.Fatalf("deny: %d %s", r.status, r.body)
	}
	var res contracts.TicketResolution
	r.json(t, &res)
	if res.Code != "denied" {
		t.Fatalf("resolution = %+v, want denied", res)
	}
	out := h.results(run)
	if want := []string{"before approval", "blocked: too risky", "1"}; !slices.Equal(texts(out), want) {
		t.Fatalf("results = %q, want %q", texts(out), want)
	}
	if !out.Results[1].Output.IsError || out.Results[2].Output.IsError {
		t.Fatalf("is_error of ask_me/counter = %v/%v, want true/false", out.Results[1].Output.IsError, out.Results[2].Output.IsError)
	}
	if n := h.ledger(run, "c2"); n != 0 {
		t.Fatalf("denied ask_me body ran %d times", n)
	}
	r = h.post("/v1/tickets/"+tk.CorrelationID+"/deny", `{"reason":"again"}`)
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != "not_waiting" {
		t.Fatalf("second deny: %d %s, want 409 not_waiting", r.status, r.body)
	}
}

// TestHTTPConcurrentApproveAndDeny: of an approval and a denial sent at once, exactly one
// wins and the other is refused not_waiting.
func TestHTTPConcurrentApproveAndDeny(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-race"
	tk := h.park(run, map[string]string{})
	var wg sync.WaitGroup
	rs := make([]response, 2)
	wg.Go(func() { rs[0] = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "") })
	wg.Go(func() { rs[1] = h.post("/v1/tickets/"+tk.CorrelationID+"/deny", `{"reason":"no"}`) })
	wg.Wait()
	ok, refused := 0, 0
	for _, r := range rs {
		switch {
		case r.status == http.StatusOK:
			ok++
		case r.status == http.StatusConflict && r.apiError(t).Code == "not_waiting":
			refused++
		default:
			t.Fatalf("unexpected answer %d %s", r.status, r.body)
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d accepted and %d refused, want 1 and 1", ok, refused)
	}
	out := h.results(run)
	approved := rs[0].status == http.StatusOK
	want := "blocked: no"
	if approved {
		want = "ran ask_me"
	}
	if got := out.Results[1].Output.Text(); got != want {
		t.Fatalf("ask_me result %q, want %q (approve won: %v)", got, want, approved)
	}
	if n := h.ledger(run, "c2"); (n == 1) != approved || n > 1 {
		t.Fatalf("ask_me ran %d times (approve won: %v)", n, approved)
	}
}

// TestHTTPErrors: the refusal codes and statuses of the ticket endpoints.
func TestHTTPErrors(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-errors"
	tk := h.park(run, map[string]string{})
	h.waitParkedView(contracts.BatchID(run, 1))
	tests := []struct {
		name, method, path, body string
		headers                  map[string]string
		wantStatus               int
		wantCode                 string
	}{
		{"unknown ticket", "GET", "/v1/tickets/perm.nobody.1.c1", "", nil, 404, "not_waiting"},
		{"approve unknown ticket", "POST", "/v1/tickets/perm.nobody.1.c1/approve", "{}", nil, 404, "not_waiting"},
		{"approve malformed correlation", "POST", "/v1/tickets/not-a-correlation/approve", "{}", nil, 404, "not_waiting"},
		{"approve a call that never parked", "POST", "/v1/tickets/perm." + run + ".1.c1/approve", "{}", nil, 404, "not_waiting"},
		{"approve with unknown field", "POST", "/v1/tickets/" + tk.CorrelationID + "/approve", `{"reason":"x"}`, nil, 400, "invalid_request"},
		{"approve with bad JSON", "POST", "/v1/tickets/" + tk.CorrelationID + "/approve", `{`, nil, 400, "invalid_request"},
		{"approve with trailing data", "POST", "/v1/tickets/" + tk.CorrelationID + "/approve", `{}{}`, nil, 400, "invalid_request"},
		{"note too long", "POST", "/v1/tickets/" + tk.CorrelationID + "/approve", `{"note":"` + strings.Repeat("n", api.MaxTextLength+1) + `"}`, nil, 400, "invalid_request"},
		{"approve with GET", "GET", "/v1/tickets/" + tk.CorrelationID + "/approve", "", nil, 405, "method_not_allowed"},
		{"unknown endpoint", "GET", "/v1/nothing", "", nil, 404, "not_found"},
		{"unknown batch", "GET", "/v1/batches/tool-batch:nobody:1", "", nil, 404, "not_found"},
		{"malformed batch id", "GET", "/v1/batches/nonsense", "", nil, 400, "invalid_request"},
		{"bad limit", "GET", "/v1/batches?limit=x", "", nil, 400, "invalid_request"},
		{"cancel with bad run id", "POST", "/v1/runs/bad.run/cancel", "{}", nil, 400, "invalid_id"},
		{"cancel naming another run in the body", "POST", "/v1/runs/" + run + "/cancel", `{"run_id":"run-other"}`, nil, 400, "invalid_request"},
		{"pause naming another tool in the body", "POST", "/v1/tools/echo/pause", `{"tool_id":"counter"}`, nil, 400, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(tt.method, tt.path, tt.body, tt.headers)
			e := r.apiError(t)
			if r.status != tt.wantStatus || e.Code != tt.wantCode || e.Message == "" {
				t.Fatalf("%s %s: %d %s, want %d %s", tt.method, tt.path, r.status, r.body, tt.wantStatus, tt.wantCode)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("content type %q", ct)
			}
		})
	}
	// None of the refusals touched the ticket.
	if _, err := h.client.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
		t.Fatalf("ticket after refusals: %v", err)
	}
}

// TestHTTPCancel: cancelling a parked run seals it; the parked and the ungated call become
// indeterminate ("cancelled"), the results publish once, and a late approval is refused.
func TestHTTPCancel(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-cancel"
	tk := h.park(run, map[string]string{})
	r := h.post("/v1/runs/"+run+"/cancel", `{"reason":"operator stop"}`)
	if r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var cr httpapi.CancelResult
	r.json(t, &cr)
	if cr.RunID != run || cr.Status != httpapi.StatusEnded || cr.End != contracts.RunEndCancelled || cr.EndedAt.IsZero() {
		t.Fatalf("cancel reply = %+v", cr)
	}
	out := h.results(run)
	got := []contracts.Outcome{out.Results[0].Outcome, out.Results[1].Outcome, out.Results[2].Outcome}
	if want := []contracts.Outcome{contracts.OutcomeCompleted, contracts.OutcomeIndeterminate, contracts.OutcomeIndeterminate}; !slices.Equal(got, want) {
		t.Fatalf("outcomes = %v, want %v", got, want)
	}
	r = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "")
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != "not_waiting" {
		t.Fatalf("approve after cancel: %d %s, want 409 not_waiting", r.status, r.body)
	}
	if n := h.ledger(run, "c2"); n != 0 {
		t.Fatalf("cancelled ask_me ran %d times", n)
	}
}

// TestHTTPBatchesList: the recent-batches list is newest first, carries phases and
// timelines but no arguments or outputs, and can be filtered by run.
func TestHTTPBatchesList(t *testing.T) {
	h := newHarness(t, api.Options{})
	h.park("run-list-a", map[string]string{"secret": "argument"})
	h.park("run-list-b", map[string]string{})
	var list httpapi.BatchList
	natstest.WaitFor(t, waitLong, func() bool {
		r := h.get("/v1/batches")
		if r.status != http.StatusOK {
			t.Fatalf("GET /v1/batches: %d %s", r.status, r.body)
		}
		list = httpapi.BatchList{}
		r.json(t, &list)
		return len(list.Batches) == 2 && list.Batches[0].Calls[1].Phase == contracts.PhaseAwaiting &&
			list.Batches[1].Calls[1].Phase == contracts.PhaseAwaiting
	}, "two parked batches in the list")
	if list.Batches[0].RunID != "run-list-b" || list.Batches[1].RunID != "run-list-a" {
		t.Fatalf("order = %s, %s; want newest first", list.Batches[0].RunID, list.Batches[1].RunID)
	}
	for _, b := range list.Batches {
		for _, c := range b.Calls {
			if c.Arguments != nil || c.Output != nil {
				t.Fatalf("list carries arguments or output: %+v", c)
			}
		}
		if len(b.Calls[0].Timeline) == 0 {
			t.Fatalf("echo has no timeline in the list: %+v", b.Calls[0])
		}
	}
	r := h.get("/v1/batches?run_id=run-list-a&limit=5")
	list = httpapi.BatchList{}
	r.json(t, &list)
	if len(list.Batches) != 1 || list.Batches[0].RunID != "run-list-a" {
		t.Fatalf("filtered list = %+v", list.Batches)
	}
	r = h.get("/v1/batches?limit=1")
	list = httpapi.BatchList{}
	r.json(t, &list)
	if len(list.Batches) != 1 || list.Batches[0].RunID != "run-list-b" {
		t.Fatalf("limited list = %+v", list.Batches)
	}
}

// TestHTTPTimeoutWhenTheGateIsDown: with no gate running, a decision is answered 504
// timeout after ResolveTimeout, the resume command stays queued on the tickets stream for
// the gate to apply later, and the ticket is untouched.
func TestHTTPTimeoutWhenTheGateIsDown(t *testing.T) {
	h := newHarnessOf(t, api.Options{ResolveTimeout: 300 * time.Millisecond}, []string{contracts.ServiceAPI})
	tk := contracts.ResumeTicket{CorrelationID: "perm.run-down.1.c1", RunID: "run-down", ThreadID: "t", SnapshotID: "s",
		BatchID: "tool-batch:run-down:1", CallID: "c1", ToolID: "ask_me", Arguments: []byte(`{}`), Reason: contracts.ReasonPermission,
		OpenedAt: time.Now().UTC()}
	if _, err := h.stack.Env.Tickets.Create(ctxFor(t, waitLong), tk.CorrelationID, tk); err != nil {
		t.Fatal(err)
	}
	r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "")
	if e := r.apiError(t); r.status != http.StatusGatewayTimeout || e.Code != "timeout" {
		t.Fatalf("approve with no gate: %d %s, want 504 timeout", r.status, r.body)
	}
	stream, err := h.stack.Env.JS.Stream(ctxFor(t, waitLong), h.stack.Env.Names.ControlStream())
	if err != nil {
		t.Fatal(err)
	}
	// On the api's own subject: its actors are authenticated (only the api user may
	// publish there), unlike a command on the public one.
	msg, err := stream.GetLastMsgForSubject(ctxFor(t, waitLong), h.stack.Env.Names.TicketResumeAPISubject())
	if err != nil {
		t.Fatalf("no queued resume command: %v", err)
	}
	if !strings.Contains(string(msg.Data), tk.CorrelationID) || msg.Header.Get("ce-type") != contracts.TypeTicketResume {
		t.Fatalf("queued command %s %v", msg.Data, msg.Header)
	}
	if _, err := h.client.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
		t.Fatalf("ticket after the timeout: %v", err)
	}
}

// TestHTTPExpiredTicket: an approval that arrives after the ticket's deadline is refused
// expired (409), and the call completes as "blocked: approval timed out" without running.
func TestHTTPExpiredTicket(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-expired"
	sub := contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-1", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"ask_quick"}},
		Calls: []contracts.ToolCall{call("q", "ask_quick", map[string]string{})},
	}
	tk := stacktest.Park(t, ctxFor(t, waitLong), h.client, sub, "q")
	if tk.Deadline == nil {
		t.Fatalf("ticket without a deadline: %+v", tk)
	}
	natstest.WaitFor(t, waitLong, func() bool { return time.Now().After(*tk.Deadline) }, "the ticket's deadline to pass")
	r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", "")
	if e := r.apiError(t); r.status != http.StatusConflict || e.Code != "expired" {
		t.Fatalf("late approve: %d %s, want 409 expired", r.status, r.body)
	}
	out := h.results(run)
	if got := texts(out); !slices.Equal(got, []string{"blocked: approval timed out"}) {
		t.Fatalf("results = %q", got)
	}
	if n := h.ledger(run, "q"); n != 0 {
		t.Fatalf("expired call ran %d times", n)
	}
}

// TestHTTPCancelIsDoneWhenItAnswers: "cancel, then submit the next step at once", many
// times. The cancel's 200 comes once the run has durably ended, so the step submitted right
// after it is always refused with run_cancelled — for a run whose last batch finished and
// for a run that never had one. Each round also sees the run's io.awaken.run.ended.v1 on
// its events subject.
func TestHTTPCancelIsDoneWhenItAnswers(t *testing.T) {
	h := newHarness(t, api.Options{})
	ctx := ctxFor(t, 2*time.Minute)
	deadline := time.Now().Add(90 * time.Second)
	const rounds = 20
	for i := range rounds {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d rounds within the deadline", i, rounds)
		}
		run := fmt.Sprintf("run-cancel-race-%d", i)
		next := int64(1)
		if i%2 == 0 { // a run whose step 1 finished: the run is idle, not busy
			res, err := h.client.SubmitAndWait(ctx, contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: 1,
				Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo"}},
				Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": "one"})}})
			if err != nil || len(res.Results) != 1 {
				t.Fatalf("%s step 1: %v %+v", run, err, res)
			}
			next = 2
		}
		events, err := h.nc.SubscribeSync(contracts.NewNames(h.client.Prefix()).EventsSubject(run))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.nc.Flush(); err != nil { // the server has the subscription before the cancel
			t.Fatal(err)
		}
		r := h.post("/v1/runs/"+run+"/cancel", `{"reason":"stop"}`)
		var cr httpapi.CancelResult
		r.json(t, &cr)
		if r.status != http.StatusOK || cr.Status != httpapi.StatusEnded || cr.End != contracts.RunEndCancelled {
			t.Fatalf("%s cancel: %d %s", run, r.status, r.body)
		}
		step := contracts.BatchSubmission{RunID: run, ThreadID: "t-" + run, Step: next,
			Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo"}},
			Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": "after the cancel"})}}
		r = h.post("/v1/batches?wait=20s", string(mustJSON(step)))
		if e := r.apiError(t); r.status != http.StatusConflict || e.Code != string(contracts.RejectRunCancelled) {
			t.Fatalf("%s step %d right after the cancel: %d %s, want 409 run_cancelled", run, next, r.status, r.body)
		}
		ended := waitRunEnded(t, events)
		if ended.RunID != run || ended.Reason != contracts.RunEndCancelled || !ended.EndedAt.Equal(cr.EndedAt) {
			t.Fatalf("%s run.ended event %+v, cancel reply %+v", run, ended, cr)
		}
		_ = events.Unsubscribe()
	}
}

// waitRunEnded returns the first io.awaken.run.ended.v1 on sub.
func waitRunEnded(t *testing.T, sub *nats.Subscription) contracts.RunEndedEvent {
	t.Helper()
	ctx := ctxFor(t, waitLong)
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("no run.ended event: %v", err)
		}
		ev, err := cloudevent.DecodeMsg(msg.Header, msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != contracts.TypeRunEnded {
			continue
		}
		var ended contracts.RunEndedEvent
		if err := json.Unmarshal(ev.Data, &ended); err != nil {
			t.Fatal(err)
		}
		if ev.ID != ended.RunID+":ended" || ev.Source != "awaken/gate" {
			t.Fatalf("run.ended id %q source %q", ev.ID, ev.Source)
		}
		return ended
	}
}

// TestHTTPCancelTimesOut: with no gate to end the run, the cancel answers 504
// cancel_timeout once the api's wait is over — the command stored, the run not ended — and
// the micro door answers the same code.
func TestHTTPCancelTimesOut(t *testing.T) {
	h := newHarnessOf(t, api.Options{ResolveTimeout: 2500 * time.Millisecond}, []string{contracts.ServiceBatcher, contracts.ServicePublisher, contracts.ServiceAPI})
	start := time.Now()
	r := h.post("/v1/runs/run-no-gate/cancel", `{}`)
	if e := r.apiError(t); r.status != http.StatusGatewayTimeout || e.Code != httpapi.CodeCancelTimeout {
		t.Fatalf("cancel without a gate: %d %s, want 504 cancel_timeout", r.status, r.body)
	}
	if waited := time.Since(start); waited < 2500*time.Millisecond {
		t.Errorf("answered after %s, before the wait was over", waited)
	}
	code, status := microErr(t, h.microRequest(httpapi.EndpointRunsCancel, []byte("run-no-gate")))
	if code != httpapi.CodeCancelTimeout || status != http.StatusGatewayTimeout {
		t.Errorf("micro cancel without a gate: %s %d", code, status)
	}
}
