// Package api is awaken's front door besides the JetStream subjects: a NATS micro service
// named "awaken" (so `nats micro ls` finds it), an HTTP api under /v1 — batches for
// platforms without a NATS client, approvals, operations — and the web console at /,
// which lists pending approvals and recent batches and updates live over server-sent
// events.
//
// Every decision made here is a resume command published on the api's resume subject and
// answered by the gate, exactly like a platform's command on the JetStream subject: the
// three doors share one validation (the gate's, against the committed ticket) and this
// package never changes a record itself. A batch submitted over HTTP is published on the
// submissions subject like a platform's (see batches.go), so the batcher decides about it.
// Reads (tickets, batches, call timelines) come straight from the KV buckets, results
// from the results stream.
//
// # Security
//
// The HTTP api has no ambient credentials: with a token configured (--api-token or
// AWAKEN_API_TOKEN) every /v1 request must carry "Authorization: Bearer TOKEN"; the console
// asks for the token once and keeps it in the tab's sessionStorage (never a cookie), so a
// cross-site page can neither read nor send it. Mutating requests must also be
// Content-Type application/json (a form cannot send that without a CORS preflight, which
// the api never grants) and pass the Origin/Sec-Fetch-Site check of
// [net/http.CrossOriginProtection]. When bound to a loopback address the api answers only
// requests whose Host is a loopback name, which defeats DNS rebinding against a token-less
// local console. Responses carry a strict Content-Security-Policy (no inline script or
// style, frame-ancestors 'none'), X-Content-Type-Options nosniff and no-store caching.
// The console renders model-authored content (arguments, outputs) with textContent only.
package api

