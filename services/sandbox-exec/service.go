// Package sandboxexec is the Sandbox executor: it runs the WebAssembly modules of tools
// whose trusted target is sandbox, through the shared executor hop of internal/execcore
// (entry claim, crash recovery by policy, timeout, commit, announce) and the wazero engine
// of internal/sandbox.
//
// A sandbox tool is a WASI preview 1 command: it reads the call's arguments as JSON on
// stdin and writes its result to stdout, which becomes the text of the output (a JSON
// result stays JSON text). It sees no network and no host filesystem; its memory, run time
// and output are bounded by its configuration.
//
// When the sandbox is disabled in the configuration, or the WebAssembly engine cannot be
// created, every call completes with the execution error "sandbox executor unavailable for
// tool {id}": a sandboxed tool never falls back to running in the Brain.
package sandboxexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/internal/sandbox"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// ServiceName is the service's name: CloudEvent source "awaken/sandbox-exec", fault-hook
// name and log field.
const ServiceName = contracts.ServiceSandboxExec

// timeoutGrace is added to a module's own time limit for the executor's timeout, so the
// engine — which stops the module and reports the timeout itself — normally ends the call
// first, and the executor's timeout only covers time spent outside the module.
const timeoutGrace = 2 * time.Second

// Engine is what the service needs of the WebAssembly runtime. *sandbox.Engine implements
// it; tests and alternative runtimes may provide their own.
type Engine interface {
	// Load makes toolID invocable with cfg. An error wrapping sandbox.ErrModuleUnavailable
	// means the module cannot run (missing, unreadable, invalid).
	Load(ctx context.Context, toolID string, cfg sandbox.ModuleConfig) error
	// Invoke runs one call (see sandbox.Engine.Invoke for the error contract).
	Invoke(ctx context.Context, req sandbox.Request) (sandbox.Result, error)
	// Close stops the runtime once running calls have returned, bounded by ctx.
	Close(ctx context.Context) error
}

// Service is a running Sandbox executor.
type Service struct {
	exec   *execcore.Executor
	engine Engine // nil when the sandbox is unavailable
}

// Start starts the Sandbox executor on the durable consumer sandbox-exec. With
// executors.sandbox.enabled it creates a wazero engine (compilation cache in
// executors.sandbox.cache_dir when set) and loads every configured sandbox tool's module
// with its limits; a module that fails to load is reported and retried at its next call.
// Disabled — or when the engine cannot be created — every call completes with "sandbox
// executor unavailable for tool {id}". opts tune the consumer.
//
// ctx is the hard-stop context; use [Service.Stop] to shut down gracefully.
func Start(ctx context.Context, env *pipeline.Env, opts ...execcore.Option) (*Service, error) {
	if env == nil || env.Config == nil {
		return nil, fmt.Errorf("%s: nil environment or configuration", ServiceName)
	}
	sc := env.Config.Executors.Sandbox
	log := env.Log
	if !sc.Enabled {
		log.Info().Msg("sandbox disabled by configuration; sandbox calls will complete as unavailable")
		return StartWithEngine(ctx, env, nil, opts...)
	}
	engine, err := sandbox.NewEngine(ctx, sandbox.EngineOptions{
		CacheDir:              sc.CacheDir,
		DefaultMemoryLimitMiB: sc.DefaultMemoryLimitMiB,
		DefaultTimeout:        sc.DefaultTimeout.D(),
		DefaultMaxOutputBytes: execcore.MaxOutputBytes,
		MaxConcurrentCalls:    sc.Workers,
		OnInternalError: func(err error) {
			log.Warn().Err(err).Msg("sandbox internal error")
		},
	})
	if err != nil {
		log.Error().Err(err).Msg("WebAssembly engine unavailable; sandbox calls will complete as unavailable")
		return StartWithEngine(ctx, env, nil, opts...)
	}
	s, err := StartWithEngine(ctx, env, engine, opts...)
	if err != nil {
		return nil, errors.Join(err, engine.Close(context.WithoutCancel(ctx)))
	}
	return s, nil
}

// StartWithEngine is [Start] with the runtime supplied by the caller; a nil engine makes
// every call complete as unavailable. The service closes the engine on [Service.Stop].
func StartWithEngine(ctx context.Context, env *pipeline.Env, engine Engine, opts ...execcore.Option) (*Service, error) {
	if env == nil || env.Config == nil {
		return nil, fmt.Errorf("%s: nil environment or configuration", ServiceName)
	}
	inv := newInvoker(env.Config, engine)
	if engine != nil {
		inv.loadAll(ctx, env.Log)
	}
	sc := env.Config.Executors.Sandbox
	cfg := env.Config
	o := execcore.Options{
		Service:            ServiceName,
		Target:             contracts.TargetSandbox,
		Durable:            contracts.ConsumerSandboxExec,
		Invoker:            inv,
		Delivery:           []bus.DeliveryOption{bus.WithWorkers(sc.Workers)},
		DefaultTimeout:     sc.DefaultTimeout.D(),
		UnavailableRetries: sc.UnavailableRetries,
		ToolTimeout: func(toolID string) time.Duration {
			limit := sc.DefaultTimeout.D()
			if t, ok := cfg.Tool(toolID); ok && t.Timeout > 0 {
				limit = t.Timeout.D()
			}
			if limit <= 0 {
				return 0
			}
			return limit + timeoutGrace
		},
	}
	x, err := execcore.StartConfigured(ctx, env, o, opts...)
	if err != nil {
		return nil, err
	}
	return &Service{exec: x, engine: engine}, nil
}

