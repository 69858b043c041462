package mcpserve

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Transports, as the batch metadata and the audit name them.
const (
	TransportHTTP  = "streamable-http"
	TransportStdio = "stdio"
)

// Codes of the door's own refusals: the start of an isError result's text, or the
// message of a JSON-RPC error.
const (
	// CodeSessionFlooded: MaxQueuedCalls calls of the session are running or waiting.
	CodeSessionFlooded = "session_flooded"
	// CodeInvalidArguments: the arguments are not valid against the tool's input schema.
	CodeInvalidArguments = "invalid_arguments"
	// CodeArgumentsTooLarge: the arguments have more than MaxArgumentBytes bytes.
	CodeArgumentsTooLarge = "arguments_too_large"
	// CodeRejected: the batcher refused the call's batch.
	CodeRejected = "rejected"
	// CodeStopped: the door stopped while the call waited; the call itself goes on.
	CodeStopped = "stopped"
	// CodeUnavailable: awaken could not be reached to submit or follow the call.
	CodeUnavailable = "unavailable"
)

// DefaultProgressEvery is how often a parked call repeats its progress notification.
const DefaultProgressEvery = 15 * time.Second

// ErrOptions is wrapped by every refusal of [New].
var ErrOptions = errors.New("mcpserve: invalid options")

// CatalogFunc returns awaken's tool catalog (the api's Catalog, or pkg/client's Tools).
type CatalogFunc func(ctx context.Context) ([]contracts.CatalogTool, error)

// Options configures a [Server].
type Options struct {
	// Client submits the batches, waits for results and tickets and cancels runs. It must
	// keep resource links as published (client.KeepLinks), so that an output stored by
	// reference reaches the MCP client as a link rather than inline.
	Client *client.Client
	// Catalog lists the tools.
	Catalog CatalogFunc
	// Config is the host configuration's mcp_serve section (validated and defaulted).
	Config config.MCPServe
	// Log is the door's logger.
	Log zerolog.Logger
	// APIBase is the base URL of the HTTP api ("" when unknown), named in the error that
	// says where to fetch a result the door could not hand over.
	APIBase string
	// ProgressEvery is how often a parked call repeats its progress notification
	// (default [DefaultProgressEvery]).
	ProgressEvery time.Duration
	// Version is the version the server announces in initialize.
	Version string
	// AuditKey signs the audit records of the Streamable HTTP door, the api's, on the
	// audit stream (the host's audit.signing_key_file; nil: hash-chained but unsigned).
	// The stdio door's records are its runner's claims: it stores them on the claims
	// stream, unsigned, whatever the key.
	AuditKey ed25519.PrivateKey
}

// Server is awaken's MCP door. It is safe for concurrent use.
type Server struct {
	opts Options
	// names are the deployment's unpartitioned names (the door's audit subject is
	// partition 0's, its events subject no partition's).
	names contracts.Names
	js    jetstream.JetStream
	// trail appends the Streamable HTTP door's audit records to the chain of the MCP
	// audit subject.
	trail *auditlog.Appender
	// stopped ends every waiting call (Stop); the calls themselves go on in awaken.
	stopped context.Context
	stop    context.CancelFunc

	// servers are the MCP servers of the sessions (one each), so Stop can close their
	// sessions: a client's open SSE stream would otherwise hold the HTTP server's
	// shutdown until its deadline.
	mu      sync.Mutex
	servers map[*mcp.Server]*session
	// sessions are the sessions by id, once a call named it (a DELETE ends its calls).
	sessions sync.Map
	// posts are the HTTP requests in flight other than the SSE GETs: Stop waits for them
	// (each answers at once once stopped) before it closes the sessions, so no answer is
	// cut off.
	// posts counts them under mu; once stopping is set none is added, so Wait never
	// races an Add from zero.
	posts    sync.WaitGroup
	stopping bool

	// cancels counts the notifications/cancelled of each session (cancel.go).
	cancels sync.Map
	// callRequests are the HTTP requests carrying a tools/call, by the door's mark
	// (cancel.go); requestSeq numbers the marks.
	callRequests sync.Map
	requestSeq   atomic.Uint64

	// httpSessions are the open Streamable HTTP sessions and their owners (owners.go).
	httpSessions httpSessions
	// bare answers the SDK's question of which protocol versions a request of an open
	// session (or one that opens none) may name: only a new session needs its own server.
	bare *mcp.Server
}

// stopDrain bounds how long Stop waits for the answers of the calls it stopped.
const stopDrain = 10 * time.Second

// stopGrace is how long Stop lets the answers it caused reach the clients before it
// closes their sessions.
const stopGrace = 250 * time.Millisecond

