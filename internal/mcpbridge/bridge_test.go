//go:build unix

package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/mcpbridge"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/toolctx"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// transports runs a subtest per transport with a bridge over one test server named
// "test" and the server's call log.
func transports(t *testing.T, f func(t *testing.T, b *mcpbridge.Bridge, log callLog)) {
	t.Run("stdio", func(t *testing.T) {
		log := newCallLog(t)
		f(t, newBridge(t, []config.MCPServer{stdioServer("test", log)}), log)
	})
	t.Run("http", func(t *testing.T) {
		log := newCallLog(t)
		h := startHTTPServer(t, "127.0.0.1:0", log)
		f(t, newBridge(t, []config.MCPServer{{Name: "test", URL: h.url()}}), log)
	})
}

func TestDescriptors(t *testing.T) {
	transports(t, func(t *testing.T, b *mcpbridge.Bridge, _ callLog) {
		descs := b.Descriptors(callCtx(t))
		var ids []string
		for _, d := range descs {
			ids = append(ids, d.ID)
			if err := d.Validate(); err != nil {
				t.Errorf("%s: %v", d.ID, err)
			}
			if d.Kind != contracts.KindRegular || d.RecoveryPolicy != contracts.DefaultRecoveryPolicy() {
				t.Errorf("%s: kind %q policy %+v, want regular and the default policy", d.ID, d.Kind, d.RecoveryPolicy)
			}
		}
		want := []string{"mcp__test__add", "mcp__test__charge", "mcp__test__charge_status", "mcp__test__echo_meta", "mcp__test__every", "mcp__test__fail", "mcp__test__graph", "mcp__test__greet (structured)",
			"mcp__test__grow", "mcp__test__image", "mcp__test__lookup (structured)", "mcp__test__meta", "mcp__test__metered", "mcp__test__pid", "mcp__test__progress", "mcp__test__resource", "mcp__test__slow", "mcp__test__structured"}
		if !slices.Equal(ids, want) {
			t.Fatalf("descriptor ids %v, want %v", ids, want)
		}
		add := descs[0]
		if add.Description != "Adds two numbers." {
			t.Errorf("add description %q", add.Description)
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(add.Parameters, &schema); err != nil {
			t.Fatal(err)
		}
		if schema.Type != "object" || len(schema.Properties) != 2 || schema.Properties["a"] == nil ||
			schema.Properties["b"] == nil || !slices.Equal(schema.Required, []string{"a", "b"}) {
			t.Errorf("add parameters %s, want an object with required a and b", add.Parameters)
		}
		// Tools without declared properties are normalised to the object form.
		structured := descs[slices.Index(ids, "mcp__test__structured")]
		if string(structured.Parameters) != `{"properties":{},"type":"object"}` {
			t.Errorf("structured parameters %s, want the normalised empty object", structured.Parameters)
		}
	})
}

// withStructured is out with structured content raw.
func withStructured(out contracts.ToolOutput, raw string) contracts.ToolOutput {
	out.StructuredContent = json.RawMessage(raw)
	return out
}

func TestInvoke(t *testing.T) {
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
	tests := []struct {
		name string
		tool string
		args string
		want contracts.ToolOutput
	}{
		{"text", "mcp__test__add", `{"a":2,"b":3}`, contracts.TextOutput("", "5")},
		{"is error result is an error output", "mcp__test__fail", `{}`, contracts.ErrorOutput("", "deliberate failure")},
		{"image", "mcp__test__image", `{}`, contracts.BlocksOutput("", []contracts.ContentBlock{
			{Type: contracts.BlockText, Text: "a pixel"},
			{Type: contracts.BlockImage, Source: &contracts.ImageSource{Type: "base64", MediaType: "image/png", Data: png}},
		}, false)},
		{"structured content only", "mcp__test__structured", `{}`, withStructured(contracts.TextOutput("", `{"answer":42}`), `{"answer":42}`)},
		{"embedded resource", "mcp__test__resource", `{}`, contracts.BlocksOutput("", []contracts.ContentBlock{
			{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///notes.txt", MimeType: "text/plain", Text: "remember"}},
		}, false)},
		// The memory server's read_graph: a status text and the data in structuredContent only.
		{"text and structured content", "mcp__test__graph", `{}`, withStructured(contracts.BlocksOutput("", []contracts.ContentBlock{
			{Type: contracts.BlockText, Text: "Graph read successfully"},
			{Type: contracts.BlockText, Text: `{"entities":[{"entityType":"person","name":"Ada","observations":["wrote the first program"]}]}`},
		}, false), `{"entities":[{"name":"Ada","entityType":"person","observations":["wrote the first program"]}]}`)},
		{"every kind of content", "mcp__test__every", `{}`, withStructured(contracts.BlocksOutput("", []contracts.ContentBlock{
			{Type: contracts.BlockText, Text: "all of it"},
			{Type: contracts.BlockImage, Source: &contracts.ImageSource{Type: "base64", MediaType: "image/png", Data: png}},
			{Type: contracts.BlockAudio, Source: &contracts.ImageSource{Type: "base64", MediaType: "audio/wav", Data: "UklGRgA="}},
			{Type: contracts.BlockResourceLink, URI: "file:///data.csv", Name: "data.csv", Title: "The data", MimeType: "text/csv", Size: 5},
			{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///notes.txt", MimeType: "text/plain", Text: "remember"}},
			{Type: contracts.BlockResource, Resource: &contracts.EmbeddedResource{URI: "file:///blob.bin", MimeType: "application/octet-stream", Blob: "AQID"}},
			{Type: contracts.BlockText, Text: `{"count":6}`},
		}, false), `{"count":6}`)},
		{"null arguments mean {}", "mcp__test__echo_meta", `null`, contracts.TextOutput("", "op-null arguments mean {}")},
		{"absent arguments mean {}", "mcp__test__echo_meta", ``, contracts.TextOutput("", "op-absent arguments mean {}")},
		{"operation id reaches the server", "mcp__test__echo_meta", `{}`, contracts.TextOutput("", "op-operation id reaches the server")},
	}
	transports(t, func(t *testing.T, b *mcpbridge.Bridge, log callLog) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				op := "op-" + tc.name
				out, err := b.Invoke(callCtx(t), tc.tool, json.RawMessage(tc.args), op)
				if err != nil {
					t.Fatalf("Invoke: %v", err)
				}
				if !out.Equal(tc.want) {
					got, _ := json.Marshal(out)
					want, _ := json.Marshal(tc.want)
					t.Fatalf("output\n got %s\nwant %s", got, want)
				}
				if err := out.Normalize().Validate(); err != nil && !strings.Contains(err.Error(), "call_id") {
					t.Errorf("output is not valid: %v", err)
				}
				name := strings.TrimPrefix(tc.tool, "mcp__test__")
				if n := log.count(t, name+" "+op); n != 1 {
					t.Errorf("the server saw %q %d times, want once", name+" "+op, n)
				}
			})
		}
	})
}

