package mcpserve_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

func toolNames(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestHTTPListCallBlocked: over Streamable HTTP behind the api's bearer tokens, a client
// lists the catalog (narrowed per actor, and by agent_tools), calls a tool and gets its
// output as content, with the session, client and actor in the batch's metadata and the
// audit; a call the policy denies is an isError result with the reason; a request without
// a token is refused.
func TestHTTPListCallBlocked(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)

	res, err := http.Post(s.url("/mcp"), "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST /mcp without a token: %d, want 401", res.StatusCode)
	}
	viewer, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/mcp"), strings.NewReader(`{}`))
	viewer.Header.Set("Authorization", "Bearer "+viewerToken)
	viewer.Header.Set("Content-Type", "application/json")
	if res, err = http.DefaultClient.Do(viewer); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("POST /mcp with a viewer's token: %d, want 403 (the door submits batches)", res.StatusCode)
	}

	alice := s.connectHTTP(aliceToken, "", nil)
	// client_pick is client-executed: an MCP client could never finish its call.
	if got, want := toolNames(t, ctx, alice), []string{"ask_me", "ask_progress", "echo", "forbidden", "progress", "slow", "stub"}; !slices.Equal(got, want) {
		t.Fatalf("alice's tools %v, want %v", got, want)
	}
	if got := toolNames(t, ctx, s.connectHTTP(ideToken, "", nil)); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("ide's tools %v, want [echo] (mcp_serve.clients)", got)
	}
	if got := toolNames(t, ctx, s.connectHTTP(aliceToken, "?agent_tools=echo,stub", nil)); !slices.Equal(got, []string{"echo", "stub"}) {
		t.Fatalf("alice's tools with agent_tools=echo,stub: %v", got)
	}

	out := call(t, ctx, alice, "echo", map[string]any{"text": "hello, mcp"}, nil)
	if out.IsError || text(out) != "hello, mcp" {
		t.Fatalf("echo: isError=%v %q", out.IsError, text(out))
	}
	batchID := batchOf(t, out)
	runID := mcpserve.RunID(alice.ID(), 1)
	if batchID != contracts.BatchID(runID, 1) {
		t.Fatalf("batch %s, want step 1 of run %s (the session's run)", batchID, runID)
	}
	var view httpapi.BatchView
	if code := s.httpJSON(http.MethodGet, "/v1/batches/"+batchID, nil, &view); code != http.StatusOK {
		t.Fatalf("GET batch: %d", code)
	}
	want := map[string]string{"mcp.session_id": alice.ID(), "mcp.client_name": "test-client", "mcp.client_version": "1.2.3",
		"mcp.transport": "streamable-http", "actor": "alice"}
	for k, v := range want {
		if view.Metadata[k] != v {
			t.Errorf("metadata %s = %q, want %q (all: %v)", k, view.Metadata[k], v, view.Metadata)
		}
	}
	audit := lastAudit(t, s)
	if audit.BatchID != batchID || audit.SessionID != alice.ID() || audit.ClientName != "test-client" ||
		audit.Actor != "alice" || audit.ToolID != "echo" || audit.Transport != mcpserve.TransportHTTP {
		t.Fatalf("audit record %+v", audit)
	}

	blocked := call(t, ctx, alice, "forbidden", map[string]any{}, nil)
	if !blocked.IsError || !strings.Contains(text(blocked), "blocked") {
		t.Fatalf("forbidden: isError=%v %q, want a blocked error result", blocked.IsError, text(blocked))
	}
	if got := batchOf(t, blocked); got != contracts.BatchID(runID, 2) {
		t.Fatalf("the second call's batch %s, want step 2 of the session's run", got)
	}
}

// lastAudit returns the last MCP call record of the api's door, on the audit stream.
func lastAudit(t *testing.T, s *stack) contracts.MCPCallAudit {
	t.Helper()
	names := s.cfg.Names()
	return lastMCPRecord(t, s, names.AuditStream(), names.MCPCallAuditSubject(), true)
}

// lastClaim returns the last MCP call record of the stdio door, on the claims stream.
func lastClaim(t *testing.T, s *stack) contracts.MCPCallAudit {
	t.Helper()
	names := s.cfg.Names()
	return lastMCPRecord(t, s, names.ClaimsStream(), names.MCPCallClaimSubject(), false)
}

