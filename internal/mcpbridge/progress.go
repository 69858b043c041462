package mcpbridge

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProgressFunc receives the progress a server reports for one tools/call (MCP's
// notifications/progress): progress so far, total when known (0: unknown), a message.
type ProgressFunc func(progress, total float64, message string)

type progressKey struct{}

// WithProgress returns ctx carrying f: [Bridge.Invoke] then sends a progressToken in the
// request _meta and hands every notifications/progress the server sends for that token to
// f, until the call returns. Without it no token is sent, and a server sends no progress.
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

// deliver is the client's notifications/progress handler: it forwards a notification to
// the receiver of its token; one for a token no call holds (the call returned, or the
// server made it up) is dropped.
func (r *progressRoutes) deliver(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req == nil || req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if f, ok := r.m.Load(token); ok {
		f.(ProgressFunc)(req.Params.Progress, req.Params.Total, req.Params.Message)
	}
}