// New returns a door on opts.
func New(opts Options) (*Server, error) {
	if opts.Client == nil || opts.Catalog == nil {
		return nil, fmt.Errorf("%w: a client and a catalog are required", ErrOptions)
	}
	if opts.Config.MaxQueuedCalls < 1 || opts.Config.MaxArgumentBytes < 2 || opts.Config.MaxSessionsPerActor < 1 || opts.Config.MaxSessions < 1 {
		return nil, fmt.Errorf("%w: mcp_serve bounds are not set (load the configuration through config.Parse)", ErrOptions)
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = DefaultProgressEvery
	}
	if opts.Version == "" {
		opts.Version = "0.1.0"
	}
	js, err := jetstream.New(opts.Client.Conn())
	if err != nil {
		return nil, fmt.Errorf("mcpserve: %w", err)
	}
	stopped, stop := context.WithCancel(context.Background())
	// The MCP door's records and the events it follows are not a partition's: the audit
	// subject of its calls is partition 0's audit stream's, the events stream is one.
	names := contracts.NewNames(opts.Client.Prefix())
	trail := auditlog.New(js, names.AuditStream(), auditlog.SubjectPrefix(names), opts.AuditKey)
	s := &Server{opts: opts, names: names, js: js, trail: trail, stopped: stopped, stop: stop, servers: map[*mcp.Server]*session{},
		httpSessions: httpSessions{owner: map[string]string{}, perActor: map[string]int{}}}
	s.bare = mcp.NewServer(s.implementation(), s.serverOptions())
	return s, nil
}

// Stop ends every call that is waiting for its result: each gets an isError result with
// code stopped that names its batch and where to read its result. The calls go on in
// awaken (a parked one stays parked). Later calls are refused the same way. It is safe to
// call more than once.
func (s *Server) Stop() {
	s.stop()
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	drained := make(chan struct{})
	go func() {
		s.posts.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(stopDrain):
		s.opts.Log.Warn().Msg("mcp: stopping without waiting further for calls in flight")
	}
	// The answers just written are on their way: give the clients a moment to read them
	// before their sessions' streams end (a client may fail its pending calls when its
	// stream ends first).
	time.Sleep(stopGrace)
	s.mu.Lock()
	servers := make([]*mcp.Server, 0, len(s.servers))
	for srv := range s.servers {
		servers = append(servers, srv)
	}
	s.mu.Unlock()
	for _, srv := range servers {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	}
}

// track remembers srv for Stop, forgetting the servers whose sessions have ended (a
// server has no session for a moment after it is created, until the transport connects).
func (s *Server) track(srv *mcp.Server, sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for old, oldSess := range s.servers {
		if time.Since(oldSess.created) < time.Minute {
			continue
		}
		open := false
		for range old.Sessions() {
			open = true
			break
		}
		if !open {
			delete(s.servers, old)
			oldSess.end()
			if id := oldSess.boundID(); id != "" {
				s.sessions.Delete(id)
				s.forgetCancels(id)
			}
		}
	}
	s.servers[srv] = sess
}

// HTTPHandler serves Streamable HTTP. actorOf returns the authenticated actor of a
// request (the caller authenticates it first); an agent_tools query parameter of the
// session's first request (a comma-separated list of tool ids) narrows the session's
// tools further. A session is served only to the actor that opened it (any other is
// answered 404, as for an unknown session), and a new session past
// mcp_serve.max_sessions_per_actor or max_sessions is refused 429 too_many_sessions.
func (s *Server) HTTPHandler(actorOf func(*http.Request) string) http.Handler {
	h := s.streamableHandler(actorOf)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			s.mu.Lock()
			stopping := s.stopping
			if !stopping {
				s.posts.Add(1)
			}
			s.mu.Unlock()
			if stopping {
				http.Error(w, "awaken's MCP server is stopping; reconnect in a moment", http.StatusServiceUnavailable)
				return
			}
			defer s.posts.Done()
		}
		actor := actorOf(r)
		body := peekBody(r, s.maxBody())
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			if !s.owns(id, actor) {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		} else if refuseDiscover(w, body) {
			return
		} else if r.Method == http.MethodPost && opensSession(body) {
			o, err := s.reserve(actor)
			if err != nil {
				s.opts.Log.Warn().Err(err).Str("actor", actor).Msg("mcp session refused")
				refuseSession(w, err)
				return
			}
			defer s.opened(o)
			r = r.WithContext(context.WithValue(r.Context(), openingKey{}, o))
		}
		s.watchCancels(r, body)
		defer s.markCallRequest(r, body)()
		if id := r.Header.Get("Mcp-Session-Id"); r.Method == http.MethodDelete && id != "" {
			s.endSession(id)
			defer s.forgetCancels(id)
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) streamableHandler(actorOf func(*http.Request) string) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		o := openingOf(r.Context())
		if o == nil {
			return s.bare
		}
		if o.srv != nil {
			return o.srv // the SDK asks twice for the server of a new session
		}
		var agentTools []string
		if q := r.URL.Query(); q.Has("agent_tools") {
			agentTools = []string{}
			for _, id := range strings.Split(q.Get("agent_tools"), ",") {
				if id = strings.TrimSpace(id); id != "" {
					agentTools = append(agentTools, id)
				}
			}
		}
		srv, err := s.newSession(r.Context(), o.actor, TransportHTTP, agentTools, "", func() string { return s.newSessionID(o) })
		if err != nil {
			s.opts.Log.Error().Err(err).Msg("mcp session refused: the catalog could not be read")
			return nil // the handler answers 400
		}
		o.srv = srv
		return srv
	}, &mcp.StreamableHTTPOptions{
		// The api checks the Host itself (DNS rebinding) and authenticates every request.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        s.maxBody(),
		SessionTimeout:             time.Hour,
	})
}

