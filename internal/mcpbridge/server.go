package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// clientInfo names awaken to MCP servers.
var clientInfo = mcp.Implementation{Name: "awaken", Version: "1"}

// server is one configured MCP server: its current session (at most one) and the tools of
// its last successful listing.
type server struct {
	b    *Bridge
	cfg  config.MCPServer
	log  zerolog.Logger
	http *http.Transport // connection pool of an HTTP server; nil for stdio

	// dial holds one token while a connection attempt runs, so concurrent callers of a
	// server that is down wait for one attempt instead of starting one each.
	dial chan struct{}

	mu      sync.Mutex
	closed  bool
	cur     *session
	tools   []contracts.ToolDescriptor    // sorted by id
	names   map[string]*jsonschema.Schema // tool names on the server → compiled input schema, of tools
	lastErr error
}

// session is one MCP client session. dead is closed once the session must not be used
// any more (its connection ended, or it was discarded as broken).
type session struct {
	cs       *mcp.ClientSession
	dead     chan struct{}
	deadOnce sync.Once
}

func (s *session) markDead() { s.deadOnce.Do(func() { close(s.dead) }) }

func (s *session) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

func newServer(b *Bridge, cfg config.MCPServer) *server {
	s := &server{
		b:    b,
		cfg:  cfg,
		log:  b.log.With().Str("server", cfg.Name).Logger(),
		dial: make(chan struct{}, 1),
	}
	if cfg.URL != "" {
		s.http = newHTTPTransport()
	}
	return s
}

// newHTTPTransport returns a private connection pool with the default transport's
// settings, so closing the bridge can drop its idle connections.
func newHTTPTransport() *http.Transport {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return t.Clone()
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// transportKind is "stdio" or "http".
func (s *server) transportKind() string {
	if s.cfg.URL != "" && s.cfg.Command == "" {
		return "http"
	}
	return "stdio"
}

// transport returns a fresh SDK transport for one connection.
func (s *server) transport() (mcp.Transport, error) {
	switch {
	case s.cfg.Command != "" && s.cfg.URL == "":
		return &commandTransport{
			server: s.cfg.Name, command: s.cfg.Command, args: s.cfg.Args,
			grace: s.b.opts.terminateGrace, log: s.log, progress: &s.b.progress,
		}, nil
	case s.cfg.URL != "" && s.cfg.Command == "":
		return &mcp.StreamableClientTransport{
			Endpoint:   s.cfg.URL,
			HTTPClient: &http.Client{Transport: probeRoundTripper{base: s.http, progress: &s.b.progress}},
		}, nil
	default:
		return nil, errNoTransport
	}
}

// live returns the current session if it is usable.
func (s *server) live() *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.isDead() {
		return nil
	}
	return s.cur
}

// session returns a usable session, connecting if there is none. fresh reports that the
// session was established during this call (by it or by a concurrent caller it waited
// for), so a failure on it is not worth a reconnection.
func (s *server) session(ctx context.Context) (sess *session, fresh bool, err error) {
	if sess := s.live(); sess != nil {
		return sess, false, nil
	}
	select {
	case s.dial <- struct{}{}:
	case <-ctx.Done():
		return nil, false, context.Cause(ctx)
	case <-s.b.life.Done():
		return nil, false, ErrClosed
	}
	defer func() { <-s.dial }()
	if sess := s.live(); sess != nil {
		return sess, true, nil
	}
	sess, err = s.connect(ctx)
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	return sess, true, nil
}

// connect establishes a session (start or dial, initialise, list tools) bounded by ctx,
// the connect timeout and the bridge's life, and installs it.
func (s *server) connect(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.b.opts.connectTimeout, errors.New("connect timeout"))
	defer cancel()
	stop := context.AfterFunc(s.b.life, cancel)
	defer stop()

	t, err := s.transport()
	if err != nil {
		return nil, err
	}
	// No ProgressNotificationHandler: progress is delivered in wire order by the
	// transports (progressConn over stdio, progressTee over HTTP), which the SDK's
	// handler goroutine cannot promise.
	client := mcp.NewClient(&clientInfo, &mcp.ClientOptions{ToolListChangedHandler: s.onToolListChanged})
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", withCause(ctx, err))
	}
	sess := &session{cs: cs, dead: make(chan struct{})}
	tools, names, err := s.listTools(ctx, cs)
	if err != nil {
		sess.markDead()
		cs.Close()
		return nil, fmt.Errorf("list tools: %w", withCause(ctx, err))
	}
	watching := s.b.spawn(func() {
		err := cs.Wait()
		sess.markDead()
		if s.forget(sess) {
			s.log.Info().AnErr("cause", err).Msg("mcp session ended; the server is reconnected on next use")
		}
		cs.Close()
	})
	s.mu.Lock()
	if !watching || s.closed {
		s.mu.Unlock()
		sess.markDead()
		cs.Close()
		return nil, ErrClosed
	}
	prev := s.cur
	s.cur = sess
	s.tools, s.names = tools, names
	s.mu.Unlock()
	if prev != nil && prev != sess {
		s.closeAsync(prev)
	}
	s.log.Info().Int("tools", len(tools)).Str("session", cs.ID()).Msg("mcp server connected")
	return sess, nil
}

