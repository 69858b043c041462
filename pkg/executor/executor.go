// Package executor runs a Brain executor of your own: typed Go tools, served from your own
// module, with the same executor hop as the stock `awaken brain-exec` (which is itself a
// user of this package): entry claim and exactly-once commit, crash recovery by each
// tool's pinned policy, timeouts, the body-run ledger, Prometheus metrics, OpenTelemetry
// tracing (from the OTEL_* environment), /metrics, /healthz and /readyz, and a graceful
// drain on SIGTERM.
//
//	cfg, err := executor.LoadConfig("awaken.yaml")
//	x, err := executor.New(cfg, executor.Options{URL: "nats://127.0.0.1:4222", User: "brain-exec", Password: pw})
//	err = executor.Register(x, executor.ToolFunc("shout", "Shouts `text` back.",
//		contracts.CapabilityReplaySafe, func(ctx context.Context, a ShoutArgs) (string, error) {
//			return strings.ToUpper(a.Text) + "!", nil
//		}))
//	err = x.Run(ctx) // until ctx ends or SIGTERM/SIGINT, then drains
//
// The host configuration decides which tool ids exist, that they run in the Brain, their
// timeout and their recovery policy: a tool you register but the configuration does not
// name is never called. The model-visible JSON Schema of a typed tool is derived from its
// argument type, and the model's arguments are decoded into that type strictly.
//
// The package links no NATS server: a platform binary stays a NATS client.
package executor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/brainexec"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/toolreg"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/executor/tool"
)

// ServiceName is the executor's service name: its NATS connection is "awaken-brain-exec",
// its reply inboxes _INBOX_brain-exec (what the brain-exec user of deploy/nats/auth.conf
// may use), its CloudEvent source awaken/brain-exec.
const ServiceName = contracts.ServiceBrainExec

// DefaultDrainTimeout bounds the graceful drain of [Executor.Run].
const DefaultDrainTimeout = 30 * time.Second

// Registration errors, for errors.Is: an id registered twice (every call to it then fails
// as ambiguous), and every other invalid registration (bad id, capability or argument
// type).
var (
	ErrDuplicateTool = toolreg.ErrDuplicateTool
	ErrInvalidTool   = toolreg.ErrInvalidTool
)

// Config is the host configuration (the same file every awaken service loads).
type Config struct{ c *config.Config }

// LoadConfig reads and validates a host configuration file (YAML or JSON). Relative paths
// in it resolve against the file's directory.
func LoadConfig(path string) (*Config, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return &Config{c: c}, nil
}

// ParseConfig reads and validates a host configuration given as a value (YAML or JSON).
func ParseConfig(data []byte) (*Config, error) {
	c, err := config.Parse(data)
	if err != nil {
		return nil, err
	}
	return &Config{c: c}, nil
}

// The tool-author vocabulary is defined once, in pkg/executor/tool (a leaf package, so that
// the stock brain-exec, which this package runs, can use it without importing this
// package); the names below are that vocabulary itself — type aliases, and for functions a
// one-line call, since Go cannot alias a function — so executor.Tool and tool.Tool are the
// same type, and a value built with either is accepted by both.

// Tool is a typed Brain tool: A is its argument type (the model-visible JSON Schema is
// derived from it, and calls are decoded into it strictly), O its output type. See
// [tool.Tool] for how its output renders and what its errors mean.
type Tool[A, O any] = tool.Tool[A, O]

// ToolFunc makes a [Tool] of a function (see [tool.ToolFunc]).
func ToolFunc[A, O any](id, description string, capability contracts.ToolRecoveryCapability,
	fn func(ctx context.Context, args A) (O, error)) Tool[A, O] {
	return tool.ToolFunc(id, description, capability, fn)
}

// Reconciler is implemented by a [Tool] that can find out, after a crash, whether a call
// of it ran (see [tool.Reconciler]; docs/integration.md has an example).
type Reconciler[A any] = tool.Reconciler[A]

// WithReconcile returns t with the reconcile function fn (see [tool.WithReconcile]):
//
//	executor.Register(x, executor.WithReconcile(charge,
//		func(ctx context.Context, a ChargeArgs) (contracts.Reconciled, error) {
//			return lookUpCharge(ctx, executor.IdempotencyKey(ctx)) // ran, not_run or unknown
//		}))
func WithReconcile[A, O any](t Tool[A, O], fn func(ctx context.Context, args A) (contracts.Reconciled, error)) Tool[A, O] {
	return tool.WithReconcile(t, fn)
}

