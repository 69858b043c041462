package sandbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// errTimeout is the cancellation cause of a call that reached its time limit; it lets
// the engine tell the tool's own limit from the caller's deadline.
var errTimeout = errors.New("tool time limit reached")

// Request is one tool call to run in the sandbox.
type Request struct {
	// ToolID selects a module previously given to Load.
	ToolID string
	// OperationID is the call's durable operation id ({batch_id}:{call_id}). It is
	// given to the module in the AWAKEN_OPERATION_ID environment variable so a tool can
	// tell its calls apart. It must not contain a NUL byte; empty omits it.
	OperationID string
	// IdempotencyKey is the call's idempotency key (the same for every attempt), given in
	// AWAKEN_IDEMPOTENCY_KEY for the tool to send to a system that deduplicates requests.
	// It must not contain a NUL byte; empty omits it.
	IdempotencyKey string
	// Args is the tool's JSON arguments, given to the module on stdin unchanged.
	Args []byte
}

// Result is the outcome of a call whose module exited with status 0.
type Result struct {
	// Stdout is everything the module wrote to stdout (at most its MaxOutputBytes).
	Stdout []byte
	// IsJSON reports whether Stdout is one valid JSON value (surrounding whitespace
	// allowed), so the service can embed it as JSON rather than as text.
	IsJSON bool
	// Stderr is what the module wrote to stderr, capped at MaxStderrBytes; tools may
	// log warnings there even on success.
	Stderr string
	// PeakMemoryBytes is the largest linear-memory size the module reached.
	PeakMemoryBytes uint64
}

// Stats is a snapshot of the engine's counters, for metrics and tests.
type Stats struct {
	// Compilations counts modules compiled to machine code; a Load whose module
	// content is already compiled does not add to it.
	Compilations uint64
	// CachedModules is the number of distinct compiled modules held (by content hash).
	CachedModules int
	// LoadedTools is the number of tool ids that can be invoked.
	LoadedTools int
	// Calls counts Invoke calls that reached a loaded tool.
	Calls uint64
}

// Engine runs WebAssembly WASI preview 1 tool modules in isolation.
//
// One Engine holds one wazero runtime and its compiled modules, shared by every tool
// and every call. Each call gets a fresh module instance, so nothing a call does
// (globals, heap, files) is visible to another. The only host functions a module can
// reach are wasi_snapshot_preview1's: no network (WASI preview 1 has no socket
// creation, and no pre-opened sockets are given), no host filesystem (no pre-opened
// directories except an optional per-call empty scratch directory), no host environment
// (only AWAKEN_TOOL_ID, AWAKEN_OPERATION_ID and AWAKEN_IDEMPOTENCY_KEY are set), and real clocks and
// cryptographic randomness but no time-zone database.
//
// All methods are safe for concurrent use. A module that traps, loops, exhausts its
// memory or floods its output fails its own call and leaves the engine serving others.
type Engine struct {
	opts    EngineOptions
	runtime wazero.Runtime
	// releaseCache releases the engine's compilation cache (see openCache).
	releaseCache func(context.Context) error
	wasi         api.Module
	slots        chan struct{}
	closing      context.Context
	stop         context.CancelCauseFunc

	mu       sync.Mutex
	closed   bool
	released bool
	tools    map[string]*tool
	modules  map[[sha256.Size]byte]*compiledModule
	inflight sync.WaitGroup // Load and Invoke calls in progress

	compilations atomic.Uint64
	calls        atomic.Uint64

	// Test hooks, nil in production: beforeStart runs just before a call's _start,
	// observe sees every call's limiters after _start returned.
	beforeStart func()
	observe     func(*callRecord)
}

// compiledModule is one module binary compiled to machine code, shared by every tool
// whose file has the same content.
type compiledModule struct {
	hash           [sha256.Size]byte
	ready          chan struct{} // closed once mod or err is set
	mod            wazero.CompiledModule
	minMemoryPages uint32
	err            error
	refs           int // tools and calls using it; guarded by Engine.mu
}

