package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/awaken-dev/awaken/internal/apitokens"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/cli"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// roleTokens is a tokens file with one token per role, one with two, and one without
// roles (every role, as before roles existed).
const roleTokens = `# name token roles
viewer    tok-viewer-0123456789    viewer
approver  tok-approver-0123456789  approver,viewer
operator  tok-operator-0123456789  operator
submitter tok-submitter-0123456789 submitter
legacy    tok-legacy-0123456789
`

// writeTokens writes body as a tokens file only its owner may read (mode 0600) in a
// temporary directory of t and returns its path.
func writeTokens(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// loadTokens writes body to a tokens file and loads it as --api-tokens does; the file
// must load.
func loadTokens(t *testing.T, body string) (map[string]string, map[string]apitokens.RoleSet) {
	t.Helper()
	tokens, roles, err := apitokens.Load(writeTokens(t, body))
	if err != nil {
		t.Fatal(err)
	}
	return tokens, roles
}

// loadRoleTokens loads roleTokens as --api-tokens does.
func loadRoleTokens(t *testing.T) api.Options {
	t.Helper()
	tokens, roles := loadTokens(t, roleTokens)
	return api.Options{Tokens: tokens, TokenRoles: roles}
}

func tok(name string) map[string]string { return bearer("tok-" + name + "-0123456789") }

// TestTokenRolesPerRoute: each route refuses a token without one of
// its roles with 403 missing_role before doing anything (a refused approval leaves the
// ticket open); a token whose line names no roles, and the single token, may do
// everything; GET /v1/session tells each token its roles.
func TestTokenRolesPerRoute(t *testing.T) {
	opts := loadRoleTokens(t)
	opts.Token = "tok-single-0123456789"
	h := newHarness(t, opts)
	tk := h.park("run-roles", map[string]string{})
	approvePath := "/v1/tickets/" + tk.CorrelationID + "/approve"

	type route struct{ method, path, body string }
	routes := map[string]route{
		"list tickets": {"GET", "/v1/tickets", ""},
		"read batches": {"GET", "/v1/batches", ""},
		"stream":       {"GET", "/v1/stream?probe=1", ""},
		"catalog":      {"GET", "/v1/tools", ""},
		"results":      {"GET", "/v1/batches/tool-batch:run-none:1/results", ""},
		"approve":      {"POST", approvePath, `{"note":"x"}`},
		"deny":         {"POST", "/v1/tickets/perm.run-none.1.c9/deny", `{"reason":"x"}`},
		"cancel":       {"POST", "/v1/runs/run-none/cancel", `{}`},
		"cancel call":  {"POST", "/v1/calls/tool-batch:run-none:1:c9/cancel", `{}`},
		"resolve call": {"POST", "/v1/calls/tool-batch:run-none:1:c9/resolve", `{"outcome":"not_run"}`},
		"pause":        {"POST", "/v1/tools/echo/pause", `{"reason":"roles test"}`},
		"resume tool":  {"POST", "/v1/tools/echo/resume", `{}`},
		"submit":       {"POST", "/v1/batches", `{}`},
		"policy test":  {"POST", "/v1/policy/test", `{"config":"policy: {default_behavior: deny}"}`},
	}
	allowed := map[string][]string{
		"viewer":    {"list tickets", "read batches", "stream", "catalog", "results", "policy test"},
		"operator":  {"cancel", "cancel call", "resolve call", "pause", "resume tool", "catalog"},
		"submitter": {"catalog", "results", "submit"},
	}
	for token, names := range allowed {
		for name, rt := range routes {
			may := false
			for _, n := range names {
				may = may || n == name
			}
			if rt.path == "/v1/stream?probe=1" && may {
				continue // an event stream does not end: its refusal is what is checked here
			}
			r := h.do(rt.method, rt.path, rt.body, tok(token))
			switch {
			case !may && (r.status != http.StatusForbidden || r.apiError(t).Code != httpapi.CodeMissingRole):
				t.Errorf("%s → %s %s: %d %s, want 403 missing_role", token, rt.method, rt.path, r.status, r.body)
			case may && r.status == http.StatusForbidden:
				t.Errorf("%s → %s %s: 403 %s, want it allowed", token, rt.method, rt.path, r.body)
			}
		}
	}
	if e := h.do("POST", approvePath, `{}`, tok("viewer")).apiError(t); !strings.Contains(e.Message, "approver") || !strings.Contains(e.Message, "viewer") {
		t.Errorf("refusal %q does not name the role needed and the roles held", e.Message)
	}
	if _, err := h.api.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
		t.Fatalf("the ticket after refused approvals: %v, want it still open", err)
	}

	for name, want := range map[string]string{
		"viewer": "viewer", "approver": "viewer,approver", "operator": "operator", "submitter": "submitter",
		"legacy": "viewer,approver,operator,submitter", "single": "viewer,approver,operator,submitter",
	} {
		var s httpapi.Session
		h.do("GET", "/v1/session", "", tok(name)).json(t, &s)
		got := make([]string, len(s.Roles))
		for i, r := range s.Roles {
			got[i] = string(r)
		}
		wantActor := name
		if name == "single" {
			wantActor = api.SingleTokenName
		}
		if strings.Join(got, ",") != want || s.Actor != wantActor {
			t.Errorf("session of %s: %+v, want actor %s with roles %s", name, s, wantActor, want)
		}
	}

	if r := h.do("POST", approvePath, `{"note":"ok"}`, tok("approver")); r.status != http.StatusOK {
		t.Fatalf("approver's approval: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/v1/tickets", "", tok("legacy")); r.status != http.StatusOK {
		t.Errorf("a token without roles: %d %s, want every role", r.status, r.body)
	}
}

// startSecondAPI starts another api process's worth of api (HTTP only) on h's server,
// with opts, and returns its base URL.
func (h *harness) startSecondAPI(opts api.Options) string {
	h.t.Helper()
	opts.DisableMicro = true
	st := h.srv.StartStack(ctxFor(h.t, stacktest.StartTimeout), app.Options{Config: h.stack.Env.Config, Services: []string{contracts.ServiceAPI}, API: opts})
	return strings.TrimSuffix(st.APIService.URL(), "/")
}

// parkTwo submits run with one call of ask_two (two approvals needed) and waits for its
// ticket.
func (h *harness) parkTwo(run string) contracts.ResumeTicket {
	h.t.Helper()
	return h.parkCall(run, "ask_two", map[string]int{"amount": 10})
}

// TestApprovalsAcrossTwoAPIs: a ticket that needs two approvals,
// approved at once by two people through two api processes, is approved exactly once —
// one answer 202 approval_recorded, the other 200 approved — and its tool runs once. A
// stale digest is 409 digest_mismatch and a second approval by the same token 409
// duplicate_approver, both leaving the ticket as it was; the ticket shows the approvals
// so far and its digest.
func TestApprovalsAcrossTwoAPIs(t *testing.T) {
	opts := loadRoleTokens(t)
	opts.Tokens["alice"], opts.Tokens["bob"] = "tok-alice-0123456789", "tok-bob-0123456789"
	h := newHarness(t, opts)
	second := h.startSecondAPI(opts)
	bases := []string{h.base, second}

	tk := h.parkTwo("run-two-stale")
	if tk.ApprovalsRequired != 2 || tk.ArgumentsDigest != contracts.ArgumentsDigest([]byte(`{"amount":10}`)) {
		t.Fatalf("ticket %+v, want two approvals required and the arguments' digest", tk)
	}
	path := "/v1/tickets/" + tk.CorrelationID + "/approve"
	stale := fmt.Sprintf(`{"arguments_digest":%q}`, contracts.ArgumentsDigest([]byte(`{"amount":1000}`)))
	if r := h.do("POST", path, stale, tok("alice")); r.status != http.StatusConflict || r.apiError(t).Code != string(contracts.ResumeDigestMismatch) {
		t.Fatalf("stale digest: %d %s, want 409 digest_mismatch", r.status, r.body)
	}
	bound := fmt.Sprintf(`{"arguments_digest":%q}`, tk.ArgumentsDigest)
	if r := h.do("POST", path, bound, tok("alice")); r.status != http.StatusAccepted {
		t.Fatalf("first approval: %d %s, want 202 approval_recorded", r.status, r.body)
	}
	if r := h.do("POST", path, bound, tok("alice")); r.status != http.StatusConflict || r.apiError(t).Code != string(contracts.ResumeDuplicateApprover) {
		t.Fatalf("alice again: %d %s, want 409 duplicate_approver", r.status, r.body)
	}
	var shown contracts.ResumeTicket
	h.do("GET", "/v1/tickets/"+tk.CorrelationID, "", tok("viewer")).json(t, &shown)
	if len(shown.Approvals) != 1 || shown.Approvals[0].Actor != "alice" || shown.ArgumentsDigest != tk.ArgumentsDigest {
		t.Fatalf("ticket shows %+v, want alice's approval and the digest", shown)
	}
	if r := h.do("POST", path, `{}`, tok("bob")); r.status != http.StatusOK {
		t.Fatalf("bob's approval: %d %s, want 200 approved", r.status, r.body)
	}

	for round := range 5 {
		run := fmt.Sprintf("run-two-%d", round)
		tk := h.parkTwo(run)
		path := "/v1/tickets/" + tk.CorrelationID + "/approve"
		statuses := make([]int, 2)
		var wg sync.WaitGroup
		for i, who := range []string{"alice", "bob"} {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(ctxFor(t, waitLong), "POST", bases[i]+path, strings.NewReader(`{}`))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", tok(who)["Authorization"])
				res, err := h.http.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				res.Body.Close()
				statuses[i] = res.StatusCode
			})
		}
		wg.Wait()
		if statuses[0]+statuses[1] != http.StatusOK+http.StatusAccepted {
			t.Fatalf("round %d: statuses %v, want one 200 approved and one 202 approval_recorded", round, statuses)
		}
		res := h.results(run)
		if got := texts(res); len(got) != 1 || strings.HasPrefix(got[0], "blocked") {
			t.Fatalf("round %d: results %v, want the tool's output", round, got)
		}
		if n := h.ledger(run, "c1"); n != 1 {
			t.Fatalf("round %d: the tool ran %d times, want once", round, n)
		}
	}
}