// Invocation is the call a tool body runs for: its run, step, index and call ids, its
// operation id and [Invocation.IdempotencyKey], its configured tool id, arguments and
// attempt (see [tool.Invocation]).
type Invocation = tool.Invocation

// InvocationFrom returns the invocation a tool body runs for, false outside a tool body.
func InvocationFrom(ctx context.Context) (Invocation, bool) { return tool.InvocationFrom(ctx) }

// WithInvocation returns ctx carrying inv, as the executor hands it to a tool body: a test
// of a tool's Call uses it to give the body the view the executor gives it.
func WithInvocation(ctx context.Context, inv Invocation) context.Context {
	return tool.WithInvocation(ctx, inv)
}

// OperationID returns the operation id of the call a tool body runs for, "" outside one.
func OperationID(ctx context.Context) string { return tool.OperationID(ctx) }

// IdempotencyKey returns the idempotency key of the call a tool body runs for, "" outside
// a tool body: the same on every execution of the call, so an external system that
// deduplicates by it performs the effect once (see [tool.IdempotencyKey]):
//
//	req.Header.Set("Idempotency-Key", executor.IdempotencyKey(ctx))
func IdempotencyKey(ctx context.Context) string { return tool.IdempotencyKey(ctx) }

// ReportProgress tells the platform how far a long tool body is (see
// [tool.ReportProgress]): published throttled as io.awaken.tool.progress.v1 on the run's
// events subject, never part of the result, never blocking; outside a tool body it does
// nothing.
func ReportProgress(ctx context.Context, progress, total float64, message string) {
	tool.ReportProgress(ctx, progress, total, message)
}

// ReportCost tells the executor what this call cost against the host's budget limits
// (see [tool.ReportCost]): the budget is charged it instead of the tool's configured cost,
// which was only the reservation.
func ReportCost(ctx context.Context, amount float64) { tool.ReportCost(ctx, amount) }

// Options says how the executor connects and what it serves besides your tools.
type Options struct {
	// URL of the NATS server (comma-separated for a cluster); tls:// URLs use TLS.
	URL string
	// Credentials: a credentials file (JWT and nkey seed), a user and password, or a token.
	CredsFile string
	User      string
	Password  string
	Token     string
	// TLS, when set, is the client TLS configuration (root CAs, client certificate).
	TLS *tls.Config
	// NATSOptions are applied last to the connection (for anything the fields above do
	// not name).
	NATSOptions []nats.Option
	// HTTPAddr is the operations listener: /metrics, /healthz and /readyz ("" disables it).
	HTTPAddr string
	// Ensure creates or updates the streams and buckets at start; false (the default)
	// waits for `awaken setup` to have done it, as a least-privilege user must.
	Ensure bool
	// Builtins also serves the example builtin tools (echo, counter, …) of the stock
	// brain-exec.
	Builtins bool
	// Log receives the JSON log (default stderr) at LogLevel (default info).
	Log      io.Writer
	LogLevel string
}

// Executor is a Brain executor under construction: register tools, then [Executor.Run] or
// [Executor.Start].
type Executor struct {
	cfg  *Config
	opts Options
	reg  *toolreg.Registry
	log  zerolog.Logger
}

// New returns an executor for cfg; nothing connects until Start or Run.
func New(cfg *Config, opts Options) (*Executor, error) {
	if cfg == nil || cfg.c == nil {
		return nil, errors.New("executor: no configuration")
	}
	if opts.URL == "" {
		return nil, errors.New("executor: no NATS URL")
	}
	if opts.CredsFile != "" && (opts.User != "" || opts.Token != "") || opts.User != "" && opts.Token != "" {
		return nil, errors.New("executor: give one of a credentials file, a user or a token")
	}
	return &Executor{cfg: cfg, opts: opts, reg: toolreg.NewRegistry(),
		log: servicerun.NewLogger(opts.Log, opts.LogLevel)}, nil
}

// Register adds a typed tool. Registering an id twice makes it ambiguous: every call to it
// then fails, so a wiring mistake never silently picks one body.
func Register[A, O any](x *Executor, t Tool[A, O]) error {
	return toolreg.Register[A, O](x.reg, t)
}

// Descriptors returns the descriptor of every registered tool, sorted by id.
func (x *Executor) Descriptors() []contracts.ToolDescriptor { return x.reg.Descriptors() }

// natsOptions turns the credentials and TLS settings into connection options.
func (x *Executor) natsOptions() []nats.Option {
	var o []nats.Option
	switch {
	case x.opts.CredsFile != "":
		o = append(o, nats.UserCredentials(x.opts.CredsFile))
	case x.opts.User != "":
		o = append(o, nats.UserInfo(x.opts.User, x.opts.Password))
	case x.opts.Token != "":
		o = append(o, nats.Token(x.opts.Token))
	}
	if x.opts.TLS != nil {
		o = append(o, nats.Secure(x.opts.TLS))
	}
	return append(o, x.opts.NATSOptions...)
}