// tool is a loaded tool: its resolved configuration and its compiled module.
type tool struct {
	id     string
	cfg    ModuleConfig
	module *compiledModule
}

// callRecord holds the per-call limiters, for classification and the test hook.
type callRecord struct {
	stdout     *outputBuffer
	stderr     *headBuffer
	memory     *memoryGuard
	scratchDir string
}

// NewEngine creates an engine with its runtime, its compilation cache (on disk when
// opts.CacheDir is set) and the WASI preview 1 host module. Close releases them.
func NewEngine(ctx context.Context, opts EngineOptions) (*Engine, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cache, releaseCache, err := openCache(opts.CacheDir)
	if err != nil {
		return nil, err
	}
	cfg := wazero.NewRuntimeConfig().
		WithCoreFeatures(api.CoreFeaturesV2).
		// Stop a module when its call's context ends: the time limit, an output
		// overflow, the caller giving up, or Close.
		WithCloseOnContextDone(true).
		WithCompilationCache(cache)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		return nil, errors.Join(fmt.Errorf("sandbox: instantiate WASI: %w", err), rt.Close(ctx), releaseCache(ctx))
	}
	closing, stop := context.WithCancelCause(context.Background())
	return &Engine{
		opts:         opts,
		runtime:      rt,
		releaseCache: releaseCache,
		wasi:         rt.Module(wasi_snapshot_preview1.ModuleName),
		slots:        make(chan struct{}, opts.MaxConcurrentCalls),
		closing:      closing,
		stop:         stop,
		tools:        make(map[string]*tool),
		modules:      make(map[[sha256.Size]byte]*compiledModule),
	}, nil
}

// Load reads, validates and compiles the module of toolID and makes it invocable with
// cfg, replacing any previous module or configuration of that tool; calls already
// running finish on what they started with.
//
// Compiled code is cached by content hash: loading a file whose content is already
// compiled (under any tool id) does not compile again, and concurrent Loads of the same
// content compile it once. A missing or unreadable file yields an error wrapping
// ErrModuleUnavailable; a file that is not an acceptable module yields one wrapping
// both ErrModuleUnavailable and ErrModuleInvalid; a bad cfg, ErrInvalidConfig. On error
// the tool's previous state is kept.
func (e *Engine) Load(ctx context.Context, toolID string, cfg ModuleConfig) error {
	if toolID == "" || strings.ContainsRune(toolID, 0) {
		return fmt.Errorf("%w: tool id %q must be non-empty and contain no NUL", ErrInvalidConfig, toolID)
	}
	cfg, err := cfg.resolve(e.opts)
	if err != nil {
		return fmt.Errorf("tool %q: %w", toolID, err)
	}
	if !e.enter() {
		return ErrClosed
	}
	defer e.inflight.Done()

	binary, err := e.readModule(toolID, cfg.Path)
	if err != nil {
		return err
	}
	m, err := e.acquireModule(ctx, sha256.Sum256(binary), binary)
	if err != nil {
		if errors.Is(err, ErrClosed) || ctx.Err() != nil {
			return err
		}
		return fmt.Errorf("%w: %w: tool %q (%s): %w", ErrModuleUnavailable, ErrModuleInvalid, toolID, cfg.Path, err)
	}
	if need := uint64(m.minMemoryPages) * wasmPageSize; need > cfg.memoryLimitBytes() {
		e.release(m)
		return invalidModule(toolID, "module needs %d KiB of initial memory, above its limit of %d MiB", need>>10, cfg.MemoryLimitMiB)
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.release(m)
		return ErrClosed
	}
	old := e.tools[toolID]
	e.tools[toolID] = &tool{id: toolID, cfg: cfg, module: m}
	e.mu.Unlock()
	if old != nil {
		e.release(old.module)
	}
	return nil
}

