package mcpbridge

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProgressFunc receives the progress a server reports for one tools/call (MCP's
// notifications/progress): progress so far, total when known (0: unknown), a message.
type ProgressFunc func(progress, total float64, message string)

type progressKey struct{}

// WithProgress returns ctx carrying f: [Bridge.Invoke] then sends a progressToken in the
// request _meta and hands every notifications/progress the server sends for that token to
// f, until the call returns. Without it no token is sent, and a server sends no progress.
// f must not block: it runs on the reader of the server's connection or event stream (see
// [progressConn], [progressTee]).
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

func progressFrom(ctx context.Context) ProgressFunc {
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}

// progressRoutes maps the progress tokens of the calls in flight to their receivers. A
// token is unique per dispatch (operation id and a counter), so a retry on a new session
// never receives what the old one reported late.
type progressRoutes struct {
	next atomic.Uint64
	m    sync.Map // token string → ProgressFunc
}

// open registers f under a new token for operationID and returns the token and the
// function that removes it.
func (r *progressRoutes) open(operationID string, f ProgressFunc) (string, func()) {
	token := operationID + "#" + strconv.FormatUint(r.next.Add(1), 10)
	r.m.Store(token, f)
	return token, func() { r.m.Delete(token) }
}

// deliverParams forwards a notification to the receiver of its token; one for a token no
// call holds (the call returned, or the server made it up) is dropped.
func (r *progressRoutes) deliverParams(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	if f, ok := r.m.Load(token); ok {
		f.(ProgressFunc)(p.Progress, p.Total, p.Message)
	}
}

// progressConn hands a stdio server's notifications/progress to their calls from the
// connection's reader, before the next message is read. The SDK queues notifications for
// a handler goroutine but hands a response straight to the call waiting for it, so the
// last report a server writes before its response could reach the route after the call
// returned and closed it, and be dropped; read in wire order, every report written before
// the response arrives first. (The SDK's streamable HTTP connection cannot be wrapped so —
// it depends on an unexported method — and there [progressTee] reads the event stream
// under it to the same effect.)
type progressConn struct {
	mcp.Connection
	routes *progressRoutes
}

// Read implements mcp.Connection: progress notifications are delivered here and not
// passed on; everything else is.
func (c progressConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			return msg, err
		}
		if !c.routes.deliverMessage(msg) {
			return msg, nil
		}
	}
}

// deliverMessage delivers msg when it is a notifications/progress and reports whether it
// was one (delivered or, for a token no call holds, dropped).
func (r *progressRoutes) deliverMessage(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.ID.IsValid() || req.Method != "notifications/progress" {
		return false
	}
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(req.Params, &p) == nil {
		r.deliverParams(&p)
	}
	return true
}
