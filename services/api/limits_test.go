package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

const limitsConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
policy:
  default_behavior: allow
  limits:
    - { name: echo-once, tools: [echo], key: run, count: 1 }
    - { name: echo-rate, tools: [echo], key: tenant, rate: { n: 100, window: 1h }, shadow: true }
`

// TestLimitsOverTheWholePipeline: with a count of one echo per run, the second echo call
// of a batch is blocked with count_exceeded (its published output says so), and GET
// /v1/limits reports the run's use (1 of 1) and the tenant's shadow rate.
func TestLimitsOverTheWholePipeline(t *testing.T) {
	h := newHarnessConfig(t, limitsConfig, api.Options{}, append(app.AllServices(), contracts.ServiceAPI))
	sub := contracts.BatchSubmission{RunID: "lim-a", ThreadID: "t", Step: 1, Tenant: "acme",
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": "one"}), call("c2", "echo", map[string]string{"text": "two"})},
	}
	if _, err := h.client.Submit(ctxFor(t, waitLong), sub); err != nil {
		t.Fatal(err)
	}
	res := h.results("lim-a")
	if len(res.Results) != 2 || res.Results[0].Output.IsError ||
		!strings.HasPrefix(res.Results[1].Output.Text(), "blocked: count_exceeded: limit echo-once") {
		t.Fatalf("results %+v, want c1 run and c2 blocked by echo-once", res.Results)
	}

	r := h.get("/v1/limits")
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/limits: %d %s", r.status, r.body)
	}
	var rep httpapi.LimitsReport
	r.json(t, &rep)
	if len(rep.Limits) != 2 || rep.Limits[0].Name != "echo-once" || rep.Limits[1].Window != "1h0m0s" || !rep.Limits[1].Shadow {
		t.Fatalf("limits %+v", rep.Limits)
	}
	got := map[string]contracts.LimitUse{}
	for _, u := range rep.Use {
		got[u.Limit+"/"+u.Value] = u
	}
	if u := got["echo-once/lim-a"]; u.Used != 1 || u.Max != 1 || u.Key != "run" {
		t.Fatalf("echo-once use %+v (report %+v), want 1 of 1 for run lim-a", u, rep.Use)
	}
	if u := got["echo-rate/acme"]; u.Used != 1 || u.Max != 100 || u.Window == nil || !u.Shadow {
		t.Fatalf("echo-rate use %+v (report %+v), want the one call that ran, in its window", u, rep.Use)
	}
	if r := h.get("/v1/limits?limit=nosuch"); r.status != http.StatusNotFound {
		t.Fatalf("an unknown limit answered %d, want 404", r.status)
	}
}

// TestBrowserConsoleShowsLimits: the console's Limits panel lists the host limits and,
// once a run spent its count, the run's use (1 / 1).
func TestBrowserConsoleShowsLimits(t *testing.T) {
	br := newBrowser(t)
	h := newHarnessConfig(t, limitsConfig, api.Options{}, append(app.AllServices(), contracts.ServiceAPI))
	br.do(t, "load the console",
		chromedp.Navigate(h.base+"/"),
		chromedp.WaitVisible(`#limits-section`),
		chromedp.WaitVisible(`tr[data-limit="echo-once"]`),
	)
	sub := contracts.BatchSubmission{RunID: "lim-console", ThreadID: "t", Step: 1, Tenant: "acme",
		Agent: contracts.AgentSnapshot{SnapshotID: "snap-1", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{call("c1", "echo", map[string]string{"text": "one"})},
	}
	if _, err := h.client.Submit(ctxFor(t, waitLong), sub); err != nil {
		t.Fatal(err)
	}
	h.results("lim-console")
	br.do(t, "see the run's use",
		chromedp.Reload(),
		chromedp.WaitVisible(`tr[data-limit="echo-once"].paused`),
	)
	if got := run(t, br, "read the use", chromedp.Text(`tr[data-limit="echo-once"] td:nth-child(5)`)); got != "1 / 1" {
		t.Errorf("echo-once use shown as %q, want 1 / 1", got)
	}
	br.screenshot(t, "console-limits.png")
	br.check(t, nil)
}
