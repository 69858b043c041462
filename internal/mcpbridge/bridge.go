package mcpbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// Keys of the _meta of every tools/call request the bridge sends.
const (
	// MetaOperationID is the key of the call's durable operation id.
	MetaOperationID = "awaken/operation_id"
	// MetaIdempotencyKey is the key of the call's idempotency key
	// ([contracts.IdempotencyKey] of its operation id): the same for every attempt of one
	// call, so a server that deduplicates by it — or passes it on as an Idempotency-Key —
	// performs the effect once.
	MetaIdempotencyKey = contracts.MetaIdempotencyKey
	// MetaTraceParent and MetaTraceState carry the W3C Trace Context of the call's
	// execute_tool span, under the unprefixed keys the OpenTelemetry MCP conventions and
	// MCP's SEP-414 name, so a traced server's spans join the batch's trace.
	MetaTraceParent = "traceparent"
	MetaTraceState  = "tracestate"
)

// requestMeta is the _meta of a tools/call request for operationID under ctx: the
// operation id and its idempotency key (when there is an operation id) and the trace
// context of ctx's span (when it has a valid one). Nil when there is nothing to send.
func requestMeta(ctx context.Context, operationID string) mcp.Meta {
	meta := mcp.Meta{}
	if operationID != "" {
		meta[MetaOperationID] = operationID
		meta[MetaIdempotencyKey] = contracts.IdempotencyKey(operationID)
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		for _, k := range []string{MetaTraceParent, MetaTraceState} {
			if v := carrier[k]; v != "" {
				meta[k] = v
			}
		}
	}
	if len(meta) == 0 {
		return nil
	}
	return meta
}

// Defaults of the [Option]s.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultRetryInterval  = 30 * time.Second
	DefaultTerminateGrace = 2 * time.Second
)

// ErrClosed is the cause of every failure after [Bridge.Close].
var ErrClosed = errors.New("mcp bridge closed")

// errAlreadyStarted is returned by a second [Bridge.Start].
var errAlreadyStarted = errors.New("mcp bridge already started")

// Option tunes a [Bridge].
type Option func(*options)

type options struct {
	connectTimeout time.Duration
	retryInterval  time.Duration
	terminateGrace time.Duration
}

// WithConnectTimeout bounds one connection attempt (start or dial, initialise, list
// tools); default [DefaultConnectTimeout]. An invocation's own deadline bounds it further.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.connectTimeout = d
		}
	}
}

// WithRetryInterval sets how often the background loop reconnects servers that are down
// and refreshes the tool lists of the others; default [DefaultRetryInterval].
func WithRetryInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.retryInterval = d
		}
	}
}

// WithTerminateGrace sets how long a stdio child gets to exit after its stdin is closed,
// and again after SIGTERM, before it is killed; default [DefaultTerminateGrace].
func WithTerminateGrace(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.terminateGrace = d
		}
	}
}

// Bridge mounts the configured MCP servers. All methods are safe for concurrent use;
// invocations of different tools, and of one tool, run concurrently on the shared session
// of their server.
type Bridge struct {
	log     zerolog.Logger
	opts    options
	servers []*server // configuration order: it decides which server owns an id

	// life is cancelled by Close; every connection attempt and invocation is bound to it.
	life context.Context
	stop context.CancelCauseFunc
	// progress routes servers' notifications/progress to the calls in flight (progress.go).
	progress progressRoutes

	mu      sync.Mutex
	started bool
	closed  bool
	// wg tracks background goroutines (the retry loop, session watchers, asynchronous
	// session closes); Close waits for them. Add only under mu while !closed.
	wg sync.WaitGroup
}

// New returns a bridge for servers (the executors.mcp entries of the configuration). It
// connects nothing; see [Bridge.Start].
func New(servers []config.MCPServer, log zerolog.Logger, opts ...Option) *Bridge {
	o := options{
		connectTimeout: DefaultConnectTimeout,
		retryInterval:  DefaultRetryInterval,
		terminateGrace: DefaultTerminateGrace,
	}
	for _, opt := range opts {
		opt(&o)
	}
	life, stop := context.WithCancelCause(context.Background())
	b := &Bridge{log: log.With().Str("component", "mcpbridge").Logger(), opts: o, life: life, stop: stop}
	for _, cfg := range servers {
		cfg.Args = append([]string(nil), cfg.Args...)
		b.servers = append(b.servers, newServer(b, cfg))
	}
	return b
}

