package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/cli"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// aliceToken is the api token named alice of startSecureApprovals.
const aliceToken = "tok-alice-0123456789abcdef"

// startSecureApprovals is a secure server with the pipeline's brain side (batcher, gate,
// brain-exec, publisher: the example's approval tools are brain tools, so sandbox-exec
// and its module compilation are not needed) and the api with the named token alice,
// each service as its own user. It returns the admin's JetStream.
func startSecureApprovals(t *testing.T) (*secureStack, jetstream.JetStream) {
	t.Helper()
	s := startSecureServer(t)
	ctx := ctxFor(t, 2*time.Minute)
	js, log := s.setUp(t, ctx)
	s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceBatcher, contracts.ServiceGate, contracts.ServiceBrainExec, contracts.ServicePublisher}})
	s.useAPI(t, s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceAPI},
		API: api.Options{HTTPAddr: "127.0.0.1:0", Tokens: map[string]string{"alice": aliceToken}}}))
	return s, js
}

// TestSecure_claimedActorsAreMarked: the actor of a resume
// command no door authenticated — the platform's own command on awaken.tickets.resume,
// `awaken tickets approve --as` run as the platform user — is recorded as claimed, and
// shown so, in ticket.resolved, the audit record, the batch view and `awaken batch show`;
// the platform cannot publish on the api's resume subject, whose actors are
// authenticated; an HTTP approval by the token named alice is recorded as alice,
// authenticated; and a claim of a reserved actor ("timer") is refused reserved_actor with
// the ticket left open and nothing recorded.
func TestSecure_claimedActorsAreMarked(t *testing.T) {
	t.Parallel()
	s, js := startSecureApprovals(t)
	ctx := ctxFor(t, 2*time.Minute)
	names := s.cfg.Names()
	url := s.srv.ClientURL()
	park := func(run string) contracts.ResumeTicket {
		t.Helper()
		return stacktest.Park(t, ctx, s.client, batch(run, 1, []string{"ask_me"}, call("c1", "ask_me", map[string]any{})), "c1")
	}
	audits := func(run string) []contracts.AuditRecord {
		t.Helper()
		cons, err := js.OrderedConsumer(ctx, names.AuditStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.AuditSubject(run)}})
		if err != nil {
			t.Fatal(err)
		}
		var out []contracts.AuditRecord
		for {
			batch, err := cons.FetchNoWait(100)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
				if err != nil {
					t.Fatal(err)
				}
				var a contracts.AuditRecord
				if err := json.Unmarshal(ev.Data, &a); err != nil {
					t.Fatal(err)
				}
				out = append(out, a)
			}
			if n == 0 {
				return out
			}
		}
	}
	// lastAudit is the run's last audit record once it is a resolution's (approved).
	lastAudit := func(run string) contracts.AuditRecord {
		t.Helper()
		var last contracts.AuditRecord
		deadline := time.Now().Add(30 * time.Second)
		for {
			if a := audits(run); len(a) > 0 && a[len(a)-1].Decision == contracts.AuditDecisionApproved {
				return a[len(a)-1]
			} else if len(a) > 0 {
				last = a[len(a)-1]
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no approved audit record; last %+v", run, last)
			}
			// Another round trip to the server paces the poll; no sleeping.
			if _, err := js.AccountInfo(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	view := func(run string) httpapi.BatchView {
		t.Helper()
		var v httpapi.BatchView
		if st, body := apiDoAs(t, ctx, aliceToken, "GET", s.apiURL, "/v1/batches/"+contracts.BatchID(run, 1), nil, &v); st != http.StatusOK || len(v.Calls) != 1 {
			t.Fatalf("GET batch of %s: %d %s", run, st, body)
		}
		return v
	}
	timeline := func(v httpapi.BatchView) string {
		t.Helper()
		var b bytes.Buffer
		if err := readmodel.WriteTimeline(&b, v); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	allow := contracts.PermissionDecision{Decision: contracts.DecisionAllow}

	// The platform claims to be alice: recorded as alice, claimed, everywhere.
	tk := park("claim-platform")
	res, err := s.client.Decide(ctx, tk, allow, "alice")
	if err != nil || res.Code != "approved" || res.Actor != "alice" || !res.ActorClaimed {
		t.Fatalf("platform approval as alice: %+v %v, want approved by alice, claimed", res, err)
	}
	if a := lastAudit("claim-platform"); a.Actor != "alice" || !a.ActorClaimed {
		t.Errorf("audit of the platform's approval %+v, want actor alice, claimed", a)
	}
	v := view("claim-platform")
	if c := v.Calls[0]; c.Actor != "alice" || !c.ActorClaimed {
		t.Errorf("batch view of the platform's approval: actor %q claimed %v", c.Actor, c.ActorClaimed)
	}
	if tl := timeline(v); !strings.Contains(tl, "alice (claimed)") {
		t.Errorf("timeline of the platform's approval does not say claimed:\n%s", tl)
	}

	// `awaken tickets approve --as alice` as the platform user: the same claim, which
	// `awaken batch show` (run by an operator) shows as such.
	tk = park("claim-cli")
	var stdout, stderr bytes.Buffer
	natsAs := func(user string) []string {
		return []string{"--nats-url", url, "--nats-user", user, "--nats-password", s.pw[user]}
	}
	if code := cli.Main(ctx, append([]string{"tickets", "approve", tk.CorrelationID, "--as", "alice"}, natsAs(deploy.UserPlatform)...), &stdout, &stderr); code != 0 {
		t.Fatalf("awaken tickets approve --as alice: exit %d: %s", code, stderr.String())
	}
	var cliRes contracts.TicketResolution
	if err := json.Unmarshal(stdout.Bytes(), &cliRes); err != nil || cliRes.Actor != "alice" || !cliRes.ActorClaimed {
		t.Errorf("awaken tickets approve --as alice printed %s (%v), want actor alice, actor_claimed", stdout.String(), err)
	}
	if a := lastAudit("claim-cli"); a.Actor != "alice" || !a.ActorClaimed {
		t.Errorf("audit of the CLI's approval %+v, want actor alice, claimed", a)
	}
	stdout.Reset()
	if code := cli.Main(ctx, append([]string{"batch", "show", contracts.BatchID("claim-cli", 1), "--json=false"}, natsAs(deploy.UserAdmin)...), &stdout, &stderr); code != 0 {
		t.Fatalf("awaken batch show: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "alice (claimed)") {
		t.Errorf("awaken batch show does not say claimed:\n%s", stdout.String())
	}

	// The platform cannot publish on the api's subject, where actors are authenticated:
	// the server refuses the publish and stores nothing.
	tk = park("claim-http")
	forged := contracts.ResumeCommandFromTicket(tk, contracts.ResumeResult{Permission: &allow})
	forged.Actor = "alice"
	platform := s.connect(t, deploy.UserPlatform)
	subject, err := pubEvent(names.TicketResumeAPISubject(), "forged-resume", contracts.TypeTicketResume, forged)(platform)
	if err == nil {
		err = platform.Flush()
	}
	if err != nil && !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatal(err)
	}
	var refused bool
	for deadline := time.Now().Add(10 * time.Second); !refused && time.Now().Before(deadline); {
		for _, v := range s.takeViolations() {
			if strings.HasPrefix(v, deploy.UserPlatform+":") && strings.Contains(v, subject) {
				refused = true
			} else {
				t.Errorf("unexpected permission violation: %s", v)
			}
		}
		if err := platform.Flush(); err != nil { // a round trip paces the poll
			t.Fatal(err)
		}
	}
	if !refused {
		t.Fatalf("platform publish on %s: no permission violation", subject)
	}
	st, err := js.Stream(ctx, names.TicketsStream())
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject)); err != nil || info.State.Subjects[subject] != 0 {
		t.Fatalf("%s holds a command the platform published (%v)", subject, err)
	}
	if _, err := s.client.Ticket(ctx, tk.CorrelationID); err != nil {
		t.Fatalf("the ticket is gone after the refused publish: %v", err)
	}

	// An HTTP approval by the token named alice: alice, authenticated.
	var httpRes contracts.TicketResolution
	if st, body := apiDoAs(t, ctx, aliceToken, "POST", s.apiURL, "/v1/tickets/"+tk.CorrelationID+"/approve", httpapi.ApproveRequest{}, &httpRes); st != http.StatusOK ||
		httpRes.Actor != "alice" || httpRes.ActorClaimed {
		t.Fatalf("HTTP approval by token alice: %d %s, want approved by alice, not claimed", st, body)
	}
	if a := lastAudit("claim-http"); a.Actor != "alice" || a.ActorClaimed {
		t.Errorf("audit of the HTTP approval %+v, want actor alice, not claimed", a)
	}
	v = view("claim-http")
	if c := v.Calls[0]; c.Actor != "alice" || c.ActorClaimed {
		t.Errorf("batch view of the HTTP approval: actor %q claimed %v", c.Actor, c.ActorClaimed)
	}
	if tl := timeline(v); !strings.Contains(tl, "alice") || strings.Contains(tl, "(claimed)") {
		t.Errorf("timeline of the HTTP approval:\n%s", tl)
	}

	// A claim of a reserved actor is refused: the ticket stays open, nothing is recorded.
	tk = park("claim-timer")
	_, err = s.client.Decide(ctx, tk, allow, contracts.ActorTimer)
	var rr *client.ResumeRejectedError
	if !errors.As(err, &rr) || rr.Code != string(contracts.ResumeReservedActor) {
		t.Fatalf("platform approval as timer: %v, want rejected %s", err, contracts.ResumeReservedActor)
	}
	if _, err := s.client.Ticket(ctx, tk.CorrelationID); err != nil {
		t.Fatalf("the ticket is gone after the refused claim: %v", err)
	}
	if c := view("claim-timer").Calls[0]; c.Phase != contracts.PhaseAwaiting || c.Actor != "" || c.ResolvedBy != "" {
		t.Errorf("the refused claim changed the call: %+v", c)
	}
	if a := audits("claim-timer"); len(a) != 1 || a[0].Decision != contracts.AuditDecisionAsk {
		t.Errorf("audit records after the refused claim: %+v, want the ask alone", a)
	}
	if v := s.takeViolations(); len(v) > 0 {
		t.Errorf("permission violations: %v", v)
	}
}
