package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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

// A client that gives up on a call over HTTP may send no cancellation: it only drops the
// request whose response stream would carry the answer (mcp-go does). The SDK does not end
// the call's handler then, so the call would go on waiting for an answer no one reads,
// holding its session's turn. The door marks each HTTP request that carries a tools/call
// with a header of its own, so the call's handler can find its request, and ends the
// call's context with errStreamGone when the request goes away before it is answered: a
// cancel of that call, as a notifications/cancelled is.

// errStreamGone is the cause that ends a call whose HTTP request went away unanswered.
var errStreamGone = errors.New("mcpserve: the client's HTTP request of the call went away")

// doorRequestHeader carries the door's mark of a request that holds a tools/call (any
// value a client sends is removed).
const doorRequestHeader = "X-Awaken-Mcp-Door-Request"

// goneKeep is how long the mark of a request that went away waits for its call's handler
// to take it (the handler may not have started yet), before it is dropped.
const goneKeep = time.Minute

// callRequest is one HTTP request that carries a tools/call.
type callRequest struct {
	mu     sync.Mutex
	gone   bool
	cancel context.CancelCauseFunc
}

func (c *callRequest) goneAway() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	if c.cancel != nil {
		c.cancel(errStreamGone)
	}
}

// carriesCall reports whether an HTTP body holds a tools/call.
func carriesCall(body []byte) bool {
	return bytes.Contains(body, []byte(`"tools/call"`))
}

// markCallRequest marks r when it carries a tools/call and returns what to do once the
// SDK answered it.
func (s *Server) markCallRequest(r *http.Request, body []byte) (answered func()) {
	r.Header.Del(doorRequestHeader)
	if !carriesCall(body) {
		return func() {}
	}
	mark := strconv.FormatUint(s.requestSeq.Add(1), 36)
	r.Header.Set(doorRequestHeader, mark)
	cr := &callRequest{}
	s.callRequests.Store(mark, cr)
	stop := context.AfterFunc(r.Context(), cr.goneAway)
	return func() {
		if stop() {
			s.callRequests.Delete(mark) // answered: the request is still there
			return
		}
		time.AfterFunc(goneKeep, func() { s.callRequests.Delete(mark) })
	}
}

// attachRequest lets the HTTP request req came in end the call's context (cancel) when it
// goes away unanswered, and returns how to detach.
func (s *Server) attachRequest(req *mcp.CallToolRequest, cancel context.CancelCauseFunc) (detach func()) {
	if req.Extra == nil || req.Extra.Header == nil {
		return func() {}
	}
	mark := req.Extra.Header.Get(doorRequestHeader)
	v, ok := s.callRequests.Load(mark)
	if mark == "" || !ok {
		return func() {}
	}
	cr := v.(*callRequest)
	cr.mu.Lock()
	cr.cancel = cancel
	if cr.gone {
		cancel(errStreamGone)
	}
	cr.mu.Unlock()
	return func() {
		cr.mu.Lock()
		cr.cancel = nil
		cr.mu.Unlock()
	}
}