// lastMCPRecord returns the last MCP call record on subject of stream; chained says it
// must be the first link of the subject's chain, else that it carries no chain headers.
func lastMCPRecord(t *testing.T, s *stack, streamName, subject string, chained bool) contracts.MCPCallAudit {
	t.Helper()
	nc, js := s.srv.Conn(t)
	defer nc.Close()
	stream, err := js.Stream(s.ctx, streamName)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(s.ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := cloudevent.DecodeMsg(m.Header, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != contracts.TypeMCPCallAudit {
		t.Fatalf("audit type %s", ev.Type)
	}
	// The api door's records are a chain of their own (docs/security.md, the audit
	// trail); the stdio door's claims are in no chain.
	l, err := auditchain.LinkOf(m.Header)
	switch {
	case chained && (err != nil || l.N != 1 || l.Prev != auditchain.ZeroHash):
		t.Fatalf("the first MCP audit record's link: %+v %v", l, err)
	case !chained && err == nil:
		t.Fatalf("the stdio door's record carries a chain link %+v", l)
	}
	rec, err := bus.Decode[contracts.MCPCallAudit](ev.Data)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestHTTPApprovalProgress: a call parked on approval sends progress notifications naming
// its ticket and deadline while the MCP call waits; approving the ticket over the HTTP api
// answers the call with the tool's result.
func TestHTTPApprovalProgress(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	var progress progressLog
	cs := s.connectHTTP(aliceToken, "", &progress)

	done, ticket := s.callUntilParked(ctx, cs, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{"why": "test"},
		Meta: mcp.Meta{"progressToken": "tok-1"}})
	natstest.WaitFor(t, waitTimeout, func() bool { return len(progress.all()) > 0 }, "a progress notification")
	note := progress.all()[0]
	if note.ProgressToken != "tok-1" || !strings.Contains(note.Message, ticket.CorrelationID) ||
		ticket.Deadline == nil || !strings.Contains(note.Message, ticket.Deadline.UTC().Format(time.RFC3339)) {
		t.Fatalf("progress %+v, want the token, ticket %s and its deadline %v", note, ticket.CorrelationID, ticket.Deadline)
	}
	select {
	case a := <-done:
		t.Fatalf("the call answered before its approval: %+v, %v", a.res, a.err)
	default:
	}
	s.approve(ticket)
	a := <-done
	if a.err != nil || a.res == nil || a.res.IsError || !strings.Contains(text(a.res), "ran") {
		t.Fatalf("ask_me after approval: %+v %q, %v", a.res, text(a.res), a.err)
	}
}

// TestHTTPCancel: the client's notifications/cancelled (cancelling its CallTool) cancels
// that call — the parked call ends "cancelled before start" and its ticket is closed —
// and the session's next call runs as the next step of the same run, without waiting.
func TestHTTPCancel(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs := s.connectHTTP(aliceToken, "", nil)
	callCtx, cancelCall := context.WithCancel(ctx)
	done, _ := s.callUntilParked(callCtx, cs, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}})
	cancelCall()
	if a := <-done; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled call: %v", a.err)
	}
	s.checkCancelledBeforeStart(ctx, mcpserve.RunID(cs.ID(), 1), 1)
	next := call(t, ctx, cs, "echo", map[string]any{"text": "after"}, nil)
	if next.IsError || text(next) != "after" {
		t.Fatalf("the next call: %q", text(next))
	}
	if got, want := batchOf(t, next), contracts.BatchID(mcpserve.RunID(cs.ID(), 1), 2); got != want {
		t.Fatalf("the next call's batch %s, want %s (the session's run goes on)", got, want)
	}
}

// checkCancelledBeforeStart fails the test unless step of runID ended cancelled before it
// started (the one-call cancel of a parked call) and no ticket is left open.
func (s *stack) checkCancelledBeforeStart(ctx context.Context, runID string, step int64) {
	s.t.Helper()
	b, err := s.client.Await(ctx, runID, step)
	if err != nil {
		s.t.Fatal(err)
	}
	if r := b.Results[0]; r.Outcome != contracts.OutcomeCompleted || !strings.Contains(mustJSON(r.Output), "cancelled before start") {
		s.t.Fatalf("the cancelled call's result %+v, want completed \"cancelled before start\"", r)
	}
	natstest.WaitFor(s.t, waitTimeout, func() bool {
		ts, err := s.client.Tickets(ctx)
		return err == nil && len(ts) == 0
	}, "the cancelled call's ticket closed")
}

