package mcpserve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Streamable HTTP sessions of the door: each belongs to the authenticated actor that
// opened it, and their number is bounded per actor and in total.
//
// A session id is no secret: every batch of the session carries it in its metadata,
// readable by any viewer. A request that names a session is therefore served only under
// the actor that opened it; under any other it is answered as an unknown session would
// be (404), so it neither runs a call in the session, nor cancels or ends one of its
// calls, nor reads its stream, nor learns that the session exists.

// CodeTooManySessions starts the refusal of a new session past mcp_serve's bounds.
const CodeTooManySessions = "too_many_sessions"

// ErrTooManySessions is wrapped by the refusal of a new session past
// mcp_serve.max_sessions_per_actor or mcp_serve.max_sessions.
var ErrTooManySessions = errors.New(CodeTooManySessions)

// httpSessions are the open HTTP sessions by id, with their owners.
type httpSessions struct {
	mu       sync.Mutex
	owner    map[string]string // session id -> the actor that opened it
	perActor map[string]int    // open and opening sessions per actor
	total    int
}

// opening is a new session's request, from before the SDK creates the session until it
// answered: the actor holds a place among the sessions, and the session's server and id
// are filled in as the SDK builds them.
type opening struct {
	actor string
	srv   *mcp.Server
	id    string
}

type openingKey struct{}

func openingOf(ctx context.Context) *opening {
	o, _ := ctx.Value(openingKey{}).(*opening)
	return o
}

// reserve takes a place for a new session of actor, or refuses it past the bounds.
func (s *Server) reserve(actor string) (*opening, error) {
	hs := &s.httpSessions
	hs.mu.Lock()
	defer hs.mu.Unlock()
	perActor, total := s.opts.Config.MaxSessionsPerActor, s.opts.Config.MaxSessions
	switch {
	case hs.perActor[actor] >= perActor:
		return nil, fmt.Errorf("%w: %d MCP sessions of %q are open (at most %d): end one (DELETE /mcp with its Mcp-Session-Id) or reuse it",
			ErrTooManySessions, hs.perActor[actor], actor, perActor)
	case hs.total >= total:
		return nil, fmt.Errorf("%w: %d MCP sessions are open on this server (at most %d); try again once some have ended",
			ErrTooManySessions, hs.total, total)
	}
	hs.perActor[actor]++
	hs.total++
	return &opening{actor: actor}, nil
}

// newSessionID is the SDK's GetSessionID for the session o opens: a random id, bound to
// o's actor before the SDK stores the session, so no request of another actor can name it
// in between.
func (s *Server) newSessionID(o *opening) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	hs := &s.httpSessions
	hs.mu.Lock()
	hs.owner[id] = o.actor
	hs.mu.Unlock()
	o.id = id
	return id
}

// opened settles o once the SDK answered its request: a session that is open keeps its
// place until it ends; a request that opened none (refused, or initialize failed) gives
// it back at once.
func (s *Server) opened(o *opening) {
	var live *mcp.ServerSession
	if o.srv != nil && o.id != "" {
		for ss := range o.srv.Sessions() {
			if ss.ID() == o.id {
				live = ss
			}
		}
	}
	if live == nil {
		s.closed(o)
		return
	}
	go func() {
		_ = live.Wait()
		s.closed(o)
	}()
}

// closed gives back o's place and forgets its session's owner.
func (s *Server) closed(o *opening) {
	hs := &s.httpSessions
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if o.id != "" {
		delete(hs.owner, o.id)
	}
	if hs.perActor[o.actor]--; hs.perActor[o.actor] <= 0 {
		delete(hs.perActor, o.actor)
	}
	hs.total--
}

// refuseSession answers a new session's request refused by err: 429, with the reason as
// a JSON-RPC error (id null: the request is not read), which clients that read the body of
// an HTTP error show.
func refuseSession(w http.ResponseWriter, err error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": codeServerRefused, "message": err.Error()}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(body)
}

// codeServerRefused is the JSON-RPC error code (implementation-defined server error range)
// of a refused session.
const codeServerRefused = -32000

// opensSession reports whether an HTTP body without a session id may open a session: any
// but a single message other than initialize (the SDK closes the session of such a
// request once it is answered, so it holds no place: a client's server/discover before its
// initialize is not counted against it).
func opensSession(body []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	if json.Unmarshal(body, &m) == nil && m.Method != "" {
		return m.Method == "initialize"
	}
	return true
}

// sessionlessVersion is the first MCP protocol version without sessions (SEP-2575).
const sessionlessVersion = "2026-07-28"

// SessionVersions are the MCP protocol versions the door speaks over Streamable HTTP: those
// of the pinned SDK that have sessions. A session is a run, its calls the run's steps in
// order, and it belongs to the token that opened it; the sessionless version has none of
// that over HTTP, so it is spoken over stdio only (where the connection is the session).
func SessionVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool { return v >= sessionlessVersion })
}

// refuseDiscover answers a server/discover over HTTP, which probes for the sessionless
// version, as a server of the versions with sessions answers it: method not found
// (-32601), the versions it speaks named in the message. Every client then initializes a
// session (the SEP-2575 fallback on a non-modern error). An unsupported-protocol-version
// error (-32022) listing the session versions would not do: mcp-go v1.6 takes it for a
// server of the sessionless version and gives up when none of those is that version, as
// it does on the SDK's own answer, a result listing them.
func refuseDiscover(w http.ResponseWriter, body []byte) bool {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "server/discover" || len(m.ID) == 0 {
		return false
	}
	resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
		"code": jsonrpc.CodeMethodNotFound,
		"message": fmt.Sprintf("server/discover is not served over HTTP: this server speaks MCP with sessions (%s); initialize a session",
			strings.Join(SessionVersions(), ", "))}})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(resp)
	return true
}

// owns reports whether session id is open and was opened by actor.
func (s *Server) owns(id, actor string) bool {
	hs := &s.httpSessions
	hs.mu.Lock()
	defer hs.mu.Unlock()
	owner, ok := hs.owner[id]
	return ok && owner == actor
}

// OpenSessions is the number of open Streamable HTTP sessions of actor ("" for all).
func (s *Server) OpenSessions(actor string) int {
	hs := &s.httpSessions
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if actor == "" {
		return hs.total
	}
	return hs.perActor[actor]
}