// TestBrowserConsoleRolesAndApprovals (in headless Chromium): the
// console shows only what the token may do — a viewer sees the ticket without approve or
// pause controls, an approver approves but cannot pause, an operator pauses but sees no
// tickets — and, for a ticket that needs two approvals, the digest and the approvals so
// far; its approval carries the digest it shows and is counted, not decided, until a
// second person approves.
func TestBrowserConsoleRolesAndApprovals(t *testing.T) {
	br := newBrowser(t)
	opts := loadRoleTokens(t)
	opts.Tokens["bob"] = "tok-bob-0123456789"
	h := newHarness(t, opts)
	tk := h.parkTwo("run-browser-two")
	row := rowSel(tk.CorrelationID)

	signIn := func(name string) {
		t.Helper()
		br.do(t, "sign in as "+name,
			chromedp.Navigate(h.base+"/"),
			chromedp.Evaluate[chromedp.Void](`sessionStorage.clear()`),
			chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`#login-form`)),
			chromedp.SetValue(chromedp.CSS(`#token`), "tok-"+name+"-0123456789"),
			chromedp.Click(chromedp.CSS(`#login-form button`)),
			chromedp.WaitVisible(chromedp.CSS(`#whoami`)),
		)
	}
	count := func(sel string) int {
		return run(t, br, "count "+sel, chromedp.Evaluate[int](`document.querySelectorAll('`+sel+`').length`))
	}

	signIn("viewer")
	br.do(t, "the viewer sees the ticket", chromedp.WaitVisible(row+" .no-role"), chromedp.WaitVisible(toolSel("echo", ".no-role")))
	if n := count(string(row) + " button.approve, " + string(row) + " button.deny, #tools button.pause, #tools button.resume"); n != 0 {
		t.Errorf("the viewer is shown %d approve, deny, pause or resume controls", n)
	}
	if got := textOf(t, br, row+" .approvals"); got != "approvals 0 of 2" {
		t.Errorf("approvals shown as %q", got)
	}
	if got := textOf(t, br, row+" .digest"); !strings.HasPrefix(tk.ArgumentsDigest, strings.TrimSuffix(got, "…")) || len(got) < 12 {
		t.Errorf("digest shown as %q, want the start of %s", got, tk.ArgumentsDigest)
	}
	br.screenshot(t, "console-viewer.png")

	signIn("approver")
	br.do(t, "record what the console sends",
		chromedp.WaitVisible(row+" button.approve"),
		chromedp.Evaluate[chromedp.Void](`window.sent = []; const f = window.fetch; window.fetch = (u, o) => { if (o && o.body) window.sent.push(String(o.body)); return f(u, o); }; true`),
	)
	if n := count("#tools button.pause"); n != 0 {
		t.Errorf("the approver is shown %d pause controls", n)
	}
	br.do(t, "approve once",
		chromedp.Click(row+" button.approve"),
		chromedp.WaitVisible(row+" .approved-by-me"),
	)
	if got := textOf(t, br, row+" .approvals"); got != "approvals 1 of 2: approver" {
		t.Errorf("approvals after one: %q", got)
	}
	sent := run(t, br, "read what was sent", chromedp.Evaluate[[]string](`window.sent`))
	if len(sent) != 1 || !strings.Contains(sent[0], `"arguments_digest":"`+tk.ArgumentsDigest+`"`) {
		t.Errorf("the console sent %q, want the approval with the ticket's digest", sent)
	}
	br.screenshot(t, "console-one-of-two.png")
	if r := h.do(http.MethodPost, "/v1/tickets/"+tk.CorrelationID+"/approve", `{}`, tok("bob")); r.status != http.StatusOK {
		t.Fatalf("bob's approval: %d %s", r.status, r.body)
	}
	br.do(t, "the ticket leaves once approved twice", chromedp.WaitNotPresent(row))
	h.results("run-browser-two")
	if n := h.ledger("run-browser-two", "c1"); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}

	signIn("operator")
	br.do(t, "the operator sees the kill switch", chromedp.WaitVisible(toolSel("echo", "button.pause")))
	if n := count("#tickets tbody tr"); n != 0 {
		t.Errorf("the operator (no viewer role) is shown %d tickets", n)
	}
	br.screenshot(t, "console-operator.png")
	// The sign-in probes are failed requests the browser logs; nothing else may appear.
	br.check(t, func(p string) bool { return strings.Contains(p, "401") })
}

