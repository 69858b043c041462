package sandbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Modules: the shared compilation cache, reading, checking and compiling a tool's module,
// and the reference-counted compiled modules the engine keeps.

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