func TestInvoke_refusedWithoutReachingTheServer(t *testing.T) {
	tests := []struct {
		name string
		tool string
		args string
		kind contracts.ToolErrorKind
		text string
	}{
		{"unknown server", "mcp__other__add", `{}`, contracts.ToolErrorUnknown, "unknown tool: mcp__other__add"},
		{"not an mcp id", "add", `{}`, contracts.ToolErrorUnknown, "unknown tool: add"},
		{"empty tool name", "mcp__test__", `{}`, contracts.ToolErrorUnknown, "unknown tool: mcp__test__"},
		{"tool the server does not offer", "mcp__test__nope", `{}`, contracts.ToolErrorUnknown, "unknown tool: mcp__test__nope"},
		{"array arguments", "mcp__test__add", `[1,2]`, contracts.ToolErrorInvalidArguments, "invalid tool arguments: arguments must be a JSON object"},
		{"malformed arguments", "mcp__test__add", `{"a":`, contracts.ToolErrorInvalidArguments, "invalid tool arguments: arguments must be a JSON object"},
		// The server's own inputSchema (derived by the MCP SDK from its argument type) is
		// enforced before the call is dispatched.
		{"argument of the wrong type", "mcp__test__add", `{"a":"two","b":3}`, contracts.ToolErrorInvalidArguments, "invalid tool arguments: /a: got string, want number"},
		{"required argument missing", "mcp__test__add", `{"a":2}`, contracts.ToolErrorInvalidArguments, "invalid tool arguments: (arguments): missing property 'b'"},
	}
	transports(t, func(t *testing.T, b *mcpbridge.Bridge, log callLog) {
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := b.Invoke(callCtx(t), tc.tool, json.RawMessage(tc.args), "op")
				if toolErrorKind(err) != tc.kind || err.Error() != tc.text {
					t.Fatalf("error %v (kind %q), want %q (kind %q)", err, toolErrorKind(err), tc.text, tc.kind)
				}
			})
		}
		if lines := log.lines(t); len(lines) != 0 {
			t.Errorf("the server saw calls %q", lines)
		}
	})
}

