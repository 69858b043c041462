package mcpserve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/apitokens"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
	"github.com/awaken-dev/awaken/services/api"
)

// waitTimeout bounds every wait on a condition; generous for a loaded 2-core machine
// under the race detector, never reached when the code is right.
const waitTimeout = 30 * time.Second

// Tokens of the test api: "alice" sees every tool, "ide" only echo (mcp_serve.clients).
const (
	aliceToken = "alice-token-0123456789"
	ideToken   = "ide-token-0123456789ab"
	// viewerToken's token may only read: the MCP door (a submitter's) refuses it.
	viewerToken = "viewer-token-0123456789"
)

// testConfig has a tool for each gate outcome; stub has a strict schema (its arguments
// are validated against it); inline outputs above 1 KiB are stored by reference.
const testConfig = `
prefix: awaken
tools:
  - id: echo
    capability: replay_safe
    recovery_policy: { mode: replay_safe, max_attempts: 3 }
  - id: ask_me
    builtin: ran
  - id: forbidden
    builtin: ran
  - id: stub
    parameters:
      type: object
      properties: { n: { type: integer } }
      required: [n]
      additionalProperties: false
    set_result: { text: "stubbed" }
  - id: progress
    builtin: progress
  - id: ask_progress
    builtin: progress
  - id: slow
    builtin: slow
    capability: replay_safe
  - id: client_pick
    kind: client_executed
policy:
  default_behavior: allow
  rules:
    - { pattern: ask_me, behavior: ask, timeout: 1h }
    - { pattern: ask_progress, behavior: ask, timeout: 1h }
    - { pattern: forbidden, behavior: deny }
executors:
  inline_output_bytes: 1024
mcp_serve:
  clients:
    - { actor: ide, tools: [echo] }
  max_queued_calls: 2
  max_argument_bytes: 4096
  max_sessions_per_actor: 3
  max_sessions: 4
`

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
}

// stack is the pipeline (batcher, gate, executors, publisher) and, started apart so a
// test can restart it, the api with the /mcp route.
type stack struct {
	t        *testing.T
	ctx      context.Context
	srv      *natstest.Server
	cfg      *config.Config
	pipeline *stacktest.Stack
	api      *stacktest.Stack
	addr     string
	client   *client.Client
}

func startStack(t *testing.T) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	t.Cleanup(cancel)
	srv := stacktest.NewServer(t)
	s := &stack{t: t, ctx: ctx, srv: srv.NATS, cfg: servicetest.ParseConfig(t, testConfig),
		addr: natstest.FreeLoopbackAddr(t), client: srv.Client}
	s.pipeline = srv.StartStack(ctx, app.Options{Config: s.cfg})
	s.api = srv.StartStack(ctx, app.Options{Config: s.cfg, Services: []string{contracts.ServiceAPI},
		API: api.Options{HTTPAddr: s.addr, Tokens: map[string]string{"alice": aliceToken, "ide": ideToken, "watcher": viewerToken},
			TokenRoles: map[string]apitokens.RoleSet{"watcher": apitokens.RolesOf(httpapi.RoleViewer)}}})
	return s
}

// startAPI starts the api again after stopAPI, on the same address.
func (s *stack) startAPI() { s.api.StartAgain(s.ctx) }

// stopAPI stops the api gracefully, as a SIGTERM would. The tests' HTTP requests share
// http.DefaultTransport, whose pool may still hold a connection the stopped server closed:
// a POST sent on it after the restart fails with EOF (a POST is not retried), so the
// pool is emptied with the server.
func (s *stack) stopAPI() {
	s.api.StopCleanly()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
}

func (s *stack) url(path string) string { return "http://" + s.addr + path }

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// progressLog collects the progress notifications a client receives.
type progressLog struct {
	mu    sync.Mutex
	notes []*mcp.ProgressNotificationParams
}

func (p *progressLog) handle(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, req.Params)
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.notes...)
}

// connectHTTP opens an MCP session over Streamable HTTP with token.
func (s *stack) connectHTTP(token, query string, progress *progressLog) *mcp.ClientSession {
	s.t.Helper()
	cs, err := s.tryConnectHTTP(token, query, progress)
	if err != nil {
		s.t.Fatal(err)
	}
	return cs
}

// tryConnectHTTP opens an MCP session over Streamable HTTP with token, or says why not.
func (s *stack) tryConnectHTTP(token, query string, progress *progressLog) (*mcp.ClientSession, error) {
	s.t.Helper()
	opts := &mcp.ClientOptions{}
	if progress != nil {
		opts.ProgressNotificationHandler = progress.handle
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1.2.3"}, opts)
	tr := &mcp.StreamableClientTransport{Endpoint: s.url("/mcp" + query),
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}
	cs, err := c.Connect(s.ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	s.t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

// call calls tool with args and fails the test on a protocol error.
func call(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// text joins the text content of res.
func text(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// httpJSON sends method path with alice's token and decodes a 200 answer into v.
func (s *stack) httpJSON(method, path string, body, v any) int {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequestWithContext(s.ctx, method, s.url(path), rd)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
	return res.StatusCode
}

// openTicket waits until exactly one ticket is open and returns it.
func (s *stack) openTicket() contracts.ResumeTicket {
	s.t.Helper()
	var ts []contracts.ResumeTicket
	natstest.WaitFor(s.t, waitTimeout, func() bool {
		var err error
		ts, err = s.client.Tickets(s.ctx)
		return err == nil && len(ts) == 1
	}, "one open ticket")
	return ts[0]
}

func (s *stack) approve(t contracts.ResumeTicket) {
	s.t.Helper()
	if code := s.httpJSON(http.MethodPost, "/v1/tickets/"+t.CorrelationID+"/approve", map[string]string{"note": "ok"}, nil); code != http.StatusOK {
		s.t.Fatalf("approve %s: %d", t.CorrelationID, code)
	}
}

// batchOf returns the batch id a result names.
func batchOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	id, _ := res.Meta["awaken/batch_id"].(string)
	if id == "" {
		t.Fatalf("result without awaken/batch_id: %+v", res.Meta)
	}
	return id
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(data)
}

// waitTick is the poll interval of the waits that are not a natstest.WaitFor condition.
func waitTick() <-chan time.Time { return time.After(10 * time.Millisecond) }
