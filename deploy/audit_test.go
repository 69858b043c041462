package deploy_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/cli"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// startSecureSigned is [startSecureApprovals] with the audit trail signed by a key of its
// own (the gate's and the api's records), whose public half it returns.
func startSecureSigned(t *testing.T) (*secureStack, jetstream.JetStream, ed25519.PublicKey) {
	t.Helper()
	s := startSecureServer(t)
	k, seed, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Audit.SigningKey = seed
	ctx := ctxFor(t, 2*time.Minute)
	js, log := s.setUp(t, ctx)
	s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceBatcher, contracts.ServiceGate, contracts.ServiceBrainExec, contracts.ServicePublisher}})
	s.useAPI(t, s.startServices(t, ctx, log, app.Options{Services: []string{contracts.ServiceAPI},
		API: api.Options{HTTPAddr: "127.0.0.1:0", Tokens: map[string]string{"alice": aliceToken}}}))
	return s, js, k.Public().(ed25519.PublicKey)
}

// auditVerify runs `awaken audit verify ARGS --public-key PUB` as admin and returns its
// exit code and output.
func auditVerify(ctx context.Context, s *secureStack, pub ed25519.PublicKey, args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	args = append(append([]string{"audit", "verify", "--json=false"}, args...), "--public-key", hex.EncodeToString(pub),
		"--nats-url", s.srv.ClientURL(), "--nats-user", deploy.UserAdmin, "--nats-password", s.pw[deploy.UserAdmin])
	code := cli.Main(ctx, args, &stdout, &stderr)
	return code, strings.TrimSpace(stdout.String() + stderr.String())
}

