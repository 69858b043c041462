package devstack_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/health"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/devstack"
	"github.com/awaken-dev/awaken/internal/wiring/stacktest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestDevSecure runs `awaken dev --secure`: the embedded server takes only the users of
// deploy/nats/auth.conf, the platform user completes a batch, /readyz answers 200, an
// anonymous client is refused, and the api (as the api user) approves a ticket over HTTP
// and answers the micro service.
func TestDevSecure(t *testing.T) {
	cfg, err := config.Load(filepath.Join("..", "..", "..", "examples", "awaken.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// An MCP server whose annotations are trusted: the services watch the published tool
	// descriptors under their own users (the server itself never comes up).
	cfg.Executors.MCP = append(cfg.Executors.MCP, config.MCPServer{Name: "absent", Command: filepath.Join(t.TempDir(), "no-such-server"), TrustAnnotations: true})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	pw, err := deploy.GeneratePasswords()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	httpAddr := natstest.FreeLoopbackAddr(t)
	// Made before the cleanup below is registered, so that the stack stops (last registered,
	// first run) before its store directory is removed.
	opts := devstack.DevOptions{Config: cfg, DataDir: t.TempDir(), Listen: natstest.FreeLoopbackAddr(t),
		Secure: true, Passwords: pw, HTTP: httpAddr, Ready: func(url string) { ready <- url }}
	go func() { done <- devstack.Dev(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
	})
	var url string
	select {
	case url = <-ready:
	case err := <-done:
		done <- nil // for the cleanup, which waits for dev to end
		t.Fatalf("dev stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("dev not ready within 60s")
	}
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	if err := health.Probe(rctx, "http://"+httpAddr+health.ReadinessPath, 5*time.Second); err != nil {
		t.Errorf("readyz: %v", err)
	}

	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to a secure dev server")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("anonymous connect: %v, want an authorization error", err)
	}
	c, err := client.New(servicetest.Connect(t, url, nats.UserInfo(deploy.UserPlatform, pw[deploy.UserPlatform])))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SubmitAndWait(rctx, contracts.BatchSubmission{RunID: "dev-secure", ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: []byte(`{"text":"hi"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Results[0].Output.Text(); got != "hi" {
		t.Errorf("result %q", got)
	}

	// The api runs too, as the api user: an approval over HTTP reaches the gate and
	// its answer comes back; operators reach the micro service as admin.
	sub := contracts.BatchSubmission{RunID: "dev-secure-api", ThreadID: "t", Step: 1,
		Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"ask_me"}},
		Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "ask_me", Arguments: []byte(`{}`)}}}
	tk := stacktest.Park(t, rctx, c, sub, "c1")
	admin := servicetest.Connect(t, url, nats.UserInfo(deploy.UserAdmin, pw[deploy.UserAdmin]))
	m, err := admin.RequestWithContext(rctx, httpapi.MicroSubject(contracts.DefaultPrefix, httpapi.EndpointTicketsGet), []byte(tk.CorrelationID))
	if err != nil {
		t.Fatalf("micro tickets.get: %v", err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("micro tickets.get: %s %s", code, m.Data)
	}
	// The api serves the per-user resolve subject as the api user: an edit that is no
	// object is refused there, and the ticket stays open.
	m, err = admin.RequestWithContext(rctx, httpapi.ResolveAsSubject(contracts.DefaultPrefix, deploy.UserAdmin),
		[]byte(`{"correlation_id":"`+tk.CorrelationID+`","decision":"allow","arguments":[1]}`))
	if err != nil {
		t.Fatalf("micro tickets.resolve as admin: %v", err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != string(contracts.ResumeInvalidArguments) {
		t.Fatalf("micro tickets.resolve as admin with an array edit: %q %s, want invalid_arguments", code, m.Data)
	}
	// Approved with edited arguments: the gate reads the tool descriptors as its own user.
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+httpAddr+"/v1/tickets/"+tk.CorrelationID+"/approve",
		strings.NewReader(`{"note":"ok","arguments":{"edited":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"actor":"anonymous"`) {
		t.Fatalf("approve over HTTP: %d %s", resp.StatusCode, body)
	}
	res, err = c.Await(rctx, sub.RunID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Results[0]; o.Outcome != contracts.OutcomeCompleted || o.Output.IsError {
		t.Errorf("approved call: %s %q", o.Outcome, o.Output.Text())
	}
	// /metrics on the api's server; the tickets gauge scans the bucket as the gate user.
	req, err = http.NewRequestWithContext(rctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), telemetry.MetricTicketsScrape+" 0\n") {
		t.Errorf("GET /metrics: %d, tickets scrape failed:\n%s", resp.StatusCode, body)
	}

	// The kill switch under least privilege: an operator (admin) pauses echo through the
	// micro service, the api (as the api user) stores the pause and its audit record, the
	// gate (as the gate user) reads it, the catalog shows it, and a resume lifts it.
	ops, err := client.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.PauseTool(rctx, "echo", "least privilege", "admin"); err != nil {
		t.Fatalf("pause: %v", err)
	}
	echo := func(run string) string {
		t.Helper()
		res, err := c.SubmitAndWait(rctx, contracts.BatchSubmission{RunID: run, ThreadID: "t", Step: 1,
			Agent: contracts.AgentSnapshot{SnapshotID: "s", Tools: []string{"echo"}},
			Calls: []contracts.ToolCall{{CallID: "c1", ToolID: "echo", Arguments: []byte(`{"text":"hi"}`)}}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Results[0].Output.Text()
	}
	if got := echo("dev-secure-paused"); got != "blocked: tool_paused: tool echo is paused: least privilege" {
		t.Errorf("echo while paused: %q", got)
	}
	tools, err := ops.Tools(rctx, "echo")
	if err != nil || len(tools) != 1 || !tools[0].Paused {
		t.Errorf("catalog while paused: %+v %v", tools, err)
	}
	if _, err := ops.ResumeTool(rctx, "echo", "admin"); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if got := echo("dev-secure-resumed"); got != "hi" {
		t.Errorf("echo after resume: %q", got)
	}
}
