// Package servicerun runs services: it connects each on its own NATS connection, ensures
// the streams and buckets (or waits for `awaken setup` to have made them), builds each
// one's environment and telemetry, starts them in order, serves the operations listener
// (/metrics, /healthz, /readyz), reports readiness and drains them on stop. Which services
// exist and how each starts is the caller's: internal/wiring/app wires the awaken services,
// and pkg/executor runs the Brain executor alone. It imports no service and does not link
// nats-server.
package servicerun

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// PublishAckTimeout is the bound of bus.PublishAckTimeout, also given to the JetStream
// context so that the pending acknowledgement futures themselves are released.
const PublishAckTimeout = bus.PublishAckTimeout

// Service is a started service.
type Service interface {
	Stop(ctx context.Context) error
}

// StartFunc starts service name on env for st; ctx bounds the service's lifetime.
type StartFunc func(ctx context.Context, st *Stack, name string, env *pipeline.Env) (Service, error)

// Options configures a [Stack].
type Options struct {
	// Config is the host configuration (required).
	Config *config.Config
	// Services to start, in order (required).
	Services []string
	// Start starts one service (required).
	Start StartFunc
	// Dial returns a new connection for a service; each service gets its own so drains
	// and connection names stay per service, as in separate processes.
	Dial func(name string) (*nats.Conn, error)
	// Log is the base logger.
	Log zerolog.Logger
	// Faults is the test-only fault hook (nil in production).
	Faults pipeline.FaultHook
	// OnHandOffMismatch, when set, is told of every commit that handed work to other
	// consumers than its writer named (test-only: tests fail on it; nil in production).
	OnHandOffMismatch func(pipeline.HandOffMismatch)
	// Now, when set, is every service's clock instead of the real one: a test that depends
	// on the time of day (the hourly windows of a rate limit) sets it (nil in production).
	Now func() time.Time
	// Topology overrides the stream settings (replicas, storage).
	Topology *bus.TopologyConfig
	// Metrics is the process's Prometheus registry; nil creates one per Stack. Every
	// service of the stack records on it, and the tickets gauge is registered on it when
	// the stack runs the gate or the api.
	Metrics *telemetry.Metrics
	// TracerProvider gives the services' spans (see telemetry.TracerProviderFromEnv); nil
	// disables tracing.
	TracerProvider trace.TracerProvider
	// HTTPAddr, when set, is the host:port of the process's operations listener:
	// /metrics, /healthz and /readyz (see [Stack.Ready]). Port 0 picks a free port
	// ([Stack.HTTPAddr]). Empty: no listener (the api mounts /metrics on its own server).
	HTTPAddr string
	// NoEnsure leaves stream and bucket creation to a privileged step (`awaken setup`, see
	// [Setup]): Start then only waits until the buckets exist. Services that connect as
	// least-privilege NATS users must set it, since they may not create streams.
	NoEnsure bool
	// Server is the NATS server the stack owns, when it started one itself
	// (internal/wiring/app/embedded): Stop shuts it down once the services are drained, and
	// [Stack.URL] is its client URL. nil: the server is someone else's.
	Server OwnedServer
}

// OwnedServer is a NATS server a [Stack] shuts down when it stops. It is an interface so
// that this package does not link nats-server: pkg/executor runs its one service through
// [Start] against a remote server.
type OwnedServer interface {
	// ClientURL is the URL outside clients connect to.
	ClientURL() string
	// Shutdown stops the server and returns once it has stopped.
	Shutdown()
}

// Stack is a set of running services.
type Stack struct {
	// runCtx bounds the services' lifetime. It is detached from the caller's context so
	// that a SIGTERM (which cancels the caller's context) leads to a graceful drain by
	// Stop instead of a hard stop of every consumer.
	runCtx    context.Context
	cancelRun context.CancelFunc
	services  []named
	conns     []*nats.Conn
	log       zerolog.Logger
	metrics   *telemetry.Metrics
	ops       *telemetry.Server
	server    OwnedServer
	url       string
	// mu guards tels and started, read by readiness checks while Start runs.
	mu      sync.Mutex
	tels    []*telemetry.Telemetry
	started bool
	// Env is the environment of the first service, for callers that need the stores.
	Env *pipeline.Env
}

type named struct {
	name string
	svc  Service
}

// Metrics returns the stack's Prometheus registry.
func (s *Stack) Metrics() *telemetry.Metrics { return s.metrics }

// HTTPAddr returns the bound address of the operations listener ("" when off).
func (s *Stack) HTTPAddr() string {
	if s.ops == nil {
		return ""
	}
	return s.ops.Addr()
}

// URL returns the client URL of the server the stack owns ([Options.Server]; "" when
// the server is someone else's). It stays valid after Stop, for the log.
func (s *Stack) URL() string { return s.url }