// TestCLIApproveNamesTheDigest: `awaken tickets approve --digest` sends the digest a person
// was shown; a stale one is refused digest_mismatch and the ticket stays open, the
// ticket's own is approved, and without --digest the CLI names the ticket it read.
func TestCLIApproveNamesTheDigest(t *testing.T) {
	h := newHarness(t, api.Options{})
	tk := h.park("run-cli-digest", map[string]string{})
	approve := func(extra ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		args := append([]string{"tickets", "approve", tk.CorrelationID, "--as", "carol", "--json", "--nats-url", h.srv.URL()}, extra...)
		code := cli.Main(context.Background(), args, &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := approve("--digest", contracts.ArgumentsDigest([]byte(`{"other":true}`))); code == 0 || !strings.Contains(out, string(contracts.ResumeDigestMismatch)) {
		t.Fatalf("stale --digest: exit %d: %s, want refused digest_mismatch", code, out)
	}
	if _, err := h.api.Ticket(ctxFor(t, waitLong), tk.CorrelationID); err != nil {
		t.Fatalf("the ticket after a stale digest: %v, want it open", err)
	}
	if code, out := approve("--digest", tk.ArgumentsDigest); code != 0 || !strings.Contains(out, `"approved"`) {
		t.Fatalf("--digest of the ticket: exit %d: %s, want approved", code, out)
	}
	h.results("run-cli-digest")
	var cmd contracts.ResumeCommand
	stream, err := h.stack.Env.JS.Stream(ctxFor(t, waitLong), "AWAKEN_CONTROL")
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(ctxFor(t, waitLong), "awaken.tickets.resume")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.Data, &cmd); err != nil || cmd.Result.Permission.ArgumentsDigest != tk.ArgumentsDigest {
		t.Fatalf("the CLI's command %s (%v), want it to name the ticket's digest", msg.Data, err)
	}

	tk = h.park("run-cli-digest-default", map[string]string{})
	if code, out := approve(); code != 0 || !strings.Contains(out, `"approved"`) {
		t.Fatalf("approve without --digest: exit %d: %s", code, out)
	}
	msg, err = stream.GetLastMsgForSubject(ctxFor(t, waitLong), "awaken.tickets.resume")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.Data, &cmd); err != nil || cmd.Result.Permission.ArgumentsDigest != tk.ArgumentsDigest {
		t.Fatalf("the CLI's command without --digest %s (%v), want the digest of the ticket it read", msg.Data, err)
	}
}