// Unload removes toolID so later calls fail with ErrModuleUnavailable; calls already
// running finish normally. The compiled module is freed once nothing uses it. Unloading
// an unknown tool does nothing.
func (e *Engine) Unload(toolID string) {
	e.mu.Lock()
	old := e.tools[toolID]
	delete(e.tools, toolID)
	e.mu.Unlock()
	if old != nil {
		e.release(old.module)
	}
}

// Invoke runs one call of req.ToolID in a fresh module instance: req.Args on stdin,
// argv = [tool id], the environment holding only AWAKEN_TOOL_ID and
// AWAKEN_OPERATION_ID and AWAKEN_IDEMPOTENCY_KEY, and a scratch directory at /scratch when the tool's
// configuration asks for one.
//
// Exit status 0 yields a Result. A failure of the module yields a *ModuleError (see
// Kind); an unknown tool, an error wrapping ErrModuleUnavailable; an invalid request,
// ErrInvalidRequest; an engine closed before the call started, ErrClosed. Waiting for a
// free call slot (EngineOptions.MaxConcurrentCalls) ends with ctx, as a KindCanceled
// ModuleError.
//
// Invoke is not idempotent by itself: each call runs the module again. Because a module
// can affect nothing outside its own call, rerunning it is harmless, and tools get
// the operation id for their own deduplication.
func (e *Engine) Invoke(ctx context.Context, req Request) (Result, error) {
	if strings.ContainsRune(req.OperationID, 0) || strings.ContainsRune(req.IdempotencyKey, 0) {
		return Result{}, fmt.Errorf("%w: operation id or idempotency key contains a NUL byte", ErrInvalidRequest)
	}
	if !e.enter() {
		return Result{}, ErrClosed
	}
	defer e.inflight.Done()
	e.mu.Lock()
	t := e.tools[req.ToolID]
	if t != nil {
		t.module.refs++
	}
	e.mu.Unlock()
	if t == nil {
		return Result{}, fmt.Errorf("%w: tool %q is not loaded", ErrModuleUnavailable, req.ToolID)
	}
	defer e.release(t.module)
	e.calls.Add(1)

	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		return Result{}, canceled(t.id, "canceled while waiting for a call slot", context.Cause(ctx))
	case <-e.closing.Done():
		return Result{}, canceled(t.id, "engine closed while waiting for a call slot", ErrClosed)
	}
	defer func() { <-e.slots }()
	return e.run(ctx, t, req)
}

// Stats returns a snapshot of the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{
		Compilations:  e.compilations.Load(),
		CachedModules: len(e.modules),
		LoadedTools:   len(e.tools),
		Calls:         e.calls.Load(),
	}
}

// Close stops the engine: new calls fail with ErrClosed, running calls are stopped and
// fail with KindCanceled, and once they have returned the runtime and the compilation
// cache are released (the on-disk cache is kept). If ctx ends before the running calls
// have returned, Close returns an error and keeps the resources; calling Close again
// finishes the job. Close after a completed Close returns nil.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stop(ErrClosed)

	done := make(chan struct{})
	go func() {
		e.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("sandbox: close: calls still running: %w", ctx.Err())
	}

	e.mu.Lock()
	if e.released {
		e.mu.Unlock()
		return nil
	}
	e.released = true
	e.tools = map[string]*tool{}
	e.modules = map[[sha256.Size]byte]*compiledModule{}
	e.mu.Unlock()
	// Closing the runtime closes its compiled modules and the WASI host module.
	return errors.Join(e.runtime.Close(ctx), e.releaseCache(ctx))
}

// processCaches holds the on-disk compilation caches open in this process, by
// directory, so that engines with the same CacheDir share compiled machine code in
// memory too: a module another engine of the process holds is neither compiled nor read
// from disk again. This matters most where one process starts many engines (the
// end-to-end tests start a whole pipeline per test, and compiling a Go module under the
// race detector takes tens of seconds).
var processCaches = struct {
	sync.Mutex
	byDir map[string]*sharedCache
}{byDir: map[string]*sharedCache{}}