// withCause adds the cause of ctx's end (for example the connect timeout or ErrClosed) to
// an error the SDK reported as a bare context error.
func withCause(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(err, cause) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, cause)
}

// forget clears sess as the current session, reporting whether it was current.
func (s *server) forget(sess *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != sess {
		return false
	}
	s.cur = nil
	return true
}

// discard marks sess broken and closes it in the background, so the next use reconnects.
func (s *server) discard(sess *session, cause error) {
	sess.markDead()
	if s.forget(sess) {
		s.log.Info().AnErr("cause", cause).Msg("mcp session broken; reconnecting")
	}
	s.closeAsync(sess)
}

// closeAsync closes sess without waiting for its calls in flight; after Close it closes
// it synchronously (the caller is then tracked by Close).
func (s *server) closeAsync(sess *session) {
	if !s.b.spawn(func() { sess.cs.Close() }) {
		sess.cs.Close()
	}
}

// shutdown closes the current session and refuses new ones.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closed = true
	sess := s.cur
	s.cur = nil
	s.mu.Unlock()
	if sess != nil {
		sess.markDead()
		sess.cs.Close()
	}
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
}

// onToolListChanged refreshes the tool list when the server announces a change.
func (s *server) onToolListChanged(_ context.Context, req *mcp.ToolListChangedRequest) {
	s.b.spawn(func() {
		sess := s.live()
		if sess == nil || sess.cs != req.Session {
			return
		}
		ctx, cancel := context.WithTimeout(s.b.life, s.b.opts.connectTimeout)
		defer cancel()
		if err := s.refreshTools(ctx, sess); err != nil {
			s.log.Debug().Err(err).Msg("refreshing mcp tool list after a change notification failed")
		}
	})
}

// refreshTools relists the tools of sess and installs the list if sess is still current.
func (s *server) refreshTools(ctx context.Context, sess *session) error {
	tools, names, err := s.listTools(ctx, sess.cs)
	if err != nil {
		return withCause(ctx, err)
	}
	s.mu.Lock()
	if s.cur == sess {
		s.tools, s.names = tools, names
	}
	s.mu.Unlock()
	return nil
}

// listTools lists every tool of cs (all pages) as descriptors. A tool whose id or schema
// cannot make a valid descriptor is skipped with a warning, and is then not invocable
// either: the model-visible and the invocable sets are the same.
func (s *server) listTools(ctx context.Context, cs *mcp.ClientSession) ([]contracts.ToolDescriptor, map[string]*jsonschema.Schema, error) {
	var out []contracts.ToolDescriptor
	names := map[string]*jsonschema.Schema{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, nil, err
		}
		if t == nil {
			continue
		}
		if _, dup := names[t.Name]; dup {
			s.log.Warn().Str("tool", t.Name).Msg("mcp server lists a tool twice; keeping the first")
			continue
		}
		d, err := descriptorFor(s.cfg.Name, t)
		if err != nil {
			s.log.Warn().Str("tool", t.Name).Err(err).Msg("mcp tool skipped")
			continue
		}
		schema, err := jsonschema.Compile(d.Parameters)
		if err != nil {
			s.log.Warn().Str("tool", t.Name).Err(err).Msg("mcp tool skipped: its input schema does not compile")
			continue
		}
		names[t.Name] = schema
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b contracts.ToolDescriptor) int { return strings.Compare(a.ID, b.ID) })
	return out, names, nil
}