// TestMicroApprovalsCountNATSUsers: through the micro service each NATS user's own
// resolve subject is one approver ("nats:alice", "nats:bob"): alice's approval of a ticket
// that needs two is approval_recorded, hers again duplicate_approver, a stale digest in
// the short form digest_mismatch, and bob's approves.
func TestMicroApprovalsCountNATSUsers(t *testing.T) {
	h := newHarness(t, api.Options{})
	tk := h.parkTwo("run-micro-two")
	short := func(digest string) []byte {
		return mustJSON(httpapi.ShortDecision{CorrelationID: tk.CorrelationID, Decision: contracts.DecisionAllow, ArgumentsDigest: digest})
	}
	var res contracts.TicketResolution
	okJSON(t, h.microRequest(httpapi.EndpointTicketsResolve+".alice", short("")), &res)
	if res.Code != contracts.ResolvedApprovalRecorded || res.Actor != "nats:alice" || res.Approvals != 1 {
		t.Fatalf("alice's approval: %+v, want approval_recorded by nats:alice", res)
	}
	if code, status := microErr(t, h.microRequest(httpapi.EndpointTicketsResolve+".alice", short(""))); code != string(contracts.ResumeDuplicateApprover) || status != http.StatusConflict {
		t.Fatalf("alice again: %s %d, want duplicate_approver 409", code, status)
	}
	if code, _ := microErr(t, h.microRequest(httpapi.EndpointTicketsResolve+".bob", short("sha256:stale"))); code != string(contracts.ResumeDigestMismatch) {
		t.Fatalf("a stale digest: %s, want digest_mismatch", code)
	}
	okJSON(t, h.microRequest(httpapi.EndpointTicketsResolve+".bob", short(tk.ArgumentsDigest)), &res)
	if res.Code != "approved" || res.Actor != "nats:bob" || res.Approvals != 2 {
		t.Fatalf("bob's approval: %+v, want approved by nats:bob with 2 approvals", res)
	}
}