// maxBody bounds the body of an MCP request over HTTP: the arguments and room for the rest.
func (s *Server) maxBody() int64 { return int64(s.opts.Config.MaxArgumentBytes) + 64<<10 }

// ServeStdio serves one session over t (an *mcp.StdioTransport for `awaken mcp-serve`)
// until the client closes it or ctx ends. actor is recorded as who asked (claimed: no
// door authenticated it); agentTools, when not nil, narrows the tools.
func (s *Server) ServeStdio(ctx context.Context, t mcp.Transport, actor string, agentTools []string) error {
	var id [16]byte
	_, _ = rand.Read(id[:])
	sessionID := "stdio-" + hex.EncodeToString(id[:])
	srv, err := s.newSession(ctx, actor, TransportStdio, agentTools, sessionID, nil)
	if err != nil {
		return err
	}
	defer s.forgetCancels(sessionID)
	defer s.endSession(sessionID)
	ss, err := srv.Connect(ctx, cancelWatchingTransport{t, s, sessionID}, nil)
	if err != nil {
		return fmt.Errorf("mcpserve: connect: %w", err)
	}
	// A session's Close waits for its calls in flight: Stop answers the waiting ones
	// first (stopped), then closes the session.
	defer context.AfterFunc(ctx, s.Stop)()
	return ss.Wait()
}

// tool is one tool a session offers, with its compiled input schema.
type tool struct {
	catalog contracts.CatalogTool
	schema  *jsonschema.Schema
}

// newSession builds the MCP server of one session: the tools its actor (and agentTools)
// may use, each turning a call into a batch of the session's run. sessionID names an HTTP
// session (nil for stdio: fixedID).
func (s *Server) newSession(ctx context.Context, actor, transport string, agentTools []string, fixedID string, sessionID func() string) (*mcp.Server, error) {
	cat, err := s.opts.Catalog(ctx)
	if err != nil {
		return nil, fmt.Errorf("mcpserve: catalog: %w", err)
	}
	cat = contracts.NarrowCatalog(cat, s.opts.Config.ToolsFor(actor))
	cat = contracts.NarrowCatalog(cat, agentTools)
	sess := &session{srv: s, actor: actor, transport: transport, fixedID: fixedID, generation: 1, created: time.Now()}
	sess.ended, sess.end = context.WithCancel(context.Background())
	opts := s.serverOptions()
	opts.GetSessionID = sessionID
	srv := mcp.NewServer(s.implementation(), opts)
	for _, ct := range cat {
		if ct.Paused {
			continue // as the mcp catalog format: a paused tool's calls are all blocked
		}
		if ct.Kind == contracts.KindClientExecuted {
			// Its call waits for the platform that submitted it to execute it and resume
			// the ticket: an MCP client has no way to, so the call would wait for ever.
			continue
		}
		schema, err := jsonschema.Compile(ct.Parameters)
		if err != nil || !objectSchema(ct.Parameters) {
			s.opts.Log.Warn().Err(err).Str("tool_id", ct.ID).Msg("mcp: tool left out: its parameters are not an object schema")
			continue
		}
		t := &tool{catalog: ct, schema: schema}
		sess.tools = append(sess.tools, ct.ID)
		mt := &mcp.Tool{Name: ct.ID, Description: ct.Description, InputSchema: json.RawMessage(ct.Parameters)}
		if a := ct.Annotations; a != nil {
			// The hints as the tool's MCP server listed them (awaken steers by them only for
			// a server with trust_annotations; a client should treat them as hints).
			mt.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: a.ReadOnly(), DestructiveHint: a.DestructiveHint,
				IdempotentHint: a.Idempotent(), OpenWorldHint: a.OpenWorldHint}
		}
		srv.AddTool(mt, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return sess.call(ctx, req, t)
		})
	}
	s.track(srv, sess)
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "awaken object", URITemplate: contracts.ObjectURIPrefix + "{+name}",
		Description: "an output awaken stored by reference (too large to carry inline)"}, s.readObject)
	return srv, nil
}