// descriptorFor builds the descriptor of tool t of server: id mcp__{server}__{tool}, the
// tool's description (its title when it has none), its input schema normalised to the
// object form, kind regular, the default recovery policy (an MCP tool promises nothing
// about repeating it; the host may still pin another from trusted annotations, see
// config.Config.Tool) and the tool's annotations.
func descriptorFor(server string, t *mcp.Tool) (contracts.ToolDescriptor, error) {
	if t.Name == "" {
		return contracts.ToolDescriptor{}, fmt.Errorf("%w: empty tool name", contracts.ErrInvalidDescriptor)
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil {
		return contracts.ToolDescriptor{}, fmt.Errorf("%w: input schema: %w", contracts.ErrInvalidDescriptor, err)
	}
	params, err := contracts.NormalizeParameters(schema)
	if err != nil {
		return contracts.ToolDescriptor{}, err
	}
	description := t.Description
	if description == "" {
		description = t.Title
	}
	d := contracts.ToolDescriptor{
		ID:             config.MCPPrefix(server) + t.Name,
		Description:    description,
		Parameters:     params,
		Kind:           contracts.KindRegular,
		RecoveryPolicy: contracts.DefaultRecoveryPolicy(),
		Annotations:    annotationsOf(t.Annotations),
	}
	if err := d.Validate(); err != nil {
		return contracts.ToolDescriptor{}, err
	}
	return d, nil
}

// annotationsOf carries an MCP tool's annotations into its descriptor. The SDK decodes
// readOnlyHint and idempotentHint as plain booleans, so an absent one reads false — which
// is also the specification's default for both; destructiveHint and openWorldHint keep
// their absence (default true).
func annotationsOf(a *mcp.ToolAnnotations) *contracts.ToolAnnotations {
	if a == nil {
		return nil
	}
	readOnly, idempotent := a.ReadOnlyHint, a.IdempotentHint
	return &contracts.ToolAnnotations{
		ReadOnlyHint:    &readOnly,
		DestructiveHint: a.DestructiveHint,
		IdempotentHint:  &idempotent,
		OpenWorldHint:   a.OpenWorldHint,
	}
}

// hasTool reports whether the last listing offered tool.
func (s *server) hasTool(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.names[tool]
	return ok
}

// schemaOf returns the compiled input schema of tool from the last listing (nil when the
// tool is not listed).
func (s *server) schemaOf(tool string) *jsonschema.Schema {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[tool]
}

// descriptors returns a copy of the last listing.
func (s *server) descriptors() []contracts.ToolDescriptor {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]contracts.ToolDescriptor, len(s.tools))
	for i, d := range s.tools {
		d.Parameters = slices.Clone(d.Parameters)
		out[i] = d
	}
	return out
}

func (s *server) status() ServerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := ServerStatus{Name: s.cfg.Name, Transport: s.transportKind(), Connected: s.cur != nil && !s.cur.isDead()}
	for _, d := range s.tools {
		st.Tools = append(st.Tools, d.ID)
	}
	if s.lastErr != nil && !st.Connected {
		st.LastError = s.lastErr.Error()
	}
	return st
}

// invoke runs one call; see [Bridge.Invoke] and the package documentation.
func (s *server) invoke(ctx context.Context, toolID, tool string, args json.RawMessage, operationID string) (contracts.ToolOutput, error) {
	name := s.cfg.Name
	hook := beforeDispatchFrom(ctx)
	for attempt := 0; ; attempt++ {
		sess, fresh, err := s.session(ctx)
		if err != nil {
			return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch(
				fmt.Sprintf("mcp server %q is unreachable: %v", name, err))
		}
		// retry reports whether a failure before dispatch on sess is worth one more attempt
		// on a new session; either way a session that refused while ctx is live is broken.
		retry := func(cause error) bool {
			if ctx.Err() != nil {
				return false
			}
			s.discard(sess, cause)
			return !fresh && attempt == 0
		}
		if !s.hasTool(tool) {
			if err := s.refreshTools(ctx, sess); err != nil {
				if retry(err) {
					continue
				}
				return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch(
					fmt.Sprintf("mcp server %q: listing tools: %v", name, err))
			}
			if !s.hasTool(tool) {
				return contracts.ToolOutput{}, contracts.ErrUnknownTool(toolID)
			}
		}
		// The server's inputSchema is what the model was shown: arguments that break it
		// are answered here, and the server never sees the call.
		if schema := s.schemaOf(tool); schema != nil {
			if err := config.ValidateAgainst(schema, args); err != nil {
				return contracts.ToolOutput{}, err
			}
		}
		if hook != nil {
			if err := hook(ctx); err != nil {
				var te *contracts.ToolError
				if errors.As(err, &te) {
					return contracts.ToolOutput{}, te
				}
				return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch(
					fmt.Sprintf("mcp server %q, tool %q: %v", name, tool, err))
			}
			hook = nil // at most once: a retry follows an attempt that delivered nothing
		}
		p := &probe{}
		params := &mcp.CallToolParams{Name: tool, Arguments: args, Meta: requestMeta(ctx, operationID)}
		closeProgress := func() {}
		if f := progressFrom(ctx); f != nil {
			var token string
			token, closeProgress = s.b.progress.open(operationID, f)
			params.SetProgressToken(token)
		}
		res, err := sess.cs.CallTool(withProbe(ctx, p), params)
		closeProgress()
		if err == nil {
			reportResultCost(ctx, res)
			return renderResult(res), nil
		}
		err = withCause(ctx, err)
		if p.mayHaveReachedServer() {
			return contracts.ToolOutput{}, contracts.ExecutionFailed(
				fmt.Sprintf("mcp server %q, tool %q: %v", name, tool, err))
		}
		if retry(err) {
			continue
		}
		return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch(
			fmt.Sprintf("mcp server %q, tool %q: request not sent: %v", name, tool, err))
	}
}
