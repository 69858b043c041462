package mcpbridge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// methodCallTool is the JSON-RPC method of a tool call.
const methodCallTool = "tools/call"

// sessionIDHeader is the streamable HTTP header naming the MCP session.
const sessionIDHeader = "Mcp-Session-Id"

// probe records, for one invocation, every attempt to hand its tools/call request to the
// wire and how many of them provably delivered nothing. It is safe for concurrent use:
// the SDK may write from another goroutine than the caller's.
type probe struct {
	mu        sync.Mutex
	attempts  int
	refusedBy int
}

// begin records an attempt to hand the request over. Until [probe.refused] is called for
// it, the attempt counts as possibly delivered.
func (p *probe) begin() {
	p.mu.Lock()
	p.attempts++
	p.mu.Unlock()
}

// refused records that an attempt begun with [probe.begin] provably delivered nothing.
func (p *probe) refused() {
	p.mu.Lock()
	p.refusedBy++
	p.mu.Unlock()
}

// mayHaveReachedServer reports whether some attempt may have delivered the request: an
// attempt that is still in progress or that ended without proof of non-delivery.
func (p *probe) mayHaveReachedServer() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts > p.refusedBy
}

type probeKey struct{}

// withProbe returns ctx carrying p. The SDK passes the call's context down to the
// transport's Write and to the HTTP request, which is how the transports find the probe.
func withProbe(ctx context.Context, p *probe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

func probeFrom(ctx context.Context) *probe {
	p, _ := ctx.Value(probeKey{}).(*probe)
	return p
}

// isToolCall reports whether msg is a tools/call request (not a notification or a
// response, in particular not the notifications/cancelled that follows a cancelled call
// under the same context).
func isToolCall(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.IsCall() && req.Method == methodCallTool
}

// probedStdioConn is the SDK's stdio connection with the dispatch probe: it records each
// write of a tools/call request and whether any of its bytes reached the child's stdin.
type probedStdioConn struct {
	mcp.Connection
	stdin *childProcess
}

// Write implements mcp.Connection. The byte counter of the child's stdin only grows, so
// "unchanged across this write" proves this write put nothing in the pipe, whatever other
// goroutines wrote concurrently (their bytes can only make the proof fail, never forge it).
func (c *probedStdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	p := probeFrom(ctx)
	if p == nil || !isToolCall(msg) {
		return c.Connection.Write(ctx, msg)
	}
	p.begin()
	before := c.stdin.written.Load()
	err := c.Connection.Write(ctx, msg)
	if err != nil && c.stdin.written.Load() == before {
		p.refused()
	}
	return err
}

// probeRoundTripper is the HTTP transport under the SDK's streamable client. For a POST
// carrying the tools/call request of a probed invocation it records the attempt and
// whether it provably delivered nothing; the progress notifications of every event
// stream it returns are delivered as they are read ([progressTee]).
type probeRoundTripper struct {
	base     http.RoundTripper
	progress *progressRoutes
}

// RoundTrip implements http.RoundTripper.
func (rt probeRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := rt.roundTrip(req)
	if err == nil {
		teeProgress(resp, rt.progress)
	}
	return resp, err
}

func (rt probeRoundTripper) roundTrip(req *http.Request) (*http.Response, error) {
	p := probeFrom(req.Context())
	if p == nil || req.Method != http.MethodPost || !carriesToolCall(req) {
		return rt.base.RoundTrip(req)
	}
	p.begin()
	resp, err := rt.base.RoundTrip(req)
	switch {
	case err != nil:
		if neverSent(err) {
			p.refused()
		}
	case resp.StatusCode == http.StatusNotFound && req.Header.Get(sessionIDHeader) != "":
		// The MCP transport requires a server that does not know the session to answer
		// 404 instead of processing the request.
		p.refused()
	}
	return resp, err
}

// carriesToolCall reports whether the body of req is a tools/call request. A body that
// cannot be re-read is assumed to be one, which can only make a failure look dispatched.
func carriesToolCall(req *http.Request) bool {
	if req.GetBody == nil {
		return true
	}
	body, err := req.GetBody()
	if err != nil {
		return true
	}
	defer body.Close()
	data, err := io.ReadAll(body)
	if err != nil {
		return true
	}
	msg, err := jsonrpc.DecodeMessage(bytes.TrimSpace(data))
	if err != nil {
		return true
	}
	return isToolCall(msg)
}

// neverSent reports whether a RoundTrip error proves that no byte of the request left
// this process: the connection could not be dialled or its host not resolved. net/http
// retries a POST on another connection only when nothing was written on the first, so a
// dial error returned at the end also means no earlier attempt sent anything.
func neverSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