import (
	"context"
	"errors"
	"fmt"
	stdlog "log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/apitokens"
	"github.com/awaken-dev/awaken/internal/mcpserve"
	"github.com/awaken-dev/awaken/internal/readmodel"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// ServiceName is the api among the services: its logs, and the service part of the
// CloudEvents source of everything it publishes, "awaken/api" (docs/protocol.md: services
// use awaken/{service}), for its commands and its tool-pause audit alike.
const ServiceName = contracts.ServiceAPI

// MicroName is the name the api's NATS micro service announces ($SRV discovery), the
// product's: "awaken".
const MicroName = "awaken"

// ServiceVersion is the semantic version the micro service announces.
const ServiceVersion = "0.1.0"

// Defaults of [Options].
const (
	DefaultResolveTimeout = 30 * time.Second
	DefaultMaxInFlight    = 64
	DefaultMaxStreams     = 64
)

// Options configures the api.
type Options struct {
	// NewClient makes a client of the platform protocol on the api's own connection: the
	// api sends resume commands, cancellations and resolutions with it. The wiring sets it
	// (internal/app), which holds the connection; the api never does.
	NewClient func(opts ...client.Option) (*client.Client, error)
	// HTTPAddr is the host:port of the HTTP api and console; empty disables HTTP (the
	// micro service still runs). Port 0 picks a free port (see [Service.URL]).
	HTTPAddr string
	// Token, when set, is a bearer token /v1 requests may carry; its resolutions are
	// recorded as made by [SingleTokenName].
	Token string
	// Tokens are further bearer tokens by name (--api-tokens FILE, see [apitokens.Load]):
	// a resolution is recorded as made by the name of the token that authenticated it.
	// With Token or Tokens set, every /v1 request must carry one of them.
	Tokens map[string]string
	// TokenRoles are the roles of the named tokens whose --api-tokens line names some
	// (see [apitokens.Load]); a token absent here — and the single Token, and every request
	// when no token is configured — has every role.
	TokenRoles map[string]apitokens.RoleSet
	// AllowedHosts are the Host header names (without port) the HTTP api answers, besides
	// the loopback names when it is bound to a loopback address. "*" allows any host; with
	// none set and a non-loopback address, any host is allowed (protect it with Token).
	AllowedHosts []string
	// ResolveTimeout bounds the wait for the gate's answer to a resume command
	// (default [DefaultResolveTimeout]).
	ResolveTimeout time.Duration
	// MaxInFlight bounds the concurrent micro requests (default [DefaultMaxInFlight]);
	// past it a request is refused with code unavailable.
	MaxInFlight int
	// MaxStreams bounds the concurrent event streams (default [DefaultMaxStreams]), and
	// separately the concurrent run result streams. MaxInFlight also bounds the
	// submissions waiting for their results over HTTP.
	MaxStreams int
	// DisableMicro skips the micro service (for a second HTTP-only instance).
	DisableMicro bool
	// DisableMCP leaves out the MCP route /mcp (docs/http-api.md#mcp).
	DisableMCP bool
	// Metrics, when set, is served at GET /metrics on the HTTP server (the process's
	// Prometheus registry). With a Token it requires the token like /v1, because metrics
	// name tools and count batches, tickets and rejections; PublicMetrics serves it
	// without, for a scraper that cannot send a bearer token.
	Metrics       http.Handler
	PublicMetrics bool
	// Ready, when set, is an extra readiness condition of GET /readyz (e.g. the whole
	// stack's in `awaken dev`: every consumer bound); nil adds none.
	Ready func(ctx context.Context) error
}

// Service is a running api: the micro service, the HTTP server and the event hub. Its
// methods are safe for concurrent use.
type Service struct {
	env    Deps
	opts   Options
	log    zerolog.Logger
	client *client.Client
	reader *readmodel.Reader
	hub    *hub

	// ctx is the context of every request (the HTTP server's base context, and micro
	// handlers'); Stop cancels it last, or when its own deadline passes, so in-flight
	// decisions get the gate's answer during a graceful stop.
	ctx    context.Context
	cancel context.CancelFunc
	// streams ends the event streams and their KV watchers; Stop cancels it first, since a
	// stream never finishes by itself.
	streams       context.Context
	cancelStreams context.CancelFunc

	micro micro.Service
	// mcp is the MCP door served at /mcp (nil with DisableMCP).
	mcp *mcpserve.Server
	// tokens are the digests of the configured api tokens with their names.
	tokens []tokenDigest
	// mu orders inflight.Add (in begin) before inflight.Wait (in stop): once stopping is
	// set no request is added, so Wait never races an Add from zero.
	mu       sync.Mutex
	stopping bool
	inflight sync.WaitGroup
	// sem bounds the micro requests in flight (MaxInFlight).
	sem slots
	// waits bounds the submissions waiting for their results (MaxInFlight), runStreams
	// the open run result streams (MaxStreams).
	waits      slots
	runStreams slots
	// policyTests admits one policy test at a time: each reads the audit history.
	policyTests slots

	httpSrv  *http.Server
	listener net.Listener
	served   chan error

	stopOnce sync.Once
	stopErr  error
}

// Start starts the micro service on env's connection and, when opts.HTTPAddr is set, the
// HTTP api (the listener is bound before Start returns, so an address in use is an error
// here). ctx bounds only the start-up; the service runs until Stop.
func Start(ctx context.Context, env Deps, opts Options) (*Service, error) {
	if env.Runtime == nil {
		return nil, errors.New("api: no runtime")
	}
	if opts.ResolveTimeout <= 0 {
		opts.ResolveTimeout = DefaultResolveTimeout
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	// The api hands results on as published: an HTTP caller reads a linked output with
	// GET /v1/objects/{name}, so a response never carries a 64 MiB output inline.
	if opts.NewClient == nil {
		return nil, errors.New("api: no client (Options.NewClient)")
	}
	c, err := opts.NewClient(client.WithPrefix(env.Names.Prefix), client.WithSource("awaken/"+ServiceName), client.KeepLinks(),
		// The api authenticated every actor it sends: its resume commands go on the subject
		// only its NATS user may publish, so the gate records them as authenticated.
		client.AuthenticatedResumes())
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	streams, cancelStreams := context.WithCancel(sctx)
	s := &Service{
		env:           env,
		opts:          opts,
		tokens:        digests(opts),
		log:           env.Log.With().Str("component", ServiceName).Logger(),
		client:        c,
		reader:        readmodel.NewReader(env.Runs, env.Batches, env.Calls, env.Tickets),
		ctx:           sctx,
		cancel:        cancel,
		streams:       streams,
		cancelStreams: cancelStreams,
		sem:           make(slots, opts.MaxInFlight),
		waits:         make(slots, opts.MaxInFlight),
		runStreams:    make(slots, opts.MaxStreams),
		policyTests:   make(slots, 1),
	}
	s.hub = newHub(streams, env, s.log, opts.MaxStreams)
	if !opts.DisableMCP {
		door, err := mcpserve.New(mcpserve.Options{Client: c, Catalog: s.Catalog, Config: env.Config.MCPServe,
			Log: env.Log.With().Str("component", "mcp").Logger(), Version: ServiceVersion, AuditKey: env.AuditKey})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("api: %w", err)
		}
		s.mcp = door
	}
	if !opts.DisableMicro {
		if err := s.startMicro(); err != nil {
			cancel()
			return nil, err
		}
	}
	if opts.HTTPAddr != "" {
		if err := s.startHTTP(ctx); err != nil {
			_ = s.Stop(ctx)
			return nil, err
		}
	}
	return s, nil
}

func (s *Service) startHTTP(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("api: listen %s: %w", s.opts.HTTPAddr, err)
	}
	s.listener = ln
	s.httpSrv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// No WriteTimeout: event streams are long-lived; each stream write sets its own
		// deadline, and every other handler is bounded by ResolveTimeout.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return s.ctx },
		// Connection-level errors (TLS probes, bad requests) go to the service log.
		ErrorLog: stdlog.New(s.log.With().Str("source", "http").Logger(), "", 0),
	}
	s.served = make(chan error, 1)
	go func() { s.served <- s.httpSrv.Serve(ln) }()
	s.log.Info().Str("http", s.URL()).Msg("http api and console listening")
	return nil
}

