package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
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

// sharedCache is a wazero compilation cache used by refs engines; the last release
// closes it. wazero keeps a compiled module in memory while any runtime holds it.
type sharedCache struct {
	cache wazero.CompilationCache
	dir   string
	refs  int // guarded by processCaches
}

// openCache returns the compilation cache of an engine and the function that releases
// it: the process's shared cache of dir (opened on first use), or a private in-memory
// one when dir is empty.
func openCache(dir string) (wazero.CompilationCache, func(context.Context) error, error) {
	if dir == "" {
		cache := wazero.NewCompilationCache()
		return cache, cache.Close, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: compilation cache in %s: %w", dir, err)
	}
	processCaches.Lock()
	defer processCaches.Unlock()
	c, ok := processCaches.byDir[abs]
	if !ok {
		cache, err := wazero.NewCompilationCacheWithDir(abs)
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox: compilation cache in %s: %w", dir, err)
		}
		c = &sharedCache{cache: cache, dir: abs}
		processCaches.byDir[abs] = c
	}
	c.refs++
	return c.cache, c.release, nil
}

// release ends one engine's use of the cache and closes it after the last one.
func (c *sharedCache) release(ctx context.Context) error {
	processCaches.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(processCaches.byDir, c.dir)
	}
	processCaches.Unlock()
	if !last {
		return nil
	}
	return c.cache.Close(ctx)
}

// enter registers a Load or Invoke in progress, or reports false once Close has begun.
// Registering under the mutex orders every Add before Close's Wait.
func (e *Engine) enter() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.inflight.Add(1)
	return true
}

// readModule reads a module file, refusing directories and files above MaxModuleBytes.
func (e *Engine) readModule(toolID, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q: %w", ErrModuleUnavailable, toolID, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q: %w", ErrModuleUnavailable, toolID, err)
	}
	if st.IsDir() {
		return nil, invalidModule(toolID, "%s is a directory", path)
	}
	if st.Size() > e.opts.MaxModuleBytes {
		return nil, invalidModule(toolID, "%s has %d bytes, above the limit of %d", path, st.Size(), e.opts.MaxModuleBytes)
	}
	binary, err := io.ReadAll(io.LimitReader(f, e.opts.MaxModuleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q: read %s: %w", ErrModuleUnavailable, toolID, path, err)
	}
	if int64(len(binary)) > e.opts.MaxModuleBytes {
		return nil, invalidModule(toolID, "%s grew above the limit of %d bytes while being read", path, e.opts.MaxModuleBytes)
	}
	return binary, nil
}

// acquireModule returns the compiled module of binary with one reference taken,
// compiling it unless it is cached or being compiled by another Load, which it then
// waits for.
func (e *Engine) acquireModule(ctx context.Context, hash [sha256.Size]byte, binary []byte) (*compiledModule, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	if m, ok := e.modules[hash]; ok {
		m.refs++
		e.mu.Unlock()
		select {
		case <-m.ready:
		case <-ctx.Done():
			e.release(m)
			return nil, ctx.Err()
		}
		if m.err != nil {
			e.release(m)
			return nil, m.err
		}
		return m, nil
	}
	m := &compiledModule{hash: hash, ready: make(chan struct{}), refs: 1}
	e.modules[hash] = m
	e.mu.Unlock()

	m.mod, m.minMemoryPages, m.err = e.compile(ctx, binary)
	close(m.ready)
	if m.err != nil {
		e.release(m)
		return nil, m.err
	}
	return m, nil
}

// release drops one reference to m; the last one removes it from the cache and frees
// its machine code. A failed compilation is removed at once so a later Load retries.
func (e *Engine) release(m *compiledModule) {
	e.mu.Lock()
	m.refs--
	last := m.refs == 0
	select {
	case <-m.ready:
		if (last || m.err != nil) && e.modules[m.hash] == m {
			delete(e.modules, m.hash)
		}
	default:
	}
	closed := e.released
	e.mu.Unlock()
	if last && m.mod != nil && !closed {
		// The runtime owns every compiled module and closes them all in Close.
		_ = m.mod.Close(context.Background())
	}
}