// storedEvents are the CloudEvents stream holds on subject, in stream order, with their
// stream sequences.
func storedEvents(t *testing.T, ctx context.Context, js jetstream.JetStream, stream, subject string) ([]cloudevent.Event, []uint64) {
	t.Helper()
	recs, err := auditchain.Read(ctx, js, stream, auditchain.Query{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	var evs []cloudevent.Event
	var seqs []uint64
	for _, r := range recs {
		ev, err := cloudevent.DecodeMsg(r.Header, r.Data)
		if err != nil {
			t.Fatalf("%s seq %d: %v", subject, r.Seq, err)
		}
		evs, seqs = append(evs, ev), append(seqs, r.Seq)
	}
	return evs, seqs
}

// auditDecisions are "call:decision" of run's audit records, in chain order.
func auditDecisions(t *testing.T, ctx context.Context, js jetstream.JetStream, names contracts.Names, run string) []string {
	t.Helper()
	evs, _ := storedEvents(t, ctx, js, names.AuditStream(), names.AuditSubject(run))
	var out []string
	for _, ev := range evs {
		var a contracts.AuditRecord
		if err := json.Unmarshal(ev.Data, &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a.CallID+":"+a.Decision)
	}
	return out
}

// TestSecure_placeholdersCannotSuppressServiceRecords: the platform publishes, on every
// subject its grants allow, placeholders under the ids of the records the services are
// about to write — the gate's audit records of a run (allow, deny, ask, approved), its
// ticket.opened and ticket.resolved, the api's audit of a tool pause — and then drives
// exactly those decisions. Every record is stored all the same, and `awaken audit verify
// --run` checks the run's chain against its call records.
func TestSecure_placeholdersCannotSuppressServiceRecords(t *testing.T) {
	t.Parallel()
	s, js, pub := startSecureSigned(t)
	ctx := ctxFor(t, 2*time.Minute)
	names := s.cfg.Names()
	const run = "suppress"
	op := func(callID string) string { return contracts.OperationID(run, 1, callID) }
	corr := contracts.CorrelationID(contracts.ReasonPermission, run, 1, "c3")
	ids := []string{
		pipeline.AuditID(op("c1"), contracts.AuditDecisionAllow),
		pipeline.AuditID(op("c2"), contracts.AuditDecisionDeny),
		pipeline.AuditID(op("c3"), contracts.AuditDecisionAsk),
		pipeline.AuditID(op("c3"), contracts.AuditDecisionApproved),
		pipeline.TicketOpenedID(corr), pipeline.TicketResolvedID(corr),
	}
	// The api's pause record names the revision of the pause it writes: the first ones of
	// the fresh pauses bucket.
	for rev := 1; rev <= 8; rev++ {
		ids = append(ids, fmt.Sprintf("toolpause:%s:%d:%s", contracts.ToolPauseKey("echo"), rev, contracts.ToolPauseActionPause))
	}
	platform := s.connect(t, deploy.UserPlatform)
	for _, subject := range []string{names.MCPCallAuditSubject(), names.TicketResumeSubject()} {
		for _, id := range ids {
			m := nats.NewMsg(subject)
			m.Header.Set(jetstream.MsgIDHeader, id)
			m.Data = []byte(`{}`)
			if err := platform.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := platform.Flush(); err != nil {
		t.Fatal(err)
	}

	tk := stacktest.Park(t, ctx, s.client, batch(run, 1, []string{"echo", "forbidden", "ask_me"},
		call("c1", "echo", map[string]any{"text": "one"}), call("c2", "forbidden", map[string]any{}), call("c3", "ask_me", map[string]any{})), "c3")
	if res, err := s.client.Decide(ctx, tk, contracts.PermissionDecision{Decision: contracts.DecisionAllow}, "ops"); err != nil || res.Code != "approved" {
		t.Fatalf("approve c3: %+v %v", res, err)
	}
	if _, err := s.client.Await(ctx, run, 1); err != nil {
		t.Fatal(err)
	}
	var paused contracts.ToolPauseState
	if st, body := apiDoAs(t, ctx, aliceToken, "POST", s.apiURL, "/v1/tools/echo/pause", contracts.ToolPauseRequest{Reason: "incident"}, &paused); st != http.StatusOK {
		t.Fatalf("pause echo: %d %s", st, body)
	}

	want := []string{"c1:allow", "c2:deny", "c3:ask", "c3:approved"}
	if got := auditDecisions(t, ctx, js, names, run); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the run's audit records are %v, want %v", got, want)
	}
	for _, tc := range []struct{ subject, id string }{
		{names.TicketOpenedSubject(), pipeline.TicketOpenedID(corr)},
		{names.TicketResolvedSubject(), pipeline.TicketResolvedID(corr)},
	} {
		evs, _ := storedEvents(t, ctx, js, names.TicketsStream(), tc.subject)
		found := false
		for _, ev := range evs {
			found = found || ev.ID == tc.id
		}
		if !found {
			t.Errorf("%s holds no %s", tc.subject, tc.id)
		}
	}
	pauses, _ := storedEvents(t, ctx, js, names.AuditStream(), names.ToolPauseAuditSubject())
	if len(pauses) != 1 || pauses[0].Type != contracts.TypeToolPauseAudit {
		t.Errorf("the pause of echo left %d audit records on %s, want 1", len(pauses), names.ToolPauseAuditSubject())
	}
	if code, out := auditVerify(ctx, s, pub, "--run", run); code != 0 {
		t.Errorf("awaken audit verify --run %s: exit %d: %s", run, code, out)
	}
}

// TestSecure_auditVerifyNamesADecisionWithoutItsRecord: the last record of a run's chain
// is gone (deleted as an operator can, leaving every remaining link whole): the chain alone
// cannot tell, but the call records still hold the decision, and `awaken audit verify
// --run` names it.
func TestSecure_auditVerifyNamesADecisionWithoutItsRecord(t *testing.T) {
	t.Parallel()
	s, js, pub := startSecureSigned(t)
	ctx := ctxFor(t, 2*time.Minute)
	names := s.cfg.Names()
	const run = "truncated"
	if _, err := s.client.SubmitAndWait(ctx, batch(run, 1, []string{"echo", "forbidden"},
		call("c1", "echo", map[string]any{"text": "one"}), call("c2", "forbidden", map[string]any{}))); err != nil {
		t.Fatal(err)
	}
	if code, out := auditVerify(ctx, s, pub, "--run", run); code != 0 {
		t.Fatalf("awaken audit verify --run %s before the deletion: exit %d: %s", run, code, out)
	}
	evs, seqs := storedEvents(t, ctx, js, names.AuditStream(), names.AuditSubject(run))
	if len(evs) != 2 {
		t.Fatalf("run %s has %d audit records, want 2", run, len(evs))
	}
	var last contracts.AuditRecord
	if err := json.Unmarshal(evs[1].Data, &last); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, names.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, seqs[1]); err != nil {
		t.Fatal(err)
	}
	code, out := auditVerify(ctx, s, pub, "--run", run)
	named := fmt.Sprintf("decision %s of call %s has no audit record", last.Decision, last.CallID)
	if code == 0 || !strings.Contains(out, named) {
		t.Errorf("awaken audit verify --run %s after its last record was deleted: exit %d: %s\nwant a failure naming %q", run, code, out, named)
	}
}

// TestSecure_mcpServeLeavesTheSignedTrailWhole: `awaken mcp-serve` runs as the platform,
// which holds no signing key, beside the api's /mcp door, which signs; after a call through
// each, the whole audit stream verifies against the key, every record signed.
func TestSecure_mcpServeLeavesTheSignedTrailWhole(t *testing.T) {
	t.Parallel()
	s, js, pub := startSecureSigned(t)
	ctx := ctxFor(t, 2*time.Minute)
	echo := func(cs *mcp.ClientSession) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "signed"}})
		if err != nil || res.IsError {
			t.Fatalf("echo: %v %+v", err, res)
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "audit-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: strings.TrimSuffix(s.apiURL, "/") + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{aliceToken}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	echo(cs)

	stdio, stopStdio := serveStdioDoor(t, ctx, s, c, "cli:audit")
	echo(stdio)
	stopStdio()

	if code, out := auditVerify(ctx, s, pub); code != 0 || !strings.Contains(out, "every record signed") {
		t.Errorf("awaken audit verify of the whole stream: exit %d: %s", code, out)
	}
	// Each door's record is where it says: the api's in the signed trail, the stdio
	// door's (the platform's claim) in the claims stream.
	names := s.cfg.Names()
	for _, tc := range []struct{ stream, subject, transport string }{
		{names.AuditStream(), names.MCPCallAuditSubject(), mcpserve.TransportHTTP},
		{names.ClaimsStream(), names.MCPCallClaimSubject(), mcpserve.TransportStdio},
	} {
		evs, _ := storedEvents(t, ctx, js, tc.stream, tc.subject)
		var rec contracts.MCPCallAudit
		if len(evs) != 1 || json.Unmarshal(evs[0].Data, &rec) != nil || rec.Transport != tc.transport {
			t.Errorf("%s holds %d records (%+v), want one of transport %s", tc.subject, len(evs), rec, tc.transport)
		}
	}
	if v := s.takeViolations(); len(v) > 0 {
		t.Errorf("permission violations: %v", v)
	}
}