// Start connects to every server and lists its tools, concurrently, each attempt bounded
// by the connect timeout and ctx, and returns when every attempt has ended. A server that
// cannot be reached is logged, not fatal: it is retried on use and by a background loop
// that runs until Close or until ctx is done. Start fails only if the bridge was already
// started or closed.
func (b *Bridge) Start(ctx context.Context) error {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return ErrClosed
	case b.started:
		b.mu.Unlock()
		return errAlreadyStarted
	}
	b.started = true
	b.wg.Add(1)
	b.mu.Unlock()
	defer b.wg.Done()

	b.connectAll(ctx)
	for _, s := range b.servers {
		if st := s.status(); !st.Connected {
			b.log.Warn().Str("server", st.Name).Str("error", st.LastError).
				Msg("mcp server unavailable at start; its tools appear once it can be reached")
		}
	}
	b.spawn(func() { b.retryLoop(ctx) })
	return nil
}

// connectAll connects, concurrently, every server that has no live session, and waits
// for the attempts.
func (b *Bridge) connectAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range b.servers {
		if s.live() != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.session(ctx); err != nil {
				b.log.Debug().Str("server", s.cfg.Name).Err(err).Msg("mcp server connection attempt failed")
			}
		}()
	}
	wg.Wait()
}

// retryLoop reconnects servers that are down and refreshes the tool lists of the others,
// every retry interval, until Close or until ctx is done.
func (b *Bridge) retryLoop(ctx context.Context) {
	t := time.NewTicker(b.opts.retryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.life.Done():
			return
		case <-t.C:
		}
		b.connectAll(ctx)
		for _, s := range b.servers {
			if sess := s.live(); sess != nil {
				rctx, cancel := context.WithTimeout(ctx, b.opts.connectTimeout)
				if err := s.refreshTools(rctx, sess); err != nil {
					b.log.Debug().Str("server", s.cfg.Name).Err(err).Msg("refreshing mcp tool list failed")
				}
				cancel()
			}
		}
	}
}

// spawn runs f in a goroutine Close waits for, unless the bridge is closed.
func (b *Bridge) spawn(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// enter registers an operation Close must wait for; it fails once Close has begun. A
// successful enter must be paired with b.wg.Done().
func (b *Bridge) enter() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// Close cancels the invocations in flight (they fail as execution failures if their
// request may have been sent, as unavailable otherwise), closes every session, terminates
// every stdio child and waits for the bridge's goroutines. Later invocations fail as
// unavailable before dispatch. Close is idempotent.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.stop(ErrClosed)
	var wg sync.WaitGroup
	for _, s := range b.servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.shutdown()
		}()
	}
	wg.Wait()
	b.wg.Wait()
	return nil
}

// Descriptors returns the descriptors of the tools of every server, in configuration
// order then by tool name. Servers without a live session are first reconnected,
// concurrently and bounded by ctx and the connect timeout, so a server that came up since
// the last attempt is listed; a server that stays down contributes the tools of its last
// successful listing (calls to them fail as unavailable until it is back), or none.
func (b *Bridge) Descriptors(ctx context.Context) []contracts.ToolDescriptor {
	if b.enter() {
		b.connectAll(ctx)
		b.wg.Done()
	}
	var out []contracts.ToolDescriptor
	for _, s := range b.servers {
		out = append(out, s.descriptors()...)
	}
	return out
}

// ServerStatus is the observable state of one server.
type ServerStatus struct {
	// Name is the configured server name.
	Name string
	// Transport is "stdio" or "http".
	Transport string
	// Connected reports a live session.
	Connected bool
	// Tools lists the tool ids of the last successful listing.
	Tools []string
	// LastError is the last connection failure, empty once connected.
	LastError string
}

// Status reports the state of every server, in configuration order.
func (b *Bridge) Status() []ServerStatus {
	out := make([]ServerStatus, 0, len(b.servers))
	for _, s := range b.servers {
		out = append(out, s.status())
	}
	return out
}