func TestInvoke_unreachableServerIsUnavailableBeforeDispatch(t *testing.T) {
	tests := []struct {
		name   string
		server config.MCPServer
	}{
		{"missing binary", config.MCPServer{Name: "test", Command: "/nonexistent/mcp-server"}},
		{"binary that is not an mcp server", config.MCPServer{Name: "test", Command: "/bin/true"}},
		{"http server down", config.MCPServer{Name: "test", URL: "http://" + natstest.FreeLoopbackAddr(t) + "/"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBridge(t, []config.MCPServer{tc.server})
			st := b.Status()
			if len(st) != 1 || st[0].Connected || st[0].LastError == "" {
				t.Fatalf("status %+v, want one disconnected server with its error", st)
			}
			if d := b.Descriptors(callCtx(t)); len(d) != 0 {
				t.Fatalf("descriptors %v of a server that is down", d)
			}
			_, err := b.Invoke(callCtx(t), "mcp__test__add", json.RawMessage(`{"a":1,"b":2}`), "op")
			if !contracts.IsUnavailableBeforeDispatch(err) {
				t.Fatalf("error %v (kind %q), want unavailable before dispatch", err, toolErrorKind(err))
			}
		})
	}
}

// TestInvoke_stdioServerKilledInFlight proves that a call whose server dies while it runs
// is an execution failure, never "unavailable before dispatch" (the effect may have
// happened), and that the next call starts a new server process and works.
func TestInvoke_stdioServerKilledInFlight(t *testing.T) {
	log := newCallLog(t)
	b := newBridge(t, []config.MCPServer{stdioServer("test", log)})
	pid := invokePID(t, b)

	errc := make(chan error, 1)
	go func() {
		_, err := b.Invoke(callCtx(t), "mcp__test__slow", json.RawMessage(`{"ms":60000}`), "op-slow")
		errc <- err
	}()
	natstest.WaitFor(t, waitTimeout, func() bool { return log.count(t, "begin slow op-slow") == 1 }, "the slow call to start on the server")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if toolErrorKind(err) != contracts.ToolErrorExecution {
		t.Fatalf("error %v (kind %q), want an execution failure", err, toolErrorKind(err))
	}

	if next := invokePID(t, b); next == pid {
		t.Fatalf("the next call ran on the killed process %d", pid)
	}
	natstest.WaitFor(t, waitTimeout, func() bool { return !processAlive(pid) }, "the killed child to be reaped")
}