// bearer authenticates every request it carries with token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSecure_auditWritersReadTheirDuplicatesBack: every user that writes audit records —
// the gate (a run's decisions), the api (pauses, its MCP door's calls), the executors
// (reconciles) — appends a record twice, as a redelivery does: the second is answered
// duplicate and read back from the stream leader to be sure it is the writer's own, which
// each user's grants allow.
func TestSecure_auditWritersReadTheirDuplicatesBack(t *testing.T) {
	t.Parallel()
	s := startSecureServer(t)
	ctx := ctxFor(t, time.Minute)
	s.setUp(t, ctx)
	names := s.cfg.Names()
	key, _, err := auditchain.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ user, subject string }{
		{contracts.ServiceGate, names.AuditSubject("dup-run")},
		{contracts.ServiceAPI, names.ToolPauseAuditSubject()},
		{contracts.ServiceAPI, names.MCPCallAuditSubject()},
		{contracts.ServiceBrainExec, names.ReconcileAuditSubject("dup-brain")},
		{contracts.ServiceSandboxExec, names.ReconcileAuditSubject("dup-sandbox")},
	} {
		t.Run(w.user+" on "+w.subject, func(t *testing.T) {
			js, err := jetstream.New(s.connect(t, w.user))
			if err != nil {
				t.Fatal(err)
			}
			a := auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), key)
			id := "dup:" + w.subject
			for i := range 2 {
				ev, err := cloudevent.NewEvent(id, "awaken/"+w.user, contracts.TypeAudit, contracts.AuditRecord{Decision: contracts.AuditDecisionAllow})
				if err != nil {
					t.Fatal(err)
				}
				actx, cancel := context.WithTimeout(ctx, 10*time.Second)
				ack, err := a.Append(actx, cloudevent.EncodeMsg(w.subject, ev))
				cancel()
				if err != nil || ack.Duplicate != (i == 1) {
					t.Fatalf("append %d: %+v %v, want the second a duplicate", i+1, ack, err)
				}
			}
		})
	}
	if v := s.takeViolations(); len(v) > 0 {
		t.Errorf("permission violations: %v", v)
	}
}