// Ready reports whether the stack can do its work: Start has completed (so the streams
// and buckets were ensured and every service started), every NATS connection is
// connected, and every consume loop of every pipeline service is bound and running. It
// backs /readyz and is safe to call concurrently with everything.
func (s *Stack) Ready(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return errors.New("starting: streams or consumers not ready yet")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, nc := range s.conns {
		if !nc.IsConnected() {
			return fmt.Errorf("NATS connection %s is %s", nc.Opts.Name, nc.Status())
		}
	}
	for _, t := range s.tels {
		if err := t.Ready(); err != nil {
			return err
		}
	}
	return nil
}

// TopologyFor derives the stream settings from the host configuration: storage, and the
// age of every stream and bucket from its `retention:` section.
func TopologyFor(cfg *config.Config) bus.TopologyConfig {
	age := func(kind string) time.Duration {
		if d := cfg.RetentionOf(kind); d > 0 {
			return d
		}
		return bus.NoAgeLimit
	}
	runs := age(config.RetentionRuns)
	t := bus.TopologyConfig{
		Replicas:          cfg.Storage.Replicas,
		SubmissionsMaxAge: age(config.RetentionSubmissions),
		ResultsMaxAge:     age(config.RetentionResults),
		// The run-control and ticket-protocol logs hold commands about runs, consumed
		// within seconds: they go with the runs.
		TicketsMaxAge:    runs,
		ControlMaxAge:    runs,
		EventsMaxAge:     age(config.RetentionEvents),
		AuditMaxAge:      age(config.RetentionAudit),
		DeadLetterMaxAge: age(config.RetentionDeadLetters),
		RunsMaxAge:       runs,
		Partitions:       cfg.Storage.Partitions,
	}
	if cfg.Storage.Memory {
		t.Storage = jetstream.MemoryStorage
	}
	return t
}

// Start ensures the topology and starts the chosen services. On error, everything started
// so far is stopped.
func Start(ctx context.Context, o Options) (st *Stack, err error) {
	if o.Config == nil {
		return nil, errors.New("app: no configuration")
	}
	if len(o.Services) == 0 || o.Start == nil {
		return nil, errors.New("app: no services to start")
	}
	if o.Metrics == nil {
		o.Metrics = telemetry.NewMetrics()
	}
	st = &Stack{log: o.Log, metrics: o.Metrics, server: o.Server}
	if o.Server != nil {
		st.url = o.Server.ClientURL()
	}
	st.runCtx, st.cancelRun = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = st.Stop(stopCtx)
		}
	}()
	// Refuse to start on a configured audit key that cannot be read (each service's
	// environment reads it again), and print the public key that verifies the trail.
	auditKey, err := o.Config.AuditSigningKey()
	if err != nil {
		return st, fmt.Errorf("app: %w", err)
	}
	if auditKey != nil {
		pub := auditKey.Public().(ed25519.PublicKey)
		o.Log.Info().Str("audit_key_id", auditchain.KeyID(pub)).Str("audit_public_key", hex.EncodeToString(pub)).
			Msg("audit trail signed; verify it with this public key")
	} else {
		o.Log.Info().Msg("audit trail hash-chained but unsigned: no audit.signing_key_file configured")
	}
	topology := TopologyFor(o.Config)
	if o.Topology != nil {
		topology = *o.Topology
	}
	ensured := false
	for _, name := range o.Services {
		nc, err := o.Dial("awaken-" + name)
		if err != nil {
			return st, fmt.Errorf("app: connect %s: %w", name, err)
		}
		st.conns = append(st.conns, nc)
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(PublishAckTimeout))
		if err != nil {
			return st, fmt.Errorf("app: %s: %w", name, err)
		}
		if !ensured {
			// A service configured for another partition count than the deployment's
			// refuses to start: it would look for runs in the wrong partitions.
			if o.NoEnsure {
				if err := WaitTopology(ctx, js, o.Config.Names(), o.Log); err != nil {
					return st, err
				}
			}
			if err := CheckPartitions(ctx, js, o.Config.Names()); err != nil {
				return st, fmt.Errorf("app: %w", err)
			}
			if !o.NoEnsure {
				if _, err := bus.ApplyTopology(ctx, js, o.Config.Names(), topology, o.Log); err != nil {
					return st, fmt.Errorf("app: ensure streams and buckets: %w", err)
				}
			}
			ensured = true
		}
		// The view also lists the published MCP tools, by which the batcher resolves
		// provider-safe tool names, so it runs whenever MCP servers are configured.
		if (o.Config.TrustsAnnotations() || len(o.Config.Executors.MCP) > 0) && o.Config.Annotations == nil && usesAnnotations(name) {
			// One view per process, shared by its services, watched on the connection of
			// the first service that reads it. The configuration is copied so that a
			// caller's configuration, shared with other stacks, is never written while
			// they read it.
			view, err := pipeline.WatchAnnotations(ctx, st.runCtx, js, o.Config.Names(), o.Log)
			if err != nil {
				return st, fmt.Errorf("app: %w", err)
			}
			cfg := *o.Config
			cfg.Annotations = view
			o.Config = &cfg
		}
		log := o.Log.With().Str("service", name).Logger()
		env, err := pipeline.NewEnv(ctx, nc, js, o.Config, log)
		if err != nil {
			return st, err
		}
		env.Faults = o.Faults
		env.OnHandOffMismatch = o.OnHandOffMismatch
		if o.Now != nil {
			env.Now = o.Now
		}
		env.Service = name
		tel := telemetry.New(name, o.Metrics, o.TracerProvider)
		env.SetTelemetry(tel)
		if st.Env == nil {
			st.Env = env
		}
		if name == contracts.ServiceGate || (name == contracts.ServiceAPI && !slices.Contains(o.Services, contracts.ServiceGate)) {
			// One tickets gauge per process, from the tickets bucket.
			kv, err := js.KeyValue(ctx, env.Names.TicketsBucket())
			if err != nil {
				return st, fmt.Errorf("app: tickets bucket: %w", err)
			}
			if err := o.Metrics.RegisterTickets(kv, 5*time.Second); err != nil {
				return st, fmt.Errorf("app: tickets metrics: %w", err)
			}
		}
		svc, err := o.Start(st.runCtx, st, name, env)
		if err != nil {
			return st, fmt.Errorf("app: start %s: %w", name, err)
		}
		st.services = append(st.services, named{name, svc})
		// The api consumes nothing: its readiness is its connection's.
		if name != contracts.ServiceAPI {
			st.mu.Lock()
			st.tels = append(st.tels, tel)
			st.mu.Unlock()
		}
		log.Info().Msg("started")
	}
	st.mu.Lock()
	st.started = true
	st.mu.Unlock()
	if o.HTTPAddr != "" {
		ops, err := telemetry.Serve(o.HTTPAddr, telemetry.Handler(o.Metrics, st.Ready))
		if err != nil {
			return st, fmt.Errorf("app: operations listener: %w", err)
		}
		st.ops = ops
		o.Log.Info().Str("http", ops.Addr()).Msg("serving /metrics, /healthz and /readyz")
	}
	return st, nil
}