// resolve finds the server owning toolID and the tool's name on it. Like
// [config.Config.Tool], the first configured server whose prefix matches owns the id, so
// the gate and the executor always agree on it.
func (b *Bridge) resolve(toolID string) (*server, string, bool) {
	for _, s := range b.servers {
		if rest, ok := strings.CutPrefix(toolID, config.MCPPrefix(s.cfg.Name)); ok && rest != "" {
			return s, rest, true
		}
	}
	return nil, "", false
}

// Owns reports whether toolID names a tool of a configured server (whether or not the
// server currently offers it).
func (b *Bridge) Owns(toolID string) bool {
	_, _, ok := b.resolve(toolID)
	return ok
}

// Invoke calls tool toolID (mcp__{server}__{tool}) with args, passing operationID, its
// idempotency key and the trace context of ctx in the request _meta (see
// [MetaOperationID]). ctx bounds the call (the per-call timeout).
//
// Outcomes: the result, mapped by its content (an IsError result is an error output, not
// an error); [contracts.ErrUnknownTool] for an id of no configured server or a tool the
// server does not list; [contracts.InvalidArguments] for arguments that are not a JSON
// object (null means {}); [contracts.UnavailableBeforeDispatch] when the server could not
// be reached or the request provably never reached it; [contracts.ExecutionFailed] for
// any failure after the request may have reached it. See the package documentation for
// the classification rule.
func (b *Bridge) Invoke(ctx context.Context, toolID string, args json.RawMessage, operationID string) (contracts.ToolOutput, error) {
	s, tool, ok := b.resolve(toolID)
	if !ok {
		return contracts.ToolOutput{}, contracts.ErrUnknownTool(toolID)
	}
	arguments, err := objectArguments(args)
	if err != nil {
		return contracts.ToolOutput{}, err
	}
	if !b.enter() {
		return contracts.ToolOutput{}, contracts.UnavailableBeforeDispatch(fmt.Sprintf("mcp server %q: %v", s.cfg.Name, ErrClosed))
	}
	defer b.wg.Done()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopAfter := context.AfterFunc(b.life, func() { cancel(ErrClosed) })
	defer stopAfter()
	log := b.log.With().Str("server", s.cfg.Name).Str("tool_id", toolID).Str("operation_id", operationID).Logger()
	out, err := s.invoke(ctx, toolID, tool, arguments, operationID)
	switch {
	case err == nil:
		log.Debug().Bool("is_error", out.IsError).Msg("mcp tool call completed")
	case contracts.IsUnavailableBeforeDispatch(err):
		log.Warn().Err(err).Msg("mcp tool call not dispatched")
	default:
		log.Warn().Err(err).Msg("mcp tool call failed")
	}
	return out, err
}

type beforeDispatchKey struct{}

// WithBeforeDispatch returns ctx carrying f, which [Bridge.Invoke] calls once, after the
// session is established and the tool is known to the server and immediately before the
// request is handed to the transport. brain-exec uses it to record the body start in its
// ledger only when the call may actually reach the server. An error from f aborts the
// call before dispatch: a *contracts.ToolError is returned as is, any other error as
// unavailable before dispatch. f is not called again when a call is retried on a new
// session after an attempt that provably delivered nothing, so it runs at most once per
// possible delivery.
func WithBeforeDispatch(ctx context.Context, f func(context.Context) error) context.Context {
	return context.WithValue(ctx, beforeDispatchKey{}, f)
}

func beforeDispatchFrom(ctx context.Context) func(context.Context) error {
	f, _ := ctx.Value(beforeDispatchKey{}).(func(context.Context) error)
	return f
}

// objectArguments checks that args is a JSON object; empty or null arguments mean {}.
func objectArguments(args json.RawMessage) (json.RawMessage, error) {
	a := bytes.TrimSpace(args)
	if len(a) == 0 || bytes.Equal(a, []byte("null")) {
		return json.RawMessage(`{}`), nil
	}
	if a[0] != '{' || !json.Valid(a) {
		return nil, contracts.InvalidArguments("arguments must be a JSON object")
	}
	return json.RawMessage(a), nil
}
