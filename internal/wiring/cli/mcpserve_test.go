package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestMCPServe runs `awaken mcp-serve` on stdio pipes against a running stack: an MCP
// client lists the tools (--agent-tools narrows them), calls echo and gets its output; the
// batch names the --actor and the stdio transport; the command ends with its context.
func TestMCPServe(t *testing.T) {
	cfg := parseConfig(t, "storage: {memory: true}\ntools:\n  - id: echo\n    capability: replay_safe\n    recovery_policy: {mode: replay_safe}\n  - id: counter\npolicy: {default_behavior: allow}\n")
	ctx := servicetest.Context(t, time.Minute)
	srv, st := startStack(t, ctx, cfg, append(app.AllServices(), contracts.ServiceAPI)...)
	stdin, toServer := io.Pipe()
	fromServer, stdout := io.Pipe()
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- runMCPServe(serveCtx, []string{"--nats-url", srv.URL(), "--actor", "tester", "--agent-tools", "echo"},
			stdin, stdout, io.Discard)
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: fromServer, Writer: toServer}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools %+v, want echo alone", tools.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "over stdio"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "over stdio" {
		t.Fatalf("echo: %+v", res.Content)
	}
	batchID, _ := res.Meta["awaken/batch_id"].(string)
	runID, _, ok := strings.Cut(strings.TrimPrefix(batchID, "tool-batch:"), ":")
	if !ok {
		t.Fatalf("batch id %q", batchID)
	}
	rec, err := st.Env.Batch(ctx, runID, 1)
	if err != nil {
		t.Fatal(err)
	}
	md := rec.Submission.Metadata
	if md[contracts.MetadataActor] != "tester" || md[contracts.MetadataMCPTransport] != "stdio" || md[contracts.MetadataMCPClientName] != "cli-test" {
		t.Fatalf("metadata %v", md)
	}
	stopServe()
	select {
	case err := <-served:
		if err != nil && !strings.Contains(err.Error(), "closed") && ctx.Err() == nil {
			t.Logf("mcp-serve ended: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("mcp-serve did not end with its context")
	}
}