// compile compiles binary and checks that it is a WASI preview 1 command whose only
// imports are functions the WASI host module provides with the same signature.
func (e *Engine) compile(ctx context.Context, binary []byte) (wazero.CompiledModule, uint32, error) {
	e.compilations.Add(1)
	// Tables live in host memory outside the memory limit: bound them before compiling.
	binary, err := boundTables(binary)
	if err != nil {
		return nil, 0, err
	}
	cm, err := e.runtime.CompileModule(experimental.WithCompilationWorkers(ctx, e.opts.CompilationWorkers), binary)
	if err != nil {
		return nil, 0, fmt.Errorf("compile: %w", err)
	}
	minPages, err := e.checkModule(cm)
	if err == nil && hasStartSection(binary) {
		// A start function would run inside InstantiateModule, so a failure there
		// could no longer promise that no module code ran (KindInstantiate).
		err = errors.New("has a WebAssembly start function; a tool must do its work in _start")
	}
	if err != nil {
		_ = cm.Close(ctx)
		return nil, 0, err
	}
	return cm, minPages, nil
}

// checkModule enforces the shape of an acceptable tool module and returns the initial
// size of its memory in pages.
func (e *Engine) checkModule(cm wazero.CompiledModule) (uint32, error) {
	wasiFuncs := e.wasi.ExportedFunctionDefinitions()
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wasi_snapshot_preview1.ModuleName {
			return 0, fmt.Errorf("imports function %s.%s: only %s functions are provided (no network, no host extensions)", mod, name, wasi_snapshot_preview1.ModuleName)
		}
		def, ok := wasiFuncs[name]
		if !ok {
			return 0, fmt.Errorf("imports %s.%s, which this WASI preview 1 host does not provide", mod, name)
		}
		if !slices.Equal(def.ParamTypes(), f.ParamTypes()) || !slices.Equal(def.ResultTypes(), f.ResultTypes()) {
			return 0, fmt.Errorf("imports %s.%s with a signature that does not match WASI preview 1", mod, name)
		}
	}
	if mems := cm.ImportedMemories(); len(mems) > 0 {
		return 0, errors.New("imports a memory; a tool must define its own")
	}
	start, ok := cm.ExportedFunctions()["_start"]
	if !ok {
		return 0, errors.New("exports no _start function: not a WASI command module (reactor modules are not supported)")
	}
	if len(start.ParamTypes()) != 0 || len(start.ResultTypes()) != 0 {
		return 0, errors.New("_start must take and return nothing")
	}
	// WebAssembly 2.0 allows one memory, and WASI requires it exported as "memory";
	// knowing its minimum lets Load refuse a module that could never start within its
	// limit instead of failing every call.
	mems := cm.ExportedMemories()
	mem, ok := mems["memory"]
	if !ok {
		return 0, errors.New(`exports no "memory": WASI preview 1 requires the module's memory to be exported`)
	}
	return mem.Min(), nil
}

// hasStartSection reports whether a (validated) WebAssembly binary has a start section
// (id 8). wazero exposes no accessor for it, and the section headers are simple to walk.
func hasStartSection(binary []byte) bool {
	const startSectionID = 8
	pos := 8 // magic and version
	for pos < len(binary) {
		id := binary[pos]
		pos++
		size, n := readULEB32(binary[pos:])
		if n == 0 {
			return false
		}
		if id == startSectionID {
			return true
		}
		pos += n + int(size)
	}
	return false
}

