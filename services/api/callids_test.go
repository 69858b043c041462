package api_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestHTTPProviderCallIDs: a call whose id is a provider's dotted/colon id parks on a
// ticket whose correlation id (it holds the call's encoded key) is a URL path segment the
// routes take as it is: the ticket is read and approved over HTTP, and the id comes back
// verbatim in the ticket, the resolution, the batch view and the results.
func TestHTTPProviderCallIDs(t *testing.T) {
	h := newHarness(t, api.Options{})
	const run = "run-http-callids"
	const askID = "functions.ask_me:1"
	sub := contracts.BatchSubmission{
		RunID: run, ThreadID: "thread-" + run, Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo", "ask_me"}},
		Calls: []contracts.ToolCall{
			call("toolu_01A09q90qw90lq917835lq9", "echo", map[string]string{"text": "before"}),
			call(askID, "ask_me", map[string]string{}),
		},
	}
	ctx := ctxFor(t, waitLong)
	tk := stacktest.Park(t, ctx, h.client, sub, askID)
	if want := "perm." + run + ".1.=" + "ZnVuY3Rpb25zLmFza19tZTox"; tk.CorrelationID != want || url.PathEscape(tk.CorrelationID) != tk.CorrelationID {
		t.Fatalf("correlation id %q, want %q (a path segment as it is)", tk.CorrelationID, want)
	}
	var got contracts.ResumeTicket
	r := h.get("/v1/tickets/" + tk.CorrelationID)
	if r.status != http.StatusOK {
		t.Fatalf("GET ticket: %d %s", r.status, r.body)
	}
	r.json(t, &got)
	if got.CallID != askID {
		t.Fatalf("ticket call id %q", got.CallID)
	}
	r = h.post("/v1/tickets/"+tk.CorrelationID+"/approve", `{"note":"ok"}`)
	if r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	var res contracts.TicketResolution
	r.json(t, &res)
	if res.Code != "approved" || res.CallID != askID {
		t.Fatalf("resolution %+v", res)
	}
	out := h.results(run)
	if len(out.Results) != 2 || out.Results[0].CallID != "toolu_01A09q90qw90lq917835lq9" || out.Results[1].CallID != askID ||
		out.Results[1].Output.Text() != "ran ask_me" {
		t.Fatalf("results %+v", out.Results)
	}
	v := h.batch(contracts.BatchID(run, 1))
	if len(v.Calls) != 2 || v.Calls[1].CallID != askID {
		t.Fatalf("batch view calls %+v", v.Calls)
	}
}
