package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notificationCancelled is the method of the client's cancellation of a request.
const notificationCancelled = "notifications/cancelled"

// A client's notifications/cancelled reaches a tool handler only as the end of its
// context, and the SDK also ends it with context.Canceled when the session's connection
// goes away. The door tells the two apart by counting, per session, the cancellations the
// client sent (seen on the wire before the SDK reads them): only a call whose context ended
// after one of its session's cancellations arrived cancels its run.

// sawCancel counts a notifications/cancelled of session sessionID.
func (s *Server) sawCancel(sessionID string, n int) {
	if n == 0 {
		return
	}
	v, _ := s.cancels.LoadOrStore(sessionID, new(atomic.Int64))
	v.(*atomic.Int64).Add(int64(n))
}

// cancelsOf is how many notifications/cancelled session sessionID sent so far.
func (s *Server) cancelsOf(sessionID string) int64 {
	if v, ok := s.cancels.Load(sessionID); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// forgetCancels drops the count of a session that ended.
func (s *Server) forgetCancels(sessionID string) { s.cancels.Delete(sessionID) }

// countCancels returns the notifications/cancelled among the JSON-RPC messages of an
// HTTP body (one message, or a batch).
func countCancels(body []byte) int {
	body = bytes.TrimSpace(body)
	if !bytes.Contains(body, []byte(notificationCancelled)) {
		return 0
	}
	raws := []json.RawMessage{body}
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &raws) != nil {
			return 0
		}
	}
	n := 0
	for _, raw := range raws {
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Method == notificationCancelled {
			n++
		}
	}
	return n
}

// watchCancels counts the cancellations in a POST body of a session before the SDK
// reads it.
func (s *Server) watchCancels(r *http.Request, body []byte) {
	if sessionID := r.Header.Get("Mcp-Session-Id"); sessionID != "" {
		s.sawCancel(sessionID, countCancels(body))
	}
}

// peekBody returns the body of a POST (nil for another method, or a body over limit)
// and leaves it whole for the SDK to read.
func peekBody(r *http.Request, limit int64) []byte {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(data), r.Body), r.Body}
	if err != nil || int64(len(data)) > limit {
		return nil
	}
	return data
}

// cancelWatchingTransport counts the cancellations a stdio client sends.
type cancelWatchingTransport struct {
	mcp.Transport
	srv       *Server
	sessionID string
}

func (t cancelWatchingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return cancelWatchingConn{c, t.srv, t.sessionID}, nil
}

type cancelWatchingConn struct {
	mcp.Connection
	srv       *Server
	sessionID string
}

func (c cancelWatchingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && err == nil && req.Method == notificationCancelled {
		c.srv.sawCancel(c.sessionID, 1)
	}
	return m, err
}