// URL is the base URL of the HTTP api and console ("" when HTTP is disabled). A wildcard
// bind address is shown as localhost.
func (s *Service) URL() string {
	if s.listener == nil {
		return ""
	}
	addr, ok := s.listener.Addr().(*net.TCPAddr)
	if !ok {
		return "http://" + s.listener.Addr().String() + "/"
	}
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(addr.Port)) + "/"
}

// Stop ends the api gracefully: the micro service and the HTTP server stop taking
// requests, event streams end, and in-flight requests — a decision waiting for the gate's
// answer included — finish. When ctx ends first, in-flight requests are cancelled (their
// callers get "unavailable"; a command already published is still applied by the gate).
// It is safe to call more than once.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Service) stop(ctx context.Context) error {
	var errs []error
	if s.micro != nil {
		if err := s.micro.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("api: stop micro service: %w", err))
		}
	}
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.cancelStreams()
	if s.mcp != nil {
		// MCP calls waiting for a result answer "stopped" with where to read it, so
		// their requests end and the HTTP server can shut down.
		s.mcp.Stop()
	}
	defer s.cancel()
	// Past ctx's deadline, cancel what is still in flight so that Stop returns.
	defer context.AfterFunc(ctx, s.cancel)()
	if s.httpSrv != nil {
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("api: shut down http: %w", err))
			_ = s.httpSrv.Close()
		}
		if err := <-s.served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("api: http: %w", err))
		}
	}
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		s.hub.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("api: waiting for in-flight requests: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// slots bounds how many of one kind of request run at once: each takes a slot while it
// runs, and one that finds them all taken is refused rather than queued.
type slots chan struct{}

// take takes a slot, to be given back with release; with every slot taken it refuses
// with a 503 unavailable *httpapi.Error saying refusal.
func (sl slots) take(refusal string) (release func(), err error) {
	select {
	case sl <- struct{}{}:
		return func() { <-sl }, nil
	default:
		return nil, apiErr(http.StatusServiceUnavailable, httpapi.CodeUnavailable, "%s", refusal)
	}
}

// begin registers an in-flight micro request; false once Stop has begun.
func (s *Service) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return false
	}
	s.inflight.Add(1)
	return true
}

// isLoopbackHost reports whether host (no port) names the local machine.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
