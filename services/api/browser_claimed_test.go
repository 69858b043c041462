package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// TestBrowserConsoleShowsClaimedActors: the console shows
// an actor no door authenticated — a platform's resume command naming "alice" on the
// public subject — as "alice (claimed)", styled apart, and the approval by the token
// named alice as plain "alice".
func TestBrowserConsoleShowsClaimedActors(t *testing.T) {
	br := newBrowser(t)
	const token = "tok-alice-0123456789"
	h := newHarness(t, api.Options{Tokens: map[string]string{"alice": token}})
	allow := contracts.PermissionDecision{Decision: contracts.DecisionAllow}

	claimed := h.parkEcho("run-browser-claimed", "claimed")
	if res, err := h.client.Decide(ctxFor(t, waitLong), claimed, allow, "alice"); err != nil || !res.ActorClaimed {
		t.Fatalf("the platform's approval as alice: %+v %v, want claimed", res, err)
	}
	authenticated := h.parkEcho("run-browser-authenticated", "authenticated")
	if r := h.do(http.MethodPost, "/v1/tickets/"+authenticated.CorrelationID+"/approve", `{}`, bearer(token)); r.status != http.StatusOK {
		t.Fatalf("approve with alice's token: %d %s", r.status, r.body)
	}
	h.results("run-browser-claimed")
	h.results("run-browser-authenticated")

	claimedBatch := contracts.BatchID("run-browser-claimed", 1)
	authBatch := contracts.BatchID("run-browser-authenticated", 1)
	br.do(t, "sign in",
		chromedp.Navigate(h.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#login-form`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Click(chromedp.CSS(`#login-form button`)),
	)
	br.do(t, "list the batches",
		chromedp.WaitVisible(batchSel(claimedBatch, ".badge.published")),
		chromedp.WaitVisible(batchSel(authBatch, ".badge.published")),
	)
	// Open both batches: opening one loads its detail and re-renders the list, so the
	// poll opens each (again) until its detail is shown.
	for _, b := range []string{claimedBatch, authBatch} {
		q := `details[data-batch="` + b + `"]`
		br.do(t, "open "+b, chromedp.Poll[chromedp.Void](`(() => { const d = document.querySelector('`+q+`'); if (!d) return false; `+
			`if (!d.open) d.open = true; return !!d.querySelector("pre.args"); })()`))
	}
	if got := textOf(t, br, batchSel(claimedBatch, "td.actor.claimed")); got != "alice (claimed)" {
		t.Errorf("the platform's approval shows decided by %q, want %q", got, "alice (claimed)")
	}
	if got := textOf(t, br, batchSel(authBatch, "td.actor")); got != "alice" {
		t.Errorf("the token's approval shows decided by %q, want alice", got)
	}
	sel := string(batchSel(authBatch, "td.actor.claimed"))
	if n := run(t, br, "count claimed cells", chromedp.Evaluate[int](`document.querySelectorAll('`+sel+`').length`)); n != 0 {
		t.Errorf("the token's approval is styled as claimed")
	}
	br.screenshot(t, "console-claimed.png")
	// The sign-in probe is a failed request the browser logs; nothing else may appear.
	br.check(t, func(p string) bool { return strings.Contains(p, "401") })
}