// Stop stops taking requests, waits (bounded by ctx) for the calls in flight to commit and
// announce their outcomes, then closes the WebAssembly engine.
func (s *Service) Stop(ctx context.Context) error {
	err := s.exec.Stop(ctx)
	if s.engine != nil {
		err = errors.Join(err, s.engine.Close(ctx))
	}
	return err
}

// Available reports whether the service runs modules (false: sandbox disabled or engine
// unavailable, so every call completes as unavailable).
func (s *Service) Available() bool { return s.engine != nil }

// invoker runs sandbox calls on the engine.
type invoker struct {
	cfg    *config.Config
	engine Engine

	mu     sync.Mutex
	loaded map[string]bool // tool id → module loaded
}

func newInvoker(cfg *config.Config, engine Engine) *invoker {
	return &invoker{cfg: cfg, engine: engine, loaded: map[string]bool{}}
}

// loadAll loads every configured sandbox module up front so the first call does not pay
// for compilation, and so a missing module is reported at start.
func (i *invoker) loadAll(ctx context.Context, log zerolog.Logger) {
	for _, t := range i.cfg.Tools {
		if t.Target != contracts.TargetSandbox || t.Module == "" {
			continue
		}
		if err := i.load(ctx, t); err != nil {
			log.Warn().Err(err).Str("tool_id", t.ID).Str("module", i.cfg.ModulePath(t)).
				Msg("sandbox module not loaded; its calls will be retried and then fail as unavailable")
		}
	}
}

func (i *invoker) load(ctx context.Context, t config.Tool) error {
	err := i.engine.Load(ctx, t.ID, sandbox.ModuleConfig{
		Path:           i.cfg.ModulePath(t),
		MemoryLimitMiB: t.MemoryLimitMiB,
		Timeout:        t.Timeout.D(),
		MaxOutputBytes: t.MaxOutputBytes,
		Scratch:        t.Scratch,
	})
	i.mu.Lock()
	i.loaded[t.ID] = err == nil
	i.mu.Unlock()
	return err
}

func (i *invoker) isLoaded(id string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.loaded[id]
}

// Invoke runs one sandbox call: arguments as JSON on stdin, stdout as the output's text.
func (i *invoker) Invoke(ctx context.Context, inv execcore.Invocation) (contracts.ToolOutput, error) {
	if i.engine == nil {
		return contracts.ToolOutput{}, contracts.ExecutionFailed("sandbox executor unavailable for tool " + inv.ToolID)
	}
	t, ok := i.cfg.Tool(inv.ToolID)
	if !ok || t.Target != contracts.TargetSandbox || t.Module == "" {
		return contracts.ToolOutput{}, contracts.ErrUnknownTool(inv.ToolID)
	}
	args := bytes.TrimSpace(inv.Arguments)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	// The configured parameters schema is the contract the model was shown: a call that
	// breaks it is answered without entering the module.
	if err := t.ValidateArguments(args); err != nil {
		return contracts.ToolOutput{}, err
	}
	if !i.isLoaded(t.ID) {
		if err := i.load(ctx, t); err != nil {
			return contracts.ToolOutput{}, mapError(ctx, err)
		}
	}
	if err := inv.BeginBody(ctx); err != nil {
		return contracts.ToolOutput{}, err
	}
	res, err := i.engine.Invoke(ctx, sandbox.Request{ToolID: t.ID, OperationID: inv.OperationID,
		IdempotencyKey: inv.IdempotencyKey(), Args: args})
	if err != nil {
		if errors.Is(err, sandbox.ErrModuleUnavailable) {
			i.mu.Lock()
			i.loaded[t.ID] = false // reload at the next attempt: the file may be back
			i.mu.Unlock()
		}
		return contracts.ToolOutput{}, mapError(ctx, err)
	}
	return contracts.TextOutput("", renderStdout(res)), nil
}

// mapError maps an engine error to the tool error the model sees: a module that could not
// run at all (missing, invalid, not instantiable, engine closed) is unavailable before
// dispatch — no tool code ran, so the executor may retry it; everything the module did
// itself is an execution error, its own time limit the execution error "timed out".
func mapError(ctx context.Context, err error) error {
	var me *sandbox.ModuleError
	switch {
	case errors.Is(err, sandbox.ErrModuleUnavailable):
		return contracts.UnavailableBeforeDispatch(err.Error())
	case errors.Is(err, sandbox.ErrClosed) && !errors.As(err, &me):
		return contracts.UnavailableBeforeDispatch("sandbox engine is closed")
	case errors.As(err, &me) && me.Kind == sandbox.KindTimeout:
		return contracts.ExecutionFailed(execcore.TimedOutMessage)
	case errors.As(err, &me) && me.Kind == sandbox.KindCanceled && ctx.Err() != nil:
		return ctx.Err() // the executor is stopping or the call's own timeout fired
	default:
		return contracts.ExecutionFailed(err.Error())
	}
}

// renderStdout is the text of a module's stdout: JSON trimmed of surrounding white space,
// anything else as written, with invalid UTF-8 replaced so the output stays valid JSON text.
func renderStdout(res sandbox.Result) string {
	out := res.Stdout
	if res.IsJSON {
		out = bytes.TrimSpace(out)
	}
	if utf8.Valid(out) {
		return string(out)
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}