// usesAnnotations reports whether service reads trusted MCP annotations: the
// batcher pins recovery policies from them, the gate decides and checks entries with
// them, brain-exec checks replays, the api shows capabilities. The sandbox executor and
// the publisher never do (and their NATS users may not read the tools bucket).
func usesAnnotations(service string) bool {
	return service == contracts.ServiceBatcher || service == contracts.ServiceGate || service == contracts.ServiceBrainExec || service == contracts.ServiceAPI
}

// Stop drains every service (each finishes its in-flight messages), then closes the
// connections, then shuts down the server the stack owns ([Options.Server]). It is safe
// to call more than once.
func (s *Stack) Stop(ctx context.Context) error {
	var errs []error
	s.mu.Lock()
	s.started = false
	s.mu.Unlock()
	if s.ops != nil {
		if err := s.ops.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop operations listener: %w", err))
		}
		s.ops = nil
	}
	for i := len(s.services) - 1; i >= 0; i-- {
		n := s.services[i]
		if err := n.svc.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", n.name, err))
		}
	}
	s.services = nil
	if s.cancelRun != nil {
		s.cancelRun()
	}
	for _, nc := range s.conns {
		if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, err)
		}
	}
	s.conns = nil
	if s.server != nil {
		s.server.Shutdown()
		s.server = nil
	}
	return errors.Join(errs...)
}

// Kill drops every service without draining, as a crashed process would: in-flight
// messages stay unacked and are redelivered to whoever consumes next. A server the stack
// owns keeps running (the next consumer needs it); Stop shuts it down. Tests only.
func (s *Stack) Kill() {
	if s.ops != nil {
		_ = s.ops.Shutdown(context.Background())
		s.ops = nil
	}
	if s.cancelRun != nil {
		s.cancelRun()
	}
	for _, nc := range s.conns {
		nc.Close()
	}
	s.conns = nil
	s.services = nil
}

// NewLogger returns the zerolog JSON logger of a process.
func NewLogger(w io.Writer, level string) zerolog.Logger {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

// InProcessDialer dials an embedded server without TCP.
func InProcessDialer(s nats.InProcessConnProvider) func(name string) (*nats.Conn, error) {
	return func(name string) (*nats.Conn, error) {
		return nats.Connect("", nats.InProcessServer(s), nats.Name(name), nats.MaxReconnects(-1))
	}
}

// URLDialer dials a NATS URL with endless reconnects, so a service rides out a server
// restart instead of exiting.
func URLDialer(url string, opts ...nats.Option) func(name string) (*nats.Conn, error) {
	return func(name string) (*nats.Conn, error) {
		all := append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true)}, opts...)
		return nats.Connect(url, all...)
	}
}

// Service returns the running service name (nil when the stack does not run it).
func (s *Stack) Service(name string) Service {
	for _, n := range s.services {
		if n.name == name {
			return n.svc
		}
	}
	return nil
}
