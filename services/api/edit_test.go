package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/wiring/cli"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// parkEcho submits run with one call of ask_echo (echo behind an approval) proposing
// text, and waits for its ticket.
func (h *harness) parkEcho(run, text string) contracts.ResumeTicket {
	h.t.Helper()
	return h.parkCall(run, "ask_echo", map[string]string{"text": text})
}

// waitEchoSchema waits until the catalog shows the schema brain-exec derived for echo's
// arguments (published once it started): the schema an edit is validated against.
func (h *harness) waitEchoSchema() {
	h.t.Helper()
	natstest.WaitFor(h.t, waitLong, func() bool {
		tools, err := h.api.Catalog(ctxFor(h.t, waitLong))
		if err != nil {
			return false
		}
		for _, t := range tools {
			if t.ID == "ask_echo" && strings.Contains(string(t.Parameters), `"text"`) {
				return true
			}
		}
		return false
	}, "echo's published schema")
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

// TestApproveWithEditsOverHTTP: with named tokens from an --api-tokens file, an edit that
// does not fit echo's schema is refused 422 invalid_arguments and leaves the ticket open;
// a valid edit then runs echo with the new text, and the batch view keeps both arguments
// and the token's name; an edit matching a deny rule denies the call; the single
// --api-token decides as "api-token"; the body cannot name another actor.
func TestApproveWithEditsOverHTTP(t *testing.T) {
	tokens, _ := loadTokens(t, "# operators\nalice tok-alice-0123456789\n\nbob  tok-bob-0123456789\n")
	h := newHarness(t, api.Options{Token: "tok-single", Tokens: tokens})
	h.waitEchoSchema()

	const run = "run-edit-http"
	tk := h.parkEcho(run, "proposed")
	path := "/v1/tickets/" + tk.CorrelationID + "/approve"
	for _, bad := range []string{`{"arguments":{"text":5}}`, `{"arguments":{"text":"x","extra":1}}`, `{"arguments":"text"}`} {
		r := h.do(http.MethodPost, path, bad, bearer("tok-alice-0123456789"))
		if e := r.apiError(t); r.status != http.StatusUnprocessableEntity || e.Code != string(contracts.ResumeInvalidArguments) {
			t.Fatalf("approve %s: %d %s, want 422 invalid_arguments", bad, r.status, r.body)
		}
		if r := h.do(http.MethodGet, "/v1/tickets/"+tk.CorrelationID, "", bearer("tok-alice-0123456789")); r.status != http.StatusOK {
			t.Fatalf("the ticket is gone after the invalid edit %s: %d %s", bad, r.status, r.body)
		}
	}
	if r := h.do(http.MethodPost, path, `{"actor":"mallory"}`, bearer("tok-alice-0123456789")); r.status != http.StatusBadRequest {
		t.Fatalf("a body naming its actor: %d %s, want 400", r.status, r.body)
	}
	r := h.do(http.MethodPost, path, `{"note":"fixed the text","arguments":{"text":"edited"}}`, bearer("tok-alice-0123456789"))
	var res contracts.TicketResolution
	r.json(t, &res)
	if r.status != http.StatusOK || res.Code != "approved" || res.Actor != "alice" {
		t.Fatalf("approve with edits: %d %s, want approved by alice", r.status, r.body)
	}
	if got := texts(h.results(run)); len(got) != 1 || got[0] != "edited" {
		t.Fatalf("results %q, want echo of the edited text", got)
	}
	view := h.getBatch(contracts.BatchID(run, 1), "tok-bob-0123456789")
	c := view.Calls[0]
	if c.Actor != "alice" || !c.Edited || string(c.Arguments) != `{"text":"edited"}` || string(c.ProposedArguments) != `{"text":"proposed"}` {
		t.Fatalf("call view %+v, want alice's edit with both arguments", c)
	}

	tk = h.parkEcho("run-edit-deny", "proposed")
	r = h.do(http.MethodPost, "/v1/tickets/"+tk.CorrelationID+"/approve", `{"arguments":{"text":"rm -rf /"}}`, bearer("tok-bob-0123456789"))
	r.json(t, &res)
	if r.status != http.StatusOK || res.Code != "denied" || res.Actor != "bob" {
		t.Fatalf("approve an edit the policy denies: %d %s, want denied, by bob", r.status, r.body)
	}
	if got := texts(h.results("run-edit-deny")); got[0] != "blocked: tool ask_echo denied by policy" {
		t.Fatalf("results %q, want the policy's block", got)
	}

	tk = h.parkEcho("run-single", "proposed")
	r = h.do(http.MethodPost, "/v1/tickets/"+tk.CorrelationID+"/deny", `{"reason":"no"}`, bearer("tok-single"))
	r.json(t, &res)
	if r.status != http.StatusOK || res.Actor != api.SingleTokenName {
		t.Fatalf("deny with the single token: %d %s, want actor %s", r.status, r.body, api.SingleTokenName)
	}
	if c := h.getBatch(contracts.BatchID("run-single", 1), "tok-single").Calls[0]; c.Actor != api.SingleTokenName || c.Edited {
		t.Fatalf("call view %+v, want decided by %s without edit", c, api.SingleTokenName)
	}
}

// getBatch reads the batch view with token.
func (h *harness) getBatch(batchID, token string) httpapi.BatchView {
	h.t.Helper()
	r := h.do(http.MethodGet, "/v1/batches/"+batchID, "", bearer(token))
	if r.status != http.StatusOK {
		h.t.Fatalf("GET batch %s: %d %s", batchID, r.status, r.body)
	}
	var v httpapi.BatchView
	r.json(h.t, &v)
	return v
}

// TestApproveWithEditsOverMicroAndCLI: the micro short form carries edited arguments and
// records the NATS user of the per-user subject ("nats:{user}"), or "nats" on the shared
// subject, where a command's own actor is kept after it; `awaken tickets approve
// --arguments --as` edits and records its name, and `awaken batch show` shows it; a
// command published on the subject records its actor.
func TestApproveWithEditsOverMicroAndCLI(t *testing.T) {
	h := newHarness(t, api.Options{})
	h.waitEchoSchema()

	tk := h.parkEcho("run-micro-user", "proposed")
	m, err := h.nc.RequestWithContext(ctxFor(t, waitLong), httpapi.ResolveAsSubject("awaken", "dave"),
		mustJSON(httpapi.ShortDecision{CorrelationID: tk.CorrelationID, Decision: contracts.DecisionAllow, Arguments: json.RawMessage(`{"text":5}`)}))
	if err != nil {
		t.Fatal(err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != string(contracts.ResumeInvalidArguments) {
		t.Fatalf("micro invalid edit: code %q %s, want invalid_arguments", code, m.Data)
	}
	m, err = h.nc.RequestWithContext(ctxFor(t, waitLong), httpapi.ResolveAsSubject("awaken", "dave"),
		mustJSON(httpapi.ShortDecision{CorrelationID: tk.CorrelationID, Decision: contracts.DecisionAllow, Arguments: json.RawMessage(`{"text":"by micro"}`)}))
	if err != nil {
		t.Fatal(err)
	}
	var res contracts.TicketResolution
	if err := json.Unmarshal(m.Data, &res); err != nil || res.Code != "approved" || res.Actor != "nats:dave" {
		t.Fatalf("micro approve: %s, want approved by nats:dave", m.Data)
	}
	if got := texts(h.results("run-micro-user")); got[0] != "by micro" {
		t.Fatalf("results %q, want the micro edit", got)
	}

	tk = h.parkEcho("run-micro-shared", "proposed")
	cmd := contracts.ResumeCommandFromTicket(tk, contracts.ResumeResult{Permission: &contracts.PermissionDecision{Decision: contracts.DecisionDeny}})
	cmd.Actor = "eve"
	m = h.microRequest(httpapi.EndpointTicketsResolve, mustJSON(cmd))
	if err := json.Unmarshal(m.Data, &res); err != nil || res.Actor != api.MicroActor+" as eve" {
		t.Fatalf("micro full command: %s, want actor %q", m.Data, api.MicroActor+" as eve")
	}

	tk = h.parkEcho("run-subject", "proposed")
	cmd = contracts.ResumeCommandFromTicket(tk, contracts.ResumeResult{Permission: &contracts.PermissionDecision{Decision: contracts.DecisionAllow}})
	cmd.Actor = "platform-bot"
	if res, err := h.client.Resume(ctxFor(t, waitLong), cmd); err != nil || res.Actor != "platform-bot" || !res.ActorClaimed {
		t.Fatalf("resume on the subject: %+v %v, want actor platform-bot, claimed", res, err)
	}
	if c := h.batch(contracts.BatchID("run-subject", 1)).Calls[0]; c.Actor != "platform-bot" || !c.ActorClaimed {
		t.Fatalf("call view actor %q claimed %v, want platform-bot, claimed", c.Actor, c.ActorClaimed)
	}

	const run = "run-cli"
	tk = h.parkEcho(run, "proposed")
	var stdout, stderr bytes.Buffer
	if code := cli.Main(context.Background(), []string{"tickets", "approve", tk.CorrelationID, "--arguments", `{"text":"by cli"}`, "--as", "carol",
		"--nats-url", h.srv.URL()}, &stdout, &stderr); code != 0 {
		t.Fatalf("tickets approve: exit %d: %s", code, stderr.String())
	}
	if got := texts(h.results(run)); got[0] != "by cli" {
		t.Fatalf("results %q, want the CLI's edit", got)
	}
	stdout.Reset()
	if code := cli.Main(context.Background(), []string{"batch", "show", contracts.BatchID(run, 1), "--json=false", "--nats-url", h.srv.URL()}, &stdout, &stderr); code != 0 {
		t.Fatalf("batch show: exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{`(?m)^0\s+c1\s+ask_echo\s+Completed\s+completed: by cli\s+carol \(claimed\) \(edited arguments\)$`,
		`(?m)^0\s+c1\s+proposed arguments\s+\{"text":"proposed"\}$`, `(?m)^0\s+c1\s+approved arguments\s+\{"text":"by cli"\}$`} {
		if !regexp.MustCompile(want).MatchString(stdout.String()) {
			t.Errorf("batch show lacks %q:\n%s", want, stdout.String())
		}
	}
}
