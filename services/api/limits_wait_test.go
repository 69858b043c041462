package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

const rateWaitConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
policy:
  default_behavior: allow
  limits:
    - { name: hourly, tools: [echo], key: global, rate: { n: 1, window: 1h }, over: wait }
`

// TestApprovingARateDeferralOverHTTPIsRefused: with one echo an hour and over: wait, the
// second run's echo is deferred to the next hour on a scheduled_action ticket. An approver
// approving that ticket over HTTP is answered 409 deferred_by_limit: the call does not run
// inside the full hour (GET /v1/limits keeps it at 1 of 1 with one call run), and the
// ticket stays open, due at the next hour.
//
// The services' clock runs in the middle of an hour still to come (30 to 90 minutes ahead
// of the real time), so both runs fall in one window whatever the time of day, and the
// ticket's due time, the next hour on that clock, is an hour or more away in the server's
// real time: its timer cannot hand the call over while the test looks.
func TestApprovingARateDeferralOverHTTPIsRefused(t *testing.T) {
	start := time.Now().UTC()
	ahead := start.Truncate(time.Hour).Add(90 * time.Minute).Sub(start)
	now := func() time.Time { return time.Now().UTC().Add(ahead) }
	h := newHarnessStack(t, rateWaitConfig, app.Options{Services: append(app.AllServices(), contracts.ServiceAPI), Now: now})
	sub := func(run string) contracts.BatchSubmission {
		return contracts.BatchSubmission{RunID: run, ThreadID: "t", Step: 1,
			Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
			Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": run})}}
	}
	if _, err := h.client.Submit(ctxFor(t, waitLong), sub("rate-a")); err != nil {
		t.Fatal(err)
	}
	if got := texts(h.results("rate-a")); len(got) != 1 || got[0] != "rate-a" {
		t.Fatalf("rate-a results %q, want its echo run", got)
	}
	if n := h.ledger("rate-a", "c1"); n != 1 {
		t.Fatalf("rate-a's echo ran %d times by the ledger, want 1", n)
	}
	tk := stacktest.Park(t, ctxFor(t, waitLong), h.client, sub("rate-b"), "c1")
	next := now().Truncate(time.Hour).Add(time.Hour)
	if tk.Reason != contracts.ReasonScheduledAction || tk.DueAt == nil || !tk.DueAt.Equal(next) {
		t.Fatalf("rate-b's ticket %+v, want a scheduled_action due at %s", tk, next)
	}

	r := h.post("/v1/tickets/"+tk.CorrelationID+"/approve", `{"note":"run it now"}`)
	if r.status != http.StatusConflict || r.apiError(t).Code != string(contracts.ResumeDeferredByLimit) {
		t.Fatalf("early approval over HTTP: %d %s, want 409 %s", r.status, r.body, contracts.ResumeDeferredByLimit)
	}
	if r := h.get("/v1/tickets/" + tk.CorrelationID); r.status != http.StatusOK {
		t.Fatalf("the ticket after the refused approval: %d %s, want it open", r.status, r.body)
	}
	var rep httpapi.LimitsReport
	h.get("/v1/limits").json(t, &rep)
	for _, u := range rep.Use {
		if u.Window != nil && u.Window.Before(next) && u.Used != 1 {
			t.Errorf("this hour's use %+v, want 1 of 1", u)
		}
	}
	if n := h.ledger("rate-b", "c1"); n != 0 {
		t.Fatalf("rate-b's echo ran %d times inside the full hour, want 0", n)
	}
}