// Running is a started executor.
type Running struct {
	st              *servicerun.Stack
	shutdownTracing func(context.Context) error
	log             zerolog.Logger
}

// Start connects, waits for (or ensures) the streams and buckets, and starts consuming
// Brain executor requests. It logs "ready" once it does, as every awaken service does.
func (x *Executor) Start(ctx context.Context) (*Running, error) {
	tp, shutdownTracing, err := telemetry.TracerProviderFromEnv(ctx, "awaken-"+ServiceName, nil)
	if err != nil {
		return nil, fmt.Errorf("executor: tracing: %w", err)
	}
	// The records it writes follow the configuration's formats setting, as every
	// service's do (docs/operations.md, "Upgrades and compatibility").
	contracts.SetNewFormats(x.cfg.c.WritesNewFormats())
	st, err := servicerun.Start(ctx, servicerun.Options{
		Config: x.cfg.c, Services: []string{contracts.ServiceBrainExec}, Start: x.startBrain,
		Dial: servicerun.ServiceDialer(x.opts.URL, x.natsOptions()...), Log: x.log,
		NoEnsure: !x.opts.Ensure, TracerProvider: tp, HTTPAddr: x.opts.HTTPAddr,
	})
	if err != nil {
		_ = shutdownTracing(context.WithoutCancel(ctx))
		return nil, err
	}
	x.log.Info().Str("service", ServiceName).Str("nats_url", x.opts.URL).Msg("ready")
	return &Running{st: st, shutdownTracing: shutdownTracing, log: x.log}, nil
}

// startBrain starts the Brain executor on the registered tools (and the example tools
// with [Options.Builtins]), as the brain-exec service does.
func (x *Executor) startBrain(ctx context.Context, _ *servicerun.Stack, _ string, env *pipeline.Env) (servicerun.Service, error) {
	reg, err := brainexec.Registry(ctx, env, x.reg, x.opts.Builtins)
	if err != nil {
		return nil, err
	}
	return brainexec.Start(ctx, env, reg)
}

// Ready reports whether the executor is connected and consuming (what /readyz answers).
func (r *Running) Ready(ctx context.Context) error { return r.st.Ready(ctx) }

// HTTPAddr is the bound address of the operations listener ("" when off).
func (r *Running) HTTPAddr() string { return r.st.HTTPAddr() }

// Stop stops taking requests and waits, bounded by ctx, for the calls in flight to commit
// and announce their outcomes; then it flushes the buffered spans.
func (r *Running) Stop(ctx context.Context) error {
	r.log.Info().Str("service", ServiceName).Msg("draining")
	err := r.st.Stop(ctx)
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if ferr := r.shutdownTracing(flushCtx); ferr != nil {
		r.log.Warn().Err(ferr).Msg("flushing traces failed")
	}
	return err
}

// Run starts the executor and serves until ctx ends or the process gets SIGTERM or
// SIGINT, then drains for at most [DefaultDrainTimeout], logging which calls it waits
// for. A second signal stops at once: the calls in flight are left as after a crash
// (redelivered; a never-replay call that had started ends indeterminate). A third is left
// to the runtime's default, which kills the process.
func (x *Executor) Run(ctx context.Context) error {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	return x.run(ctx, sigs)
}

// run is Run with the signals as a channel.
func (x *Executor) run(ctx context.Context, sigs chan os.Signal) error {
	drain, now, release := servicerun.WatchStopSignals(ctx, sigs)
	defer release()
	return x.RunUntil(drain, now)
}

// RunUntil starts the executor and serves until ctx ends, then drains for at most
// [DefaultDrainTimeout]; a close of now stops at once instead (the calls in flight are
// left as after a crash). It watches no signal: it is Run for a caller that owns the
// process's signals — a second watcher of the same SIGTERM would read it as the second
// signal once the first had ended ctx, and stop at once.
func (x *Executor) RunUntil(ctx context.Context, now <-chan struct{}) error {
	r, err := x.Start(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	<-ctx.Done()
	err = servicerun.StopGracefully(r.st, r.log.With().Str("service", ServiceName).Logger(), DefaultDrainTimeout, now)
	flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ferr := r.shutdownTracing(flushCtx); ferr != nil {
		r.log.Warn().Err(ferr).Msg("flushing traces failed")
	}
	return err
}