// readULEB32 decodes an unsigned LEB128 value of at most 32 bits, returning it and the
// bytes it used, or 0 bytes when b does not start with one.
func readULEB32(b []byte) (uint32, int) {
	var v uint32
	for i := 0; i < len(b) && i < 5; i++ {
		v |= uint32(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// run executes one call of t and classifies its outcome.
func (e *Engine) run(ctx context.Context, t *tool, req Request) (Result, error) {
	cfg := t.cfg
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopOnClose := context.AfterFunc(e.closing, func() { cancel(ErrClosed) })
	defer stopOnClose()
	runCtx, cancelTimeout := context.WithTimeoutCause(callCtx, cfg.Timeout, errTimeout)
	defer cancelTimeout()

	rec := &callRecord{
		stdout: &outputBuffer{limit: cfg.MaxOutputBytes, onOverflow: func() { cancel(errOutputLimit) }},
		stderr: &headBuffer{limit: e.opts.MaxStderrBytes},
		memory: &memoryGuard{limit: cfg.memoryLimitBytes()},
	}
	// The instance is anonymous, so instances of one module run side by side and no
	// guest can import another. No start function runs at instantiation: _start is
	// called below, which tells a failure to instantiate from a failure of the tool.
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithArgs(t.id).
		WithEnv(EnvToolID, t.id).
		WithStdin(bytes.NewReader(req.Args)).
		WithStdout(rec.stdout).
		WithStderr(rec.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(sleepUntilDone(runCtx)).
		WithRandSource(rand.Reader)
	if req.OperationID != "" {
		mc = mc.WithEnv(EnvOperationID, req.OperationID)
	}
	if req.IdempotencyKey != "" {
		mc = mc.WithEnv(EnvIdempotencyKey, req.IdempotencyKey)
	}
	if cfg.Scratch {
		dir, err := os.MkdirTemp(e.opts.ScratchRoot, "awaken-scratch-")
		if err != nil {
			return Result{}, &ModuleError{Kind: KindInstantiate, ToolID: t.id, Detail: "create scratch directory: " + err.Error(), Err: err}
		}
		rec.scratchDir = dir
		defer e.removeScratch(dir)
		fsc, ok := wazero.NewFSConfig().(sysfs.FSConfig)
		if !ok {
			return Result{}, &ModuleError{Kind: KindInstantiate, ToolID: t.id, Detail: "this wazero cannot mount a custom file system"}
		}
		mc = mc.WithFSConfig(fsc.WithSysFSMount(newScratchFS(dir, cfg.ScratchMaxBytes), ScratchGuestPath))
	}

	mod, err := e.runtime.InstantiateModule(experimental.WithMemoryAllocator(runCtx, rec.memory), t.module.mod, mc)
	if err != nil {
		if me := stopped(t, runCtx); me != nil {
			return Result{}, me
		}
		return Result{}, &ModuleError{Kind: KindInstantiate, ToolID: t.id, Detail: "instantiate: " + firstLine(err.Error()), Err: err}
	}
	defer mod.Close(context.WithoutCancel(ctx))
	if e.beforeStart != nil {
		e.beforeStart()
	}
	_, callErr := mod.ExportedFunction("_start").Call(runCtx)
	if e.observe != nil {
		e.observe(rec)
	}
	return classify(t, runCtx, rec, callErr)
}

// classify turns the end of a call into a Result or a *ModuleError. Facts the engine
// observed itself (output overflow, its own deadline, a refused memory growth) take
// precedence over what the module reported. The output overflow is checked first and
// even after exit status 0, because the module was stopped or lost output either way;
// its wazero exit error is not wrapped (see stopped).
func classify(t *tool, runCtx context.Context, rec *callRecord, callErr error) (Result, error) {
	cfg := t.cfg
	stdout, overflowed, _, _ := rec.stdout.snapshot()
	stderr := rec.stderr.String()
	if overflowed {
		return Result{}, &ModuleError{Kind: KindOutputTooLarge, ToolID: t.id, Stderr: stderr,
			Detail: fmt.Sprintf("output exceeds %d bytes", cfg.MaxOutputBytes)}
	}
	var exit *sys.ExitError
	isExit := errors.As(callErr, &exit)
	if callErr == nil || (isExit && exit.ExitCode() == 0 && context.Cause(runCtx) == nil) {
		return Result{
			Stdout:          stdout,
			IsJSON:          len(stdout) > 0 && json.Valid(stdout),
			Stderr:          stderr,
			PeakMemoryBytes: rec.memory.peak.Load(),
		}, nil
	}
	if me := stopped(t, runCtx); me != nil {
		me.Stderr = stderr
		return Result{}, me
	}
	me := &ModuleError{ToolID: t.id, Stderr: stderr, Err: callErr}
	if isExit {
		me.ExitCode = exit.ExitCode()
	}
	switch {
	case rec.memory.refused.Load():
		me.Kind = KindMemory
		me.Detail = fmt.Sprintf("memory limit of %d MiB exceeded", cfg.MemoryLimitMiB)
	case isExit && isGoRuntimeCrash(me.ExitCode, stderr):
		me.Kind = KindTrap
		me.Detail = fmt.Sprintf("Go runtime crashed (exit status %d)", me.ExitCode)
	case isExit:
		me.Kind = KindExit
		me.Detail = fmt.Sprintf("exit status %d", me.ExitCode)
	default:
		me.Kind = KindTrap
		me.Detail = "trap: " + firstLine(callErr.Error())
	}
	return Result{}, me
}

// stopped returns the ModuleError of a call that the engine or the caller stopped (its
// context is done), or nil when the call ended by itself. wazero reports such a stop as
// a *sys.ExitError that matches context.Canceled or context.DeadlineExceeded; it is
// deliberately not wrapped, so that only KindCanceled errors match context errors and
// the service cannot mistake the tool's own time limit for its caller's deadline.
func stopped(t *tool, runCtx context.Context) *ModuleError {
	cause := context.Cause(runCtx)
	switch {
	case cause == nil:
		return nil
	case errors.Is(cause, errTimeout):
		return &ModuleError{Kind: KindTimeout, ToolID: t.id, Detail: fmt.Sprintf("timed out after %s", t.cfg.Timeout)}
	case errors.Is(cause, ErrClosed):
		return canceled(t.id, "engine closed during the call", ErrClosed)
	default:
		return canceled(t.id, "call canceled: "+cause.Error(), cause)
	}
}

// canceled builds a KindCanceled error wrapping cause.
func canceled(toolID, detail string, cause error) *ModuleError {
	return &ModuleError{Kind: KindCanceled, ToolID: toolID, Detail: detail, Err: cause}
}

// isGoRuntimeCrash recognises how Go's wasip1 runtime dies: exit status 2 after a
// "panic: " or "fatal error: " report followed by goroutine traces.
func isGoRuntimeCrash(code uint32, stderr string) bool {
	if code != 2 {
		return false
	}
	report := false
	for _, prefix := range []string{"panic: ", "fatal error: "} {
		if strings.HasPrefix(stderr, prefix) || strings.Contains(stderr, "\n"+prefix) {
			report = true
		}
	}
	return report && strings.Contains(stderr, "goroutine ")
}

// sleepUntilDone implements WASI sleeping (poll_oneoff on a clock) with the host's
// timers, cut short when the call's context ends: wazero can stop a module only when
// it is running WebAssembly, so a host-side sleep must not outlive the time limit.
func sleepUntilDone(ctx context.Context) sys.Nanosleep {
	return func(ns int64) {
		if ns <= 0 {
			return
		}
		timer := time.NewTimer(time.Duration(ns))
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
	}
}

// removeScratch deletes a call's scratch directory and reports a failure to
// OnInternalError; the call's result does not depend on it.
func (e *Engine) removeScratch(dir string) {
	if err := os.RemoveAll(dir); err != nil && e.opts.OnInternalError != nil {
		e.opts.OnInternalError(fmt.Errorf("sandbox: remove scratch directory %s: %w", dir, err))
	}
}

// firstLine returns the first line of s; wazero appends a multi-line wasm stack trace
// to trap messages, which belongs in Err, not in the one-line Detail.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