// TestHTTPRestartWhileWaiting: the api stops while an MCP call waits on approval; the call
// is answered with an error naming its batch and the route to read its result; after the
// restart the ticket is approved, the result is on that route, and the client's new
// session works.
func TestHTTPRestartWhileWaiting(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs := s.connectHTTP(aliceToken, "", nil)
	done, ticket := s.callUntilParked(ctx, cs, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}})
	s.stopAPI()
	a := <-done
	if a.err != nil {
		t.Fatalf("ask_me: %v", a.err)
	}
	res := a.res
	batchID := contracts.BatchID(mcpserve.RunID(cs.ID(), 1), 1)
	msg := text(res)
	if res == nil || !res.IsError || !strings.HasPrefix(msg, mcpserve.CodeStopped) ||
		!strings.Contains(msg, batchID) || !strings.Contains(msg, "/v1/batches/"+batchID+"/results") {
		t.Fatalf("the waiting call at the stop: %q, want %s naming %s and its results route", msg, mcpserve.CodeStopped, batchID)
	}

	s.startAPI()
	s.approve(ticket)
	var results httpapi.BatchResults
	natstest.WaitFor(t, waitTimeout, func() bool {
		return s.httpJSON(http.MethodGet, "/v1/batches/"+batchID+"/results", nil, &results) == http.StatusOK
	}, "the parked call's results on the route the error named")
	if len(results.Results) != 1 || !strings.Contains(mustJSON(results.Results[0].Output), "ran") {
		t.Fatalf("results %+v", results)
	}
	again := s.connectHTTP(aliceToken, "", nil)
	if out := call(t, ctx, again, "echo", map[string]any{"text": "back"}, nil); text(out) != "back" {
		t.Fatalf("a new session after the restart: %q", text(out))
	}
}

// TestHTTPBadInput: an unknown tool is a protocol error; arguments that do not fit the
// tool's schema, and oversized ones, are isError results saying so, and nothing is
// submitted; a session that floods calls beyond max_queued_calls is refused with
// session_flooded while its earlier calls wait.
func TestHTTPBadInput(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs := s.connectHTTP(aliceToken, "", nil)

	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown tool: %v, want a protocol error naming it", err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err) // echo takes any object: the bounds below are the only refusals
	}
	bad := call(t, ctx, cs, "stub", map[string]any{"n": "seven"}, nil)
	if !bad.IsError || !strings.HasPrefix(text(bad), mcpserve.CodeInvalidArguments) {
		t.Fatalf("stub with n a string: %q", text(bad))
	}
	big := call(t, ctx, cs, "echo", map[string]any{"text": strings.Repeat("x", 5000)}, nil)
	if !big.IsError || !strings.HasPrefix(text(big), mcpserve.CodeArgumentsTooLarge) {
		t.Fatalf("oversized arguments: %q", text(big))
	}
	if ok := call(t, ctx, cs, "stub", map[string]any{"n": 7}, nil); ok.IsError || text(ok) != "stubbed" {
		t.Fatalf("stub with valid arguments: %q", text(ok))
	}

	// Flooding: max_queued_calls is 2; one call parks, one waits for its turn, a third is
	// refused at once.
	var wg sync.WaitGroup
	results := make(chan *mcp.CallToolResult, 2)
	wg.Go(func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}})
		if err != nil {
			t.Errorf("parked call: %v", err)
		}
		results <- res
	})
	ticket := s.openTicket()
	// The queued call and the probes race for the second place: the queued call asks
	// again while refused, and a probe that got the place gives it up after a moment (its
	// cancel, while it waits for its turn, submits nothing).
	wg.Go(func() {
		for {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "queued"}})
			if err != nil && strings.Contains(err.Error(), mcpserve.CodeSessionFlooded) && ctx.Err() == nil {
				continue
			}
			if err != nil {
				t.Errorf("queued call: %v", err)
			}
			results <- res
			return
		}
	})
	var flood error
	natstest.WaitFor(t, waitTimeout, func() bool {
		probe, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, flood = cs.CallTool(probe, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "flood"}})
		return flood != nil && strings.Contains(flood.Error(), mcpserve.CodeSessionFlooded)
	}, "a third call refused session_flooded while two are queued")
	s.approve(ticket)
	wg.Wait()
	close(results)
	var texts []string
	for r := range results {
		texts = append(texts, text(r))
	}
	slices.Sort(texts)
	if len(texts) != 2 || texts[0] != "queued" {
		t.Fatalf("the queued calls answered %q", texts)
	}
	// Each submitted call is a step of the session's run, in order, none refused run_busy.
	rejected := rejections(t, s)
	if len(rejected) != 0 {
		t.Fatalf("rejections %v, want none", rejected)
	}
}

