package mcpserve_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// rawMCP sends one Streamable HTTP request of session sessionID with token and returns
// the status and the body.
func (s *stack) rawMCP(ctx context.Context, method, token, sessionID, body string) (int, string) {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, s.url("/mcp"), rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sessionID)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s /mcp: %v", method, err)
	}
	defer res.Body.Close()
	if method == http.MethodGet {
		return res.StatusCode, "" // a granted GET is a stream that does not end
	}
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestHTTPSessionBelongsToItsToken: a session is bound to the token that opened it. A
// second submitter token that sends the first one's session id (readable by any viewer
// in a batch's metadata) is answered 404, as for an unknown session, on tools/call,
// notifications/cancelled, the SSE GET and DELETE: nothing runs under the session, its
// parked call is neither cancelled nor ended, and the session goes on.
func TestHTTPSessionBelongsToItsToken(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	alice := s.connectHTTP(aliceToken, "", nil)
	runID := mcpserve.RunID(alice.ID(), 1)

	if code, body := s.rawMCP(ctx, http.MethodPost, ideToken, alice.ID(),
		`{"jsonrpc":"2.0","id":901,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hijacked"}}}`); code != http.StatusNotFound {
		t.Errorf("tools/call under another token's session: %d %q, want 404", code, body)
	}
	if code := s.httpJSON(http.MethodGet, "/v1/batches/"+contracts.BatchID(runID, 1), nil, nil); code != http.StatusNotFound {
		t.Errorf("GET the session's first batch: %d, want 404 (nothing ran under the session)", code)
	}

	done, ticket := s.callUntilParked(ctx, alice, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}})
	// The parked call's request id is one of the first few the client used.
	for id := range 8 {
		if code, body := s.rawMCP(ctx, http.MethodPost, ideToken, alice.ID(),
			fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"hijack"}}`, id)); code != http.StatusNotFound {
			t.Errorf("notifications/cancelled (request %d) under another token's session: %d %q, want 404", id, code, body)
		}
	}
	getCtx, stopGet := context.WithCancel(ctx)
	if code, _ := s.rawMCP(getCtx, http.MethodGet, ideToken, alice.ID(), ""); code != http.StatusNotFound {
		t.Errorf("GET (the session's stream) under another token: %d, want 404", code)
	}
	stopGet()
	if code, body := s.rawMCP(ctx, http.MethodDelete, ideToken, alice.ID(), ""); code != http.StatusNotFound {
		t.Errorf("DELETE under another token's session: %d %q, want 404", code, body)
	}

	tickets, err := s.client.Tickets(ctx)
	if err != nil || len(tickets) != 1 {
		t.Fatalf("open tickets after the refused requests: %d, %v; want the parked call's", len(tickets), err)
	}
	s.approve(ticket)
	a := <-done
	if a.err != nil || a.res == nil || a.res.IsError || !strings.Contains(text(a.res), "ran") {
		t.Fatalf("the parked call after the refused requests: %q, %v; want it approved and run", text(a.res), a.err)
	}
	if got := batchOf(t, a.res); got != contracts.BatchID(runID, 1) {
		t.Fatalf("the parked call's batch %s, want the session's first (%s)", got, contracts.BatchID(runID, 1))
	}
	if out := call(t, ctx, alice, "echo", map[string]any{"text": "still mine"}, nil); text(out) != "still mine" {
		t.Fatalf("the owner's next call: %q", text(out))
	}
	// The owner's own requests are served as before: its DELETE ends the session.
	if code, body := s.rawMCP(ctx, http.MethodDelete, aliceToken, alice.ID(), ""); code >= 300 {
		t.Fatalf("the owner's DELETE: %d %q", code, body)
	}
}

// initialize is a raw initialize request.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestHTTPSessionBounds: an actor opens at most mcp_serve.max_sessions_per_actor (3)
// sessions and all actors together max_sessions (4); past either a new session is refused
// 429 too_many_sessions, saying which bound, while the open sessions go on. A session
// that ends (DELETE), and a request that opened none, give their place back.
func TestHTTPSessionBounds(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	var alice []*mcp.ClientSession
	for range 3 {
		alice = append(alice, s.connectHTTP(aliceToken, "", nil))
	}
	// The official client says no more than the status of a 429; the body is the reason.
	if _, err := s.tryConnectHTTP(aliceToken, "", nil); err == nil || !strings.Contains(err.Error(), "Too Many Requests") {
		t.Errorf("alice's fourth session: %v, want it refused 429", err)
	}
	if code, body := s.rawMCP(ctx, http.MethodPost, aliceToken, "", initialize); code != http.StatusTooManyRequests ||
		!strings.Contains(body, `"message":"too_many_sessions: 3 MCP sessions of \"alice\" are open (at most 3)`) {
		t.Errorf("a fourth initialize of alice: %d %s, want 429 too_many_sessions naming alice's bound", code, body)
	}
	s.connectHTTP(ideToken, "", nil)
	if code, body := s.rawMCP(ctx, http.MethodPost, ideToken, "", initialize); code != http.StatusTooManyRequests ||
		!strings.Contains(body, `"message":"too_many_sessions: 4 MCP sessions are open on this server (at most 4)`) {
		t.Errorf("a fifth session in all: %d %s, want 429 too_many_sessions naming the server's bound", code, body)
	}
	if out := call(t, ctx, alice[0], "echo", map[string]any{"text": "open"}, nil); text(out) != "open" {
		t.Fatalf("an open session past the bound: %q", text(out))
	}

	if code, body := s.rawMCP(ctx, http.MethodDelete, aliceToken, alice[2].ID(), ""); code >= 300 {
		t.Fatalf("DELETE: %d %q", code, body)
	}
	// A request that opens no session (not an initialize) holds no place once answered.
	var notInit int
	natstest.WaitFor(t, waitTimeout, func() bool {
		notInit, _ = s.rawMCP(ctx, http.MethodPost, aliceToken, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		return notInit != http.StatusTooManyRequests
	}, "the deleted session's place given back")
	var err error
	natstest.WaitFor(t, waitTimeout, func() bool {
		_, err = s.tryConnectHTTP(aliceToken, "", nil)
		return err == nil
	}, "a new session of alice once one ended")
	if code, body := s.rawMCP(ctx, http.MethodPost, aliceToken, "", initialize); code != http.StatusTooManyRequests {
		t.Errorf("alice past the bound again: %d %s", code, body)
	}
}

// awaitSessionPlace waits until token may open a session again (a closed session gives
// its place back once the server saw it end).
func (s *stack) awaitSessionPlace(ctx context.Context, token string) {
	s.t.Helper()
	natstest.WaitFor(s.t, waitTimeout, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/mcp"), strings.NewReader(initialize))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		res.Body.Close()
		if id := res.Header.Get("Mcp-Session-Id"); id != "" {
			s.rawMCP(ctx, http.MethodDelete, token, id, "")
		}
		return res.StatusCode == http.StatusOK
	}, "a place for a new session of the token")
}