func (s *Server) implementation() *mcp.Implementation {
	return &mcp.Implementation{Name: "awaken", Version: s.opts.Version}
}

// serverOptions are the options of every session's server.
func (s *Server) serverOptions() *mcp.ServerOptions {
	return &mcp.ServerOptions{HasTools: true, HasResources: true,
		Instructions: "Every tool call goes through awaken: policy, human approval, exactly-once execution and an audit. " +
			"A call waiting for approval reports progress (send a progressToken) and answers once a person decides."}
}

// objectSchema reports whether a JSON Schema document is an object schema (the MCP
// specification requires inputSchema's type to be "object").
func objectSchema(raw json.RawMessage) bool {
	var m map[string]any
	return json.Unmarshal(raw, &m) == nil && m["type"] == "object"
}

// fetchHint says how to read a call's result later.
func (s *Server) fetchHint(batchID string) string {
	route := "GET /v1/batches/" + batchID + "/results"
	if s.opts.APIBase != "" {
		route = "GET " + strings.TrimSuffix(s.opts.APIBase, "/") + "/v1/batches/" + batchID + "/results"
	}
	return "Its result, once published: " + route + " (or `awaken batch show " + batchID + "`)."
}

// audit publishes the MCP call's audit record under an id of the call, so a retried
// publish is deduplicated. The Streamable HTTP door is the api's: its record joins the
// signed audit trail. The stdio door runs with its runner's credentials (a platform's,
// which may not write the audit stream, where only services write) and its record says
// what that runner claims: it goes to the claims stream, where no chain or signature is
// claimed, so the trail stays whole and every record of it signed.
func (s *Server) audit(ctx context.Context, rec contracts.MCPCallAudit) error {
	ev, err := cloudevent.NewEvent("mcp:"+rec.BatchID+":"+rec.CallID+":audit", "awaken/mcp", contracts.TypeMCPCallAudit, rec)
	if err != nil {
		return err
	}
	names := s.names
	if rec.Transport == TransportStdio {
		_, err = s.js.PublishMsg(ctx, cloudevent.EncodeMsg(names.MCPCallClaimSubject(), ev))
	} else {
		_, err = s.trail.Append(ctx, cloudevent.EncodeMsg(names.MCPCallAuditSubject(), ev))
	}
	if err != nil {
		return fmt.Errorf("mcpserve: audit: %w", err)
	}
	return nil
}

// reportParked sends a progress notification while the call waits on a ticket: when it
// opens and every ProgressEvery while it stays open, naming the ticket and its deadline.
func (ss *session) reportParked(ctx context.Context, progress *progressSender, runID string, step int64, callID string) {
	s := ss.srv
	ticket, err := s.opts.Client.WaitTicket(ctx, runID, step, callID)
	if err != nil {
		return // the call ended, or never parked
	}
	msg := fmt.Sprintf("waiting for %s: ticket %s", ticket.Reason, ticket.CorrelationID)
	switch {
	case ticket.Deadline != nil:
		msg += ", deadline " + ticket.Deadline.UTC().Format(time.RFC3339)
	case ticket.DueAt != nil:
		msg += ", due " + ticket.DueAt.UTC().Format(time.RFC3339)
	default:
		msg += ", no deadline"
	}
	every := time.NewTicker(s.opts.ProgressEvery)
	defer every.Stop()
	for {
		progress.parked(ctx, msg)
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		}
		// Resolved: the call runs (or ran) and its result follows; say nothing more.
		if _, err := s.opts.Client.Ticket(ctx, ticket.CorrelationID); errors.Is(err, client.ErrNoTicket) {
			return
		}
	}
}

// readObject serves resources/read of awaken://objects/{name}.
func (s *Server) readObject(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	name, ok := strings.CutPrefix(uri, contracts.ObjectURIPrefix)
	if !ok || name == "" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	data, info, err := s.opts.Client.Object(ctx, name)
	if errors.Is(err, client.ErrObjectNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		return nil, fmt.Errorf("mcpserve: read %s: %w", uri, err)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{contents(uri, info.MimeType, data)}}, nil
}

// truncate bounds a client-declared name for the metadata.
func truncate(v string) string {
	v = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, v)
	if len(v) > 128 {
		v = strings.ToValidUTF8(v[:128], "")
	}
	return v
}