// rejections lists the codes of every batch rejection stored.
func rejections(t *testing.T, s *stack) []string {
	t.Helper()
	nc, js := s.srv.Conn(t)
	defer nc.Close()
	names := s.cfg.Names()
	cons, err := js.OrderedConsumer(s.ctx, names.SubmissionsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{names.RejectedSubject()}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for range info.NumPending {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		ev, err := cloudevent.DecodeMsg(m.Headers(), m.Data())
		if err != nil {
			t.Fatal(err)
		}
		r, err := bus.Decode[contracts.BatchRejected](ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, r.Code)
	}
	return codes
}

// TestHTTPSessionCloseKeepsTheCall: a client that ends its session (DELETE) while a call
// waits on approval gets the call answered "stopped" with its batch, and the call goes on
// (the SDK ends the call's context as it does for notifications/cancelled, but no
// cancellation was sent): approved later, it runs.
func TestHTTPSessionCloseKeepsTheCall(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs := s.connectHTTP(aliceToken, "", nil)
	done, tk := s.callUntilParked(ctx, cs, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.url("/mcp"), nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode >= 300 {
		t.Fatalf("DELETE /mcp: %d", res.StatusCode)
	}
	// The call may also end with an error: its session is gone.
	if got := (<-done).res; got != nil && (!got.IsError || !strings.HasPrefix(text(got), mcpserve.CodeStopped) || !strings.Contains(text(got), tk.BatchID)) {
		t.Fatalf("the waiting call when its session ended: %q", text(got))
	}
	s.approve(tk)
	b, err := s.client.Await(ctx, tk.RunID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.Results[0]; r.Outcome != contracts.OutcomeCompleted || !strings.Contains(mustJSON(r.Output), "ran") {
		t.Fatalf("the call of the ended session: %+v", r)
	}
}

// TestHTTPRunCancelledElsewhere: an operator cancels the session's run between two calls;
// the next call is not refused run_cancelled: it runs in the session's next run.
func TestHTTPRunCancelledElsewhere(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs := s.connectHTTP(aliceToken, "", nil)
	if out := call(t, ctx, cs, "echo", map[string]any{"text": "one"}, nil); text(out) != "one" {
		t.Fatalf("first call: %q", text(out))
	}
	runID := mcpserve.RunID(cs.ID(), 1)
	if code := s.httpJSON(http.MethodPost, "/v1/runs/"+runID+"/cancel", map[string]string{"reason": "operator"}, nil); code != http.StatusOK && code != http.StatusAccepted {
		t.Fatalf("cancel: %d", code)
	}
	natstest.WaitFor(t, waitTimeout, func() bool {
		rec, _, err := s.pipeline.Env.Runs.Get(ctx, contracts.RunKey(runID))
		return err == nil && rec.Ended != nil
	}, "the run ended")
	out := call(t, ctx, cs, "echo", map[string]any{"text": "two"}, nil)
	if out.IsError || text(out) != "two" {
		t.Fatalf("the call after the cancel: %q", text(out))
	}
	if got, want := batchOf(t, out), contracts.BatchID(mcpserve.RunID(cs.ID(), 2), 1); got != want {
		t.Fatalf("batch %s, want %s", got, want)
	}
}

// answer is what a CallTool returned.
type answer struct {
	res *mcp.CallToolResult
	err error
}

// callUntilParked calls a tool that parks on its ticket on cs and returns, once the ticket
// is open, where the call's answer arrives and the ticket, so the test can act on the
// parked call (approve its ticket, cancel it, stop the api) while it waits.
func (s *stack) callUntilParked(ctx context.Context, cs *mcp.ClientSession, params *mcp.CallToolParams) (<-chan answer, contracts.ResumeTicket) {
	s.t.Helper()
	done := make(chan answer, 1)
	go func() {
		res, err := cs.CallTool(ctx, params)
		done <- answer{res, err}
	}()
	return done, s.openTicket()
}