// TestInvoke_stdioServerDiedBetweenCalls: a child that died while idle is noticed and
// replaced, and the next call runs exactly once on the new one. (A call racing with the
// death itself may have been written into the dying child's pipe and is then, rightly,
// an execution failure; the test waits until the death is observed.)
func TestInvoke_stdioServerDiedBetweenCalls(t *testing.T) {
	log := newCallLog(t)
	b := newBridge(t, []config.MCPServer{stdioServer("test", log)})
	pid := invokePID(t, b)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	natstest.WaitFor(t, waitTimeout, func() bool { return !b.Status()[0].Connected }, "the bridge to notice the dead child")
	natstest.WaitFor(t, waitTimeout, func() bool { return !processAlive(pid) }, "the dead child to be reaped")
	out, err := b.Invoke(callCtx(t), "mcp__test__add", json.RawMessage(`{"a":1,"b":1}`), "op-after-death")
	if err != nil || out.Text() != "2" {
		t.Fatalf("call after the child died: %v %v", out, err)
	}
	if n := log.count(t, "add op-after-death"); n != 1 {
		t.Fatalf("the call ran %d times, want once", n)
	}
}

// TestInvoke_httpServerKilledInFlightAndRestarted: an HTTP server that dies during a call
// makes that call an execution failure; once it is back on the same address the next
// call works on a new session.
func TestInvoke_httpServerKilledInFlightAndRestarted(t *testing.T) {
	log := newCallLog(t)
	h := startHTTPServer(t, "127.0.0.1:0", log)
	b := newBridge(t, []config.MCPServer{{Name: "test", URL: h.url()}})
	invokePID(t, b)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := b.Invoke(ctx, "mcp__test__slow", json.RawMessage(`{"ms":60000}`), "op-slow")
		errc <- err
	}()
	natstest.WaitFor(t, waitTimeout, func() bool { return log.count(t, "begin slow op-slow") == 1 }, "the slow call to start on the server")
	h.kill()
	err := <-errc
	if toolErrorKind(err) != contracts.ToolErrorExecution {
		t.Fatalf("error %v (kind %q), want an execution failure", err, toolErrorKind(err))
	}

	startHTTPServer(t, h.addr, log)
	// The first attempt goes to the stale session, which the new server refuses (404);
	// the call is retried once on a new session, and the dispatch hook runs once.
	hooks := 0
	ctx = mcpbridge.WithBeforeDispatch(callCtx(t), func(context.Context) error { hooks++; return nil })
	out, err := b.Invoke(ctx, "mcp__test__add", json.RawMessage(`{"a":20,"b":22}`), "op-after-restart")
	if err != nil || out.Text() != "42" {
		t.Fatalf("call after the restart: %v %v", out, err)
	}
	if hooks != 1 {
		t.Fatalf("before-dispatch hook ran %d times, want once", hooks)
	}
	if n := log.count(t, "add op-after-restart"); n != 1 {
		t.Fatalf("the call ran %d times, want once", n)
	}
}

// invokePID returns the process id of the test server serving the bridge's "test" server.
func invokePID(t *testing.T, b *mcpbridge.Bridge) int {
	t.Helper()
	out, err := b.Invoke(callCtx(t), "mcp__test__pid", nil, "op-pid")
	if err != nil {
		t.Fatalf("pid: %v", err)
	}
	pid, err := strconv.Atoi(out.Text())
	if err != nil {
		t.Fatalf("pid output %q", out.Text())
	}
	return pid
}

// TestBeforeDispatchHook: the hook runs once immediately before a call may reach the
// server, never for calls refused earlier, and its failure keeps the call from the server.
func TestBeforeDispatchHook(t *testing.T) {
	log := newCallLog(t)
	b := newBridge(t, []config.MCPServer{stdioServer("test", log), {Name: "down", Command: "/nonexistent/mcp"}})
	tests := []struct {
		name    string
		tool    string
		hookErr error
		hooks   int
		kind    contracts.ToolErrorKind
		reached bool
	}{
		{"call", "mcp__test__add", nil, 1, "", true},
		{"unknown tool", "mcp__test__nope", nil, 0, contracts.ToolErrorUnknown, false},
		{"server down", "mcp__down__add", nil, 0, contracts.ToolErrorUnavailableBeforeDispatch, false},
		{"hook fails with a tool error", "mcp__test__add", contracts.UnavailableBeforeDispatch("ledger down"), 1, contracts.ToolErrorUnavailableBeforeDispatch, false},
		{"hook fails with another error", "mcp__test__add", errors.New("boom"), 1, contracts.ToolErrorUnavailableBeforeDispatch, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hooks := 0
			ctx := mcpbridge.WithBeforeDispatch(callCtx(t), func(context.Context) error { hooks++; return tc.hookErr })
			op := "op-hook-" + tc.name
			_, err := b.Invoke(ctx, tc.tool, json.RawMessage(`{"a":1,"b":2}`), op)
			if toolErrorKind(err) != tc.kind {
				t.Fatalf("error %v (kind %q), want kind %q", err, toolErrorKind(err), tc.kind)
			}
			if hooks != tc.hooks {
				t.Fatalf("hook ran %d times, want %d", hooks, tc.hooks)
			}
			if reached := log.count(t, "add "+op) == 1; reached != tc.reached {
				t.Fatalf("server saw the call: %v, want %v", reached, tc.reached)
			}
		})
	}
}

