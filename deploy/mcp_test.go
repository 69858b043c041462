package deploy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestSecure_mcpDoorNeedsNoMorePermission: with the users of deploy/nats/auth.conf, the
// api's /mcp door (as the api user) and `awaken mcp-serve`'s door (as the platform user)
// list the tools, run a call, and follow a parked call through its progress, its approval
// and its result, without one permission violation.
func TestSecure_mcpDoorNeedsNoMorePermission(t *testing.T) {
	t.Parallel() // no Docker: overlaps the (sequential) container tests
	s := startSecure(t)
	ctx := ctxFor(t, 2*time.Minute)

	// The api's door: Streamable HTTP on /mcp.
	var progressed atomic.Int64
	c := mcp.NewClient(&mcp.Implementation{Name: "secure-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			if req.Params.ProgressToken == "running" {
				progressed.Add(1)
			}
		}})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: strings.TrimSuffix(s.apiURL, "/") + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	checkMCPDoor(t, ctx, s, cs, &progressed)

	// The stdio door, run as the platform user.
	stdio, stopStdio := serveStdioDoor(t, ctx, s, c, "cli:secure")
	checkMCPDoor(t, ctx, s, stdio, &progressed)
	stopStdio()

	if v := s.takeViolations(); len(v) > 0 {
		t.Fatalf("permission violations: %v", v)
	}
}

// serveStdioDoor runs `awaken mcp-serve`'s door as the platform user over an in-process
// pipe and connects c to it as actor; stop closes the session and waits for the door.
func serveStdioDoor(t *testing.T, ctx context.Context, s *secureStack, c *mcp.Client, actor string) (*mcp.ClientSession, func()) {
	t.Helper()
	platform, err := client.New(s.connect(t, deploy.UserPlatform), client.KeepLinks())
	if err != nil {
		t.Fatal(err)
	}
	door, err := mcpserve.New(mcpserve.Options{Client: platform, Config: s.cfg.MCPServe, Log: zerolog.Nop(),
		Catalog: func(ctx context.Context) ([]contracts.CatalogTool, error) { return platform.Tools(ctx) }})
	if err != nil {
		t.Fatal(err)
	}
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- door.ServeStdio(serveCtx, &mcp.IOTransport{Reader: toServer, Writer: fromServer}, actor, nil)
	}()
	stdio, err := c.Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return stdio, func() {
		_ = stdio.Close()
		stop()
		<-served
	}
}

// checkMCPDoor lists the tools, calls echo, calls progress (its running progress reaches
// the client), gives up on a slow call (cancelling it), and calls ask_me, approving its
// ticket over HTTP once the progress notification named it.
func checkMCPDoor(t *testing.T, ctx context.Context, s *secureStack, cs *mcp.ClientSession, progressed *atomic.Int64) {
	t.Helper()
	if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "secure"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "secure" {
		t.Fatalf("echo: %v %+v", err, res)
	}
	before := progressed.Load()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": 3, "ms": 300},
		Meta: mcp.Meta{"progressToken": "running"}})
	if err != nil || res.IsError || progressed.Load() == before {
		t.Fatalf("progress: %v %+v, %d progress notifications", err, res, progressed.Load()-before)
	}
	slowCtx, giveUp := context.WithTimeout(ctx, time.Second)
	if _, err := cs.CallTool(slowCtx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 60000}}); err == nil {
		t.Fatal("slow answered within a second")
	}
	giveUp()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p"}})
		if err != nil {
			t.Errorf("ask_me: %v", err)
		}
		done <- res
	}()
	var tk contracts.ResumeTicket
	for {
		ts, err := s.client.Tickets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 1 {
			tk = ts[0]
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no ticket opened for ask_me")
		case <-time.After(20 * time.Millisecond):
		}
	}
	var r contracts.TicketResolution
	if st, body := apiDo(t, ctx, "POST", s.apiURL, "/v1/tickets/"+tk.CorrelationID+"/approve", httpapi.ApproveRequest{Note: "ok"}, &r); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, body)
	}
	if res := <-done; res == nil || res.IsError {
		t.Fatalf("ask_me after approval: %+v", res)
	}
}
