package mcpserve_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// pipeTransports returns the two ends of a newline-delimited JSON stream, as stdio is.
func pipeTransports() (server, cl mcp.Transport) {
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	return &mcp.IOTransport{Reader: toServer, Writer: fromServer}, &mcp.IOTransport{Reader: toClient, Writer: fromClient}
}

// startStdio serves a door over stdio pipes, as `awaken mcp-serve` does, on a client of
// the running awaken, and connects an MCP client to it.
func startStdio(t *testing.T, s *stack, actor string, agentTools []string) (*mcp.ClientSession, *progressLog) {
	t.Helper()
	nc, _ := s.srv.Conn(t)
	c, err := client.New(nc, client.WithSource("awaken/mcp"), client.KeepLinks())
	if err != nil {
		t.Fatal(err)
	}
	door, err := mcpserve.New(mcpserve.Options{Client: c, Config: s.cfg.MCPServe, Log: testLogger(t), APIBase: s.url("/"),
		Catalog: func(ctx context.Context) ([]contracts.CatalogTool, error) { return c.Tools(ctx) }})
	if err != nil {
		t.Fatal(err)
	}
	serverEnd, clientEnd := pipeTransports()
	ctx, cancel := context.WithCancel(s.ctx)
	served := make(chan error, 1)
	go func() { served <- door.ServeStdio(ctx, serverEnd, actor, agentTools) }()
	var progress progressLog
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "stdio-client", Version: "9"},
		&mcp.ClientOptions{ProgressNotificationHandler: progress.handle}).Connect(s.ctx, clientEnd, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		door.Stop()
		cancel()
		<-served
	})
	return cs, &progress
}

// TestStdio: over stdio a client lists the tools (narrowed by the agent-tools list), calls
// one, gets an output stored by reference as a resource link it reads back with
// resources/read, and the batch's metadata and the audit name the stdio session and the
// claimed actor; a call parked on approval reports progress and answers once approved.
func TestStdio(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs, progress := startStdio(t, s, "cli:tester", []string{"echo", "ask_me"})
	if got := toolNames(t, ctx, cs); strings.Join(got, ",") != "ask_me,echo" {
		t.Fatalf("tools %v, want ask_me,echo (the agent-tools list)", got)
	}

	long := strings.Repeat("awaken ", 300) // over inline_output_bytes: stored by reference
	out := call(t, ctx, cs, "echo", map[string]any{"text": long}, nil)
	if out.IsError {
		t.Fatalf("echo: %q", text(out))
	}
	var link *mcp.ResourceLink
	for _, c := range out.Content {
		if l, ok := c.(*mcp.ResourceLink); ok {
			link = l
		}
	}
	if link == nil || !strings.HasPrefix(link.URI, contracts.ObjectURIPrefix) {
		t.Fatalf("echo of %d bytes: content %+v, want a resource link to the object", len(long), out.Content)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
	if err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text+string(read.Contents[0].Blob), long) {
		t.Fatalf("resources/read %s: %+v", link.URI, read.Contents)
	}

	batchID := batchOf(t, out)
	audit := lastClaim(t, s)
	if audit.BatchID != batchID || audit.Transport != mcpserve.TransportStdio || audit.Actor != "cli:tester" ||
		audit.ClientName != "stdio-client" || !strings.HasPrefix(audit.SessionID, "stdio-") {
		t.Fatalf("audit %+v", audit)
	}
	if want := contracts.BatchID(mcpserve.RunID(audit.SessionID, 1), 1); batchID != want {
		t.Fatalf("batch %s, want %s", batchID, want)
	}

	done, ticket := s.callUntilParked(ctx, cs, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": 7}})
	waitProgress(t, progress, ticket.CorrelationID)
	s.approve(ticket)
	if a := <-done; a.err != nil || a.res == nil || a.res.IsError || !strings.Contains(text(a.res), "ran") {
		t.Fatalf("ask_me after approval: %+v, %v", a.res, a.err)
	}
}

func waitProgress(t *testing.T, p *progressLog, correlationID string) {
	t.Helper()
	ctx := callCtx(t)
	for {
		for _, n := range p.all() {
			if strings.Contains(n.Message, correlationID) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no progress naming %s: %+v", correlationID, p.all())
		case <-waitTick():
		}
	}
}

// TestStdioCancel: over stdio, the client's notifications/cancelled cancels the session's
// run (awaken mcp-serve's NATS user may cancel runs, not single calls): the call ends
// indeterminate, and the session's next call runs in its next run.
func TestStdioCancel(t *testing.T) {
	s := startStack(t)
	ctx := callCtx(t)
	cs, _ := startStdio(t, s, "cli:tester", nil)
	callCtx, cancelCall := context.WithCancel(ctx)
	done, tk := s.callUntilParked(callCtx, cs, &mcp.CallToolParams{Name: "ask_me", Arguments: map[string]any{}})
	cancelCall()
	<-done
	b, err := s.client.Await(ctx, tk.RunID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if b.Results[0].Outcome != contracts.OutcomeIndeterminate {
		t.Fatalf("the cancelled call: %+v", b.Results[0])
	}
	next := nextRun(t, tk.RunID)
	if out := call(t, ctx, cs, "echo", map[string]any{"text": "after"}, nil); text(out) != "after" || batchOf(t, out) != contracts.BatchID(next, 1) {
		t.Fatalf("the next call: %q in %s, want the session's next run", text(out), batchOf(t, out))
	}
}

// nextRun is the run after runID of the same session (its generation plus one).
func nextRun(t *testing.T, runID string) string {
	t.Helper()
	i := strings.LastIndexByte(runID, '-')
	n, err := strconv.Atoi(runID[i+1:])
	if err != nil {
		t.Fatalf("run %s has no generation", runID)
	}
	return runID[:i+1] + strconv.Itoa(n+1)
}