// TestInvoke_progressArrivesBeforeTheResult: every notifications/progress a server writes
// before its response reaches the receiver before Invoke returns, even when the receiver
// is slow, over stdio and over streamable HTTP. The receiver holds its first report until
// Invoke returned or a bound passed: had the SDK's handler goroutine delivered it (as it
// did), the response overtook the queued reports, Invoke returned, and the reports behind
// the first were dropped with the closed route.
func TestInvoke_progressArrivesBeforeTheResult(t *testing.T) {
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			const steps = 5
			server := stdioServer("test", newCallLog(t))
			if transport == "http" {
				server = config.MCPServer{Name: "test", URL: startHTTPServer(t, "127.0.0.1:0", newCallLog(t)).url()}
			}
			b := newBridge(t, []config.MCPServer{server})
			returned := make(chan struct{})
			var mu sync.Mutex
			var got []float64
			first := true
			ctx := mcpbridge.WithProgress(callCtx(t), func(progress, _ float64, _ string) {
				mu.Lock()
				hold := first
				first = false
				mu.Unlock()
				if hold {
					select {
					case <-returned:
					case <-time.After(2 * time.Second): // the bound of the negative: Invoke did not return
					}
				}
				mu.Lock()
				got = append(got, progress)
				mu.Unlock()
			})
			out, err := b.Invoke(ctx, "mcp__test__progress", json.RawMessage(fmt.Sprintf(`{"steps":%d,"ms":1}`, steps)), "op-progress-order")
			close(returned)
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if want := fmt.Sprintf("progressed %d steps (token: yes)", steps); out.Text() != want {
				t.Fatalf("output %q, want %q", out.Text(), want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != steps || got[steps-1] != steps {
				t.Fatalf("reports received before Invoke returned: %v, want 1..%d", got, steps)
			}
		})
	}
}

// TestInvoke_reportedCostReachesTheExecutor: a server that reports what the call cost in
// the result's _meta (io.awaken/cost) has it passed to the cost reporter of the body's
// context — the executor's, which charges the host's budgets with it.
func TestInvoke_reportedCostReachesTheExecutor(t *testing.T) {
	transports(t, func(t *testing.T, b *mcpbridge.Bridge, _ callLog) {
		var got []float64
		ctx := toolctx.WithCost(callCtx(t), func(amount float64) { got = append(got, amount) })
		out, err := b.Invoke(ctx, "mcp__test__metered", json.RawMessage(`{"cost":0.25}`), "op-metered")
		if err != nil || out.Text() != "metered" {
			t.Fatalf("invoke: %q, %v", out.Text(), err)
		}
		if !slices.Equal(got, []float64{0.25}) {
			t.Fatalf("reported costs %v, want [0.25]", got)
		}
		// A negative cost is not a cost: nothing is reported.
		got = nil
		if _, err := b.Invoke(ctx, "mcp__test__metered", json.RawMessage(`{"cost":-1}`), "op-metered-2"); err != nil {
			t.Fatal(err)
		}
		if len(got) != 0 {
			t.Fatalf("reported %v for a negative cost", got)
		}
	})
}
