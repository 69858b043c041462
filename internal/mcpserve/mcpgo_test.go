package mcpserve_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	mgoclient "github.com/mark3labs/mcp-go/client"
	mgotransport "github.com/mark3labs/mcp-go/client/transport"
	mgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// The door with mark3labs/mcp-go's client, with its defaults: the most used Go MCP client
// after the official SDK's, which negotiates differently (it probes server/discover first)
// and, over HTTP, sends no cancellation when it gives up on a call.

// mgoClientName is what the mcp-go test clients declare.
const mgoClientName = "mcp-go-test"

// mgoProgress collects the progress notifications an mcp-go client receives.
type mgoProgress struct {
	mu    sync.Mutex
	notes []map[string]any
}

func (p *mgoProgress) handle(n mgo.JSONRPCNotification) {
	if n.Method != "notifications/progress" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notes = append(p.notes, n.Params.AdditionalFields)
}

func (p *mgoProgress) all() []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.notes)
}

// initMGo starts and initializes an mcp-go client with its defaults.
func (s *stack) initMGo(c *mgoclient.Client) *mgoProgress {
	s.t.Helper()
	var progress mgoProgress
	c.OnNotification(progress.handle)
	if err := c.Start(s.ctx); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(s.ctx, mgo.InitializeRequest{Params: mgo.InitializeParams{
		ClientInfo: mgo.Implementation{Name: mgoClientName, Version: "1.6.0"}}}); err != nil {
		s.t.Fatalf("mcp-go initialize: %v", err)
	}
	return &progress
}

// connectMGoHTTP opens an mcp-go session over Streamable HTTP with token.
func (s *stack) connectMGoHTTP(token string, opts ...mgoclient.ClientOption) (*mgoclient.Client, *mgoProgress) {
	s.t.Helper()
	// The token on every request: with WithHTTPHeaders, mcp-go's DELETE at Close carries
	// none, so the session would stay open (holding a place) until it is idle for an hour.
	tr, err := mgotransport.NewStreamableHTTP(s.url("/mcp"),
		mgotransport.WithHTTPBasicClient(&http.Client{Transport: bearer{token, http.DefaultTransport}}))
	if err != nil {
		s.t.Fatal(err)
	}
	c := mgoclient.NewClient(tr, opts...)
	return c, s.initMGo(c)
}

// connectMGoStdio serves a door over stdio pipes, as `awaken mcp-serve` does, and connects
// an mcp-go client to it.
func (s *stack) connectMGoStdio(actor string, opts ...mgoclient.ClientOption) (*mgoclient.Client, *mgoProgress) {
	s.t.Helper()
	in, out := s.serveStdioPipes(actor)
	mc := mgoclient.NewClient(mgotransport.NewIO(in, out, io.NopCloser(strings.NewReader(""))), opts...)
	return mc, s.initMGo(mc)
}

// serveStdioPipes serves a door over stdio pipes, as `awaken mcp-serve` does, on a client
// of the running awaken, and returns the client's ends: what it reads, where it writes.
func (s *stack) serveStdioPipes(actor string) (io.ReadCloser, io.WriteCloser) {
	s.t.Helper()
	nc, _ := s.srv.Conn(s.t)
	c, err := client.New(nc, client.WithSource("awaken/mcp"), client.KeepLinks())
	if err != nil {
		s.t.Fatal(err)
	}
	door, err := mcpserve.New(mcpserve.Options{Client: c, Config: s.cfg.MCPServe, Log: testLogger(s.t), APIBase: s.url("/"),
		Catalog: func(ctx context.Context) ([]contracts.CatalogTool, error) { return c.Tools(ctx) }})
	if err != nil {
		s.t.Fatal(err)
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	ctx, cancel := context.WithCancel(s.ctx)
	served := make(chan error, 1)
	go func() {
		served <- door.ServeStdio(ctx, &mcp.IOTransport{Reader: toServer, Writer: fromServer}, actor, nil)
	}()
	s.t.Cleanup(func() {
		_ = fromClient.Close()
		door.Stop()
		cancel()
		<-served
	})
	return toClient, fromClient
}

// mgoCall calls tool with args (and a progress token when token is not nil).
func mgoCall(ctx context.Context, c *mgoclient.Client, tool string, args map[string]any, token any) (*mgo.CallToolResult, error) {
	req := mgo.CallToolRequest{Params: mgo.CallToolParams{Name: tool, Arguments: args}}
	if token != nil {
		req.Params.Meta = &mgo.Meta{ProgressToken: token}
	}
	return c.CallTool(ctx, req)
}

// mgoText joins the text content of res.
func mgoText(res *mgo.CallToolResult) string {
	if res == nil {
		return ""
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mgo.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mgoTools lists the tool names c is offered.
func mgoTools(t *testing.T, ctx context.Context, c *mgoclient.Client) []string {
	t.Helper()
	res, err := c.ListTools(ctx, mgo.ListToolsRequest{})
	if err != nil {
		t.Fatalf("mcp-go tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

// TestMCPGoListCall: mcp-go with its defaults initializes over Streamable HTTP and over
// stdio, lists the tools (the client-executed one left out) and calls one.
func TestMCPGoListCall(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	httpClient, _ := s.connectMGoHTTP(aliceToken)
	stdioClient, _ := s.connectMGoStdio("cli:mcp-go")
	// Over HTTP the newest version with sessions, over stdio the newest the SDK speaks.
	wantVersion := map[string]string{"http": mcpserve.SessionVersions()[0], "stdio": mcp.SupportedProtocolVersions()[0]}
	for name, c := range map[string]*mgoclient.Client{"http": httpClient, "stdio": stdioClient} {
		t.Logf("mcp-go over %s negotiated protocol version %s", name, c.ProtocolVersion())
		if c.ProtocolVersion() != wantVersion[name] {
			t.Errorf("mcp-go over %s negotiated protocol version %s, want %s", name, c.ProtocolVersion(), wantVersion[name])
		}
		if got, want := mgoTools(t, ctx, c), []string{"ask_me", "ask_progress", "echo", "forbidden", "progress", "slow", "stub"}; !slices.Equal(got, want) {
			t.Errorf("mcp-go over %s: tools %v, want %v", name, got, want)
		}
		res, err := mgoCall(ctx, c, "echo", map[string]any{"text": "hello from " + name}, nil)
		if err != nil || res.IsError || mgoText(res) != "hello from "+name {
			t.Errorf("mcp-go over %s: echo: %v %q", name, err, mgoText(res))
		}
	}
}
