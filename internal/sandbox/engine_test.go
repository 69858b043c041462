package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExampleTools runs each example tool in the sandbox, on valid and invalid input.
func TestExampleTools(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	for _, name := range []string{"wc", "sha256", "jsonq"} {
		mustLoad(t, e, name, name, ModuleConfig{})
	}
	tests := []struct {
		name       string
		tool       string
		args       string
		wantJSON   string // expected stdout, compared as JSON
		wantKind   Kind
		wantCode   uint32
		wantStderr string
	}{
		{name: "wc counts", tool: "wc", args: `{"text":"one two\nthree\n"}`, wantJSON: `{"lines":2,"words":3,"bytes":14}`},
		{name: "wc empty", tool: "wc", args: `{"text":""}`, wantJSON: `{"lines":0,"words":0,"bytes":0}`},
		{name: "wc invalid json", tool: "wc", args: `{"text":`, wantKind: KindExit, wantCode: 2, wantStderr: "wc: invalid input"},
		{name: "wc missing text", tool: "wc", args: `{}`, wantKind: KindExit, wantCode: 2, wantStderr: `missing required string field "text"`},
		{name: "sha256 abc", tool: "sha256", args: `{"text":"abc"}`, wantJSON: `{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}`},
		{name: "sha256 invalid json", tool: "sha256", args: `[`, wantKind: KindExit, wantCode: 2, wantStderr: "sha256: invalid input"},
		{name: "jsonq path", tool: "jsonq", args: `{"document":{"a":{"b":[{"c":true}]}},"path":"a.b[0].c"}`, wantJSON: `true`},
		{name: "jsonq string document", tool: "jsonq", args: `{"document":"{\"a\":[1,{\"b\":\"x\"}]}","path":"a[1]"}`, wantJSON: `{"b":"x"}`},
		{name: "jsonq missing path", tool: "jsonq", args: `{"document":{"a":1},"path":"b"}`, wantKind: KindExit, wantCode: 1, wantStderr: `key "b" not found`},
		{name: "jsonq invalid json", tool: "jsonq", args: `nope`, wantKind: KindExit, wantCode: 2, wantStderr: "jsonq: invalid input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Invoke(context.Background(), Request{ToolID: tt.tool, OperationID: "op-" + tt.name, Args: []byte(tt.args)})
			if tt.wantKind != "" {
				me := asModuleError(t, err)
				if me.Kind != tt.wantKind || me.ExitCode != tt.wantCode {
					t.Fatalf("got kind %s exit %d, want %s exit %d (%v)", me.Kind, me.ExitCode, tt.wantKind, tt.wantCode, err)
				}
				if !strings.Contains(me.Stderr, tt.wantStderr) || !strings.Contains(err.Error(), tt.wantStderr) {
					t.Fatalf("stderr %q / message %q, want both to contain %q", me.Stderr, err, tt.wantStderr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if !res.IsJSON {
				t.Errorf("IsJSON false for %q", res.Stdout)
			}
			assertJSONEqual(t, res.Stdout, tt.wantJSON)
		})
	}
}

// TestHostileModulesFailSafely runs every hostile module on ONE engine and checks that
// each fails with the right kind, without escaping, and that a good call succeeds right
// after it.
func TestHostileModulesFailSafely(t *testing.T) {
	var mu sync.Mutex
	var last *callRecord
	e := newTestEngine(t, EngineOptions{ScratchRoot: t.TempDir()})
	e.observe = func(r *callRecord) {
		mu.Lock()
		defer mu.Unlock()
		last = r
	}
	lastRecord := func() *callRecord {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
	mustLoad(t, e, "wc", "wc", ModuleConfig{})

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	trapPath := writeModule(t, "unreachable", commandSpec(opUnreachable).encode())

	tests := []struct {
		name   string
		module string // built module, or a path when it contains a separator
		cfg    ModuleConfig
		args   string
		kind   Kind
		check  func(t *testing.T, me *ModuleError)
	}{
		{
			name: "readfile", module: "readfile", kind: KindExit,
			check: func(t *testing.T, me *ModuleError) {
				for _, want := range []string{"denied read /etc/passwd", "denied list /work", "denied read /proc/self/environ"} {
					if !strings.Contains(me.Stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, me.Stderr)
					}
				}
			},
		},
		{
			name: "readfile from scratch", module: "readfile", cfg: ModuleConfig{Scratch: true}, kind: KindExit,
			check: func(t *testing.T, me *ModuleError) {
				for _, want := range []string{"denied symlink /scratch/evil", "denied symlink /scratch/up", "denied hard link", "denied read /scratch/../etc/passwd"} {
					if !strings.Contains(me.Stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, me.Stderr)
					}
				}
			},
		},
		{
			name: "socket", module: "socket", args: fmt.Sprintf(`{"addr":%q}`, listener.Addr().String()), kind: KindExit,
			check: func(t *testing.T, me *ModuleError) {
				for _, want := range []string{"denied dial tcp", "denied dial udp", "denied adopt fd 3"} {
					if !strings.Contains(me.Stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, me.Stderr)
					}
				}
				// Had the dial connected, the handshake would already sit in the
				// listener's backlog; give Accept a bounded chance to find it.
				if err := listener.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
					t.Fatal(err)
				}
				if conn, err := listener.Accept(); err == nil {
					conn.Close()
					t.Fatal("the module connected to the host's listener")
				}
			},
		},
		{
			name: "loop", module: "loop", cfg: ModuleConfig{Timeout: 300 * time.Millisecond}, kind: KindTimeout,
			check: func(t *testing.T, me *ModuleError) {
				if !strings.Contains(me.Error(), "timed out after 300ms") {
					t.Errorf("message %q", me.Error())
				}
				if errors.Is(me, context.DeadlineExceeded) || errors.Is(me, context.Canceled) {
					t.Error("the tool's own time limit must not look like the caller's context ending")
				}
			},
		},
		{name: "sleep", module: "sleep", cfg: ModuleConfig{Timeout: 300 * time.Millisecond}, kind: KindTimeout},
		{
			name: "membomb", module: "membomb", cfg: ModuleConfig{MemoryLimitMiB: 32}, kind: KindMemory,
			check: func(t *testing.T, me *ModuleError) {
				if !strings.Contains(me.Error(), "memory limit of 32 MiB exceeded") {
					t.Errorf("message %q", me.Error())
				}
				rec := lastRecord()
				if !rec.memory.refused.Load() || rec.memory.peak.Load() > 32<<20 {
					t.Errorf("refused %v, peak %d bytes, want a refusal and a peak within 32 MiB", rec.memory.refused.Load(), rec.memory.peak.Load())
				}
			},
		},
		{
			name: "bigoutput", module: "bigoutput", cfg: ModuleConfig{MaxOutputBytes: 1 << 20}, kind: KindOutputTooLarge,
			check: func(t *testing.T, me *ModuleError) {
				if !strings.Contains(me.Error(), "output exceeds 1048576 bytes") {
					t.Errorf("message %q", me.Error())
				}
				if errors.Is(me, context.Canceled) {
					t.Error("stopping a flooding module must not look like the caller canceling")
				}
				_, overflowed, retained, _ := lastRecord().stdout.snapshot()
				if !overflowed || retained > 1<<20 {
					t.Errorf("overflowed %v, retained %d bytes, want the writer to stop at 1 MiB", overflowed, retained)
				}
			},
		},
		{
			name: "go panic", module: "trap", kind: KindTrap,
			check: func(t *testing.T, me *ModuleError) {
				if me.ExitCode != 2 || !strings.Contains(me.Stderr, "panic: hostile: deliberate panic") {
					t.Errorf("exit %d, stderr %q", me.ExitCode, me.Stderr)
				}
			},
		},
		{
			name: "wasm unreachable", module: trapPath, kind: KindTrap,
			check: func(t *testing.T, me *ModuleError) {
				if !strings.Contains(me.Detail, "unreachable") {
					t.Errorf("detail %q", me.Detail)
				}
			},
		},
		{
			name: "exitcode", module: "exitcode", kind: KindExit,
			check: func(t *testing.T, me *ModuleError) {
				if me.ExitCode != 3 || !strings.Contains(me.Error(), "exit status 3: stderr: hostile: failing on purpose with status 3") {
					t.Errorf("exit %d, message %q", me.ExitCode, me.Error())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Path = tt.module
			if !strings.ContainsRune(tt.module, os.PathSeparator) {
				cfg.Path = modulePath(tt.module)
			}
			if err := e.Load(context.Background(), "hostile", cfg); err != nil {
				t.Fatalf("Load: %v", err)
			}
			res, err := e.Invoke(context.Background(), Request{ToolID: "hostile", OperationID: "op-1", Args: []byte(tt.args)})
			if err == nil {
				t.Fatalf("hostile module succeeded; stdout %q", res.Stdout)
			}
			me := asModuleError(t, err)
			if me.Kind != tt.kind {
				t.Fatalf("kind %s, want %s: %v", me.Kind, tt.kind, err)
			}
			if strings.Contains(me.Stderr, "ESCAPED") {
				t.Fatalf("escape reported: %s", me.Stderr)
			}
			if tt.check != nil {
				tt.check(t, me)
			}
			// The engine keeps serving.
			res, err = e.Invoke(context.Background(), Request{ToolID: "wc", Args: []byte(`{"text":"still alive"}`)})
			if err != nil {
				t.Fatalf("good call after %s: %v", tt.name, err)
			}
			assertJSONEqual(t, res.Stdout, `{"lines":0,"words":2,"bytes":11}`)
		})
	}
}

// TestLoadRejects checks that every unacceptable module or configuration is refused at
// Load with the right sentinel, and that a refused reload keeps the previous module.
func TestLoadRejects(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	mustLoad(t, e, "tool", "wc", ModuleConfig{})

	envImport := commandSpec(opCall(0))
	envImport.imports = []wasmImport{{module: "env", name: "escape", typeIdx: 0}}
	envImport.exportFunc = map[string]int{"_start": 1}
	badSignature := commandSpec(opNop)
	badSignature.imports = []wasmImport{{module: "wasi_snapshot_preview1", name: "proc_exit", typeIdx: 0}}
	badSignature.exportFunc = map[string]int{"_start": 1}
	unknownWASI := commandSpec(opNop)
	unknownWASI.imports = []wasmImport{{module: "wasi_snapshot_preview1", name: "sock_open", typeIdx: 0}}
	unknownWASI.exportFunc = map[string]int{"_start": 1}
	noStart := commandSpec(opNop)
	noStart.exportFunc = map[string]int{"run": 0}
	noMemory := commandSpec(opNop)
	noMemory.memoryMin = -1
	noMemory.exportMem = ""
	startFunc := commandSpec(opNop)
	startFunc.start = 0
	hugeMemory := commandSpec(opNop)
	hugeMemory.memoryMin = 2048 // 128 MiB

	tests := []struct {
		name        string
		path        string
		cfg         ModuleConfig
		toolID      string
		wantIs      []error
		wantNot     []error
		wantMessage string
	}{
		{name: "missing file", path: "/nonexistent/tool.wasm", wantIs: []error{ErrModuleUnavailable, os.ErrNotExist}, wantNot: []error{ErrModuleInvalid}},
		{name: "directory", path: t.TempDir(), wantIs: []error{ErrModuleUnavailable, ErrModuleInvalid}, wantMessage: "is a directory"},
		{name: "not wasm", path: writeModule(t, "text", []byte("#!/bin/sh\necho hi\n")), wantIs: []error{ErrModuleUnavailable, ErrModuleInvalid}, wantMessage: "compile"},
		{name: "foreign import", path: writeModule(t, "env", envImport.encode()), wantIs: []error{ErrModuleUnavailable, ErrModuleInvalid}, wantMessage: "imports function env.escape"},
		{name: "wasi signature mismatch", path: writeModule(t, "sig", badSignature.encode()), wantIs: []error{ErrModuleInvalid}, wantMessage: "signature that does not match"},
		{name: "unknown wasi function", path: writeModule(t, "sock", unknownWASI.encode()), wantIs: []error{ErrModuleInvalid}, wantMessage: "does not provide"},
		{name: "no _start", path: writeModule(t, "nostart", noStart.encode()), wantIs: []error{ErrModuleInvalid}, wantMessage: "not a WASI command"},
		{name: "start function", path: writeModule(t, "startfn", startFunc.encode()), wantIs: []error{ErrModuleInvalid}, wantMessage: "has a WebAssembly start function"},
		{name: "no memory", path: writeModule(t, "nomem", noMemory.encode()), wantIs: []error{ErrModuleInvalid}, wantMessage: `exports no "memory"`},
		{name: "initial memory above limit", path: writeModule(t, "huge", hugeMemory.encode()), cfg: ModuleConfig{MemoryLimitMiB: 64}, wantIs: []error{ErrModuleInvalid}, wantMessage: "131072 KiB of initial memory"},
		{name: "module too large", path: modulePath("wc"), cfg: ModuleConfig{}, wantIs: []error{ErrModuleInvalid}, wantMessage: "above the limit"},
		{name: "negative timeout", path: modulePath("wc"), cfg: ModuleConfig{Timeout: -time.Second}, wantIs: []error{ErrInvalidConfig}},
		{name: "memory above 4 GiB", path: modulePath("wc"), cfg: ModuleConfig{MemoryLimitMiB: 4097}, wantIs: []error{ErrInvalidConfig}},
		{name: "empty path", path: "", wantIs: []error{ErrInvalidConfig}},
		{name: "empty tool id", path: modulePath("wc"), toolID: "-", wantIs: []error{ErrInvalidConfig}},
	}
	small := newTestEngine(t, EngineOptions{MaxModuleBytes: 1024})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			engine, toolID := e, "tool"
			if tt.name == "module too large" {
				engine = small
			}
			if tt.toolID == "-" {
				toolID = ""
			}
			cfg := tt.cfg
			cfg.Path = tt.path
			err := engine.Load(context.Background(), toolID, cfg)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("error %q does not match %v", err, target)
				}
			}
			for _, target := range tt.wantNot {
				if errors.Is(err, target) {
					t.Errorf("error %q matches %v", err, target)
				}
			}
			if !strings.Contains(err.Error(), tt.wantMessage) {
				t.Errorf("error %q lacks %q", err, tt.wantMessage)
			}
			// The tool keeps its previous module.
			if _, err := e.Invoke(context.Background(), Request{ToolID: "tool", Args: []byte(`{"text":"x"}`)}); err != nil {
				t.Fatalf("previous module lost: %v", err)
			}
		})
	}
}

// TestInvokeErrors covers the failures that happen before any module runs.
func TestInvokeErrors(t *testing.T) {
	e := newTestEngine(t, EngineOptions{ScratchRoot: "/nonexistent/scratch/root"})
	mustLoad(t, e, "wc", "wc", ModuleConfig{})
	mustLoad(t, e, "scratchy", "wc", ModuleConfig{Scratch: true})

	t.Run("unknown tool", func(t *testing.T) {
		_, err := e.Invoke(context.Background(), Request{ToolID: "nope"})
		if !errors.Is(err, ErrModuleUnavailable) {
			t.Fatalf("error %v, want ErrModuleUnavailable", err)
		}
	})
	t.Run("NUL in operation id", func(t *testing.T) {
		_, err := e.Invoke(context.Background(), Request{ToolID: "wc", OperationID: "a\x00b"})
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("error %v, want ErrInvalidRequest", err)
		}
	})
	t.Run("instantiate failure is unavailable", func(t *testing.T) {
		_, err := e.Invoke(context.Background(), Request{ToolID: "scratchy", Args: []byte(`{"text":""}`)})
		me := asModuleError(t, err)
		if me.Kind != KindInstantiate || !errors.Is(err, ErrModuleUnavailable) {
			t.Fatalf("kind %s, unavailable %v: %v", me.Kind, errors.Is(err, ErrModuleUnavailable), err)
		}
	})
	t.Run("unloaded tool", func(t *testing.T) {
		e.Unload("wc")
		_, err := e.Invoke(context.Background(), Request{ToolID: "wc"})
		if !errors.Is(err, ErrModuleUnavailable) {
			t.Fatalf("error %v, want ErrModuleUnavailable", err)
		}
	})
}

// TestCompilationCache proves compilation happens once per module content: reloading,
// loading the same file under another id, invoking, and concurrent loads do not
// compile again; a different module does; a module freed by Unload compiles again.
func TestCompilationCache(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	steps := []struct {
		name             string
		do               func(t *testing.T)
		wantCompilations uint64
		wantCached       int
	}{
		{name: "first load compiles", do: func(t *testing.T) { mustLoad(t, e, "a", "wc", ModuleConfig{}) }, wantCompilations: 1, wantCached: 1},
		{name: "reload same content", do: func(t *testing.T) { mustLoad(t, e, "a", "wc", ModuleConfig{Timeout: time.Minute}) }, wantCompilations: 1, wantCached: 1},
		{name: "same content under another id", do: func(t *testing.T) { mustLoad(t, e, "b", "wc", ModuleConfig{}) }, wantCompilations: 1, wantCached: 1},
		{name: "invocations", do: func(t *testing.T) {
			for _, id := range []string{"a", "b", "a"} {
				if _, err := e.Invoke(context.Background(), Request{ToolID: id, Args: []byte(`{"text":"x"}`)}); err != nil {
					t.Fatal(err)
				}
			}
		}, wantCompilations: 1, wantCached: 1},
		{name: "concurrent loads of new content compile once", do: func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for i := range 4 {
				wg.Go(func() {
					errs <- e.Load(context.Background(), fmt.Sprintf("q%d", i), ModuleConfig{Path: modulePath("jsonq")})
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}, wantCompilations: 2, wantCached: 2},
		{name: "unload frees only the last user", do: func(t *testing.T) { e.Unload("a") }, wantCompilations: 2, wantCached: 2},
		{name: "unload last user frees", do: func(t *testing.T) { e.Unload("b") }, wantCompilations: 2, wantCached: 1},
		{name: "freed module compiles again", do: func(t *testing.T) { mustLoad(t, e, "a", "wc", ModuleConfig{}) }, wantCompilations: 3, wantCached: 2},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.do(t)
			st := e.Stats()
			if st.Compilations != step.wantCompilations || st.CachedModules != step.wantCached {
				t.Fatalf("compilations %d, cached %d; want %d, %d", st.Compilations, st.CachedModules, step.wantCompilations, step.wantCached)
			}
		})
	}
}

// TestDiskCache checks that a cache directory is populated by one engine and serves a
// second one without new cache entries. A tiny hand-made module keeps it fast: the
// mechanism does not depend on the module.
func TestDiskCache(t *testing.T) {
	dir := t.TempDir()
	path := writeModule(t, "nop", commandSpec(opNop).encode())
	for round := range 2 {
		// Each round's engine is closed before the next starts, as in a restarted
		// process: the second finds the module on disk, not in the first's memory.
		e, err := NewEngine(context.Background(), EngineOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Load(context.Background(), "nop", ModuleConfig{Path: path}); err != nil {
			t.Fatal(err)
		}
		res, err := e.Invoke(context.Background(), Request{ToolID: "nop"})
		if err != nil || len(res.Stdout) != 0 || res.IsJSON {
			t.Fatalf("round %d: %+v, %v", round, res, err)
		}
		if got := countCacheFiles(t, dir); got != 1 {
			t.Fatalf("round %d: %d cache files, want 1", round, got)
		}
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// countCacheFiles counts the compiled modules in an on-disk cache directory (wazero keeps
// them in one subdirectory per wazero version and platform).
func countCacheFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range entries {
		files, err := os.ReadDir(filepath.Join(dir, sub.Name()))
		if err != nil {
			t.Fatal(err)
		}
		n += len(files)
	}
	return n
}

// TestEnginesShareCacheDirInMemory checks that engines of one process with the same
// CacheDir share compiled code in memory: with the cache file deleted, a second engine
// loads the module the first holds without compiling it again (which would write the
// file anew); once both are closed the process lets go of it and a third compiles.
func TestEnginesShareCacheDirInMemory(t *testing.T) {
	dir := t.TempDir()
	path := writeModule(t, "nop", commandSpec(opNop).encode())
	removeCacheFiles := func() {
		t.Helper()
		subs, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
		for _, f := range subs {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	load := func(e *Engine) {
		t.Helper()
		if err := e.Load(context.Background(), "nop", ModuleConfig{Path: path}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Invoke(context.Background(), Request{ToolID: "nop"}); err != nil {
			t.Fatal(err)
		}
	}
	closeEngine := func(e *Engine) {
		t.Helper()
		if err := e.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	first, err := NewEngine(context.Background(), EngineOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	load(first)
	removeCacheFiles()
	// The same directory spelled differently is the same cache.
	second, err := NewEngine(context.Background(), EngineOptions{CacheDir: dir + string(filepath.Separator) + "."})
	if err != nil {
		t.Fatal(err)
	}
	load(second)
	if got := countCacheFiles(t, dir); got != 0 {
		t.Fatalf("the second engine compiled the module again (%d cache files): no sharing in memory", got)
	}
	closeEngine(first)
	closeEngine(second)

	third, err := NewEngine(context.Background(), EngineOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer closeEngine(third)
	load(third)
	if got := countCacheFiles(t, dir); got != 1 {
		t.Fatalf("after every engine closed, a new one found %d cache files, want 1 (compiled again)", got)
	}
}

// probeReport mirrors testdata/probe's output.
type probeReport struct {
	Args    []string `json:"args"`
	Env     []string `json:"env"`
	TZ      string   `json:"tz"`
	Year    int      `json:"year"`
	Counter int      `json:"counter"`
	Stdin   string   `json:"stdin"`
	Scratch struct {
		Present       bool     `json:"present"`
		EntriesBefore []string `json:"entries_before"`
		ReadBack      string   `json:"read_back"`
		Error         string   `json:"error"`
		FillError     string   `json:"fill_error"`
		FillWritten   int      `json:"fill_written"`
	} `json:"scratch"`
}

func invokeProbe(t *testing.T, e *Engine, toolID, opID, args string) probeReport {
	t.Helper()
	res, err := e.Invoke(context.Background(), Request{ToolID: toolID, OperationID: opID, Args: []byte(args)})
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	var r probeReport
	if err := json.Unmarshal(res.Stdout, &r); err != nil {
		t.Fatalf("probe output %q: %v", res.Stdout, err)
	}
	return r
}

// TestModuleEnvironment checks what a module can see of the host: only its tool id as
// argv, only the two AWAKEN_ variables, UTC, a real clock, its stdin, and no /scratch
// unless configured.
func TestModuleEnvironment(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	mustLoad(t, e, "probe", "probe", ModuleConfig{})
	tests := []struct {
		name    string
		opID    string
		wantEnv []string
	}{
		{name: "with operation id", opID: "tool-batch:run-1:3:call_1", wantEnv: []string{"AWAKEN_OPERATION_ID=tool-batch:run-1:3:call_1", "AWAKEN_TOOL_ID=probe"}},
		{name: "without operation id", wantEnv: []string{"AWAKEN_TOOL_ID=probe"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invokeProbe(t, e, "probe", tt.opID, `{"x":1}`)
			env := slices.Sorted(slices.Values(r.Env))
			if !slices.Equal(env, tt.wantEnv) {
				t.Errorf("env %q, want %q", env, tt.wantEnv)
			}
			if !slices.Equal(r.Args, []string{"probe"}) {
				t.Errorf("args %q", r.Args)
			}
			if r.TZ != "UTC+0" || r.Year < 2025 {
				t.Errorf("tz %q, year %d: want UTC and the real clock", r.TZ, r.Year)
			}
			if r.Stdin != `{"x":1}` || r.Scratch.Present || r.Counter != 1 {
				t.Errorf("stdin %q, scratch %v, counter %d", r.Stdin, r.Scratch.Present, r.Counter)
			}
		})
	}
}

// TestConcurrentCallsAreIsolated runs 8 calls at once, each with its own scratch
// directory: every call sees a fresh instance (counter 1), an empty scratch directory,
// its own operation id, and leaves nothing behind.
func TestConcurrentCallsAreIsolated(t *testing.T) {
	root := t.TempDir()
	e := newTestEngine(t, EngineOptions{ScratchRoot: root, MaxConcurrentCalls: 8})
	mustLoad(t, e, "probe", "probe", ModuleConfig{Scratch: true})
	mustLoad(t, e, "wc", "wc", ModuleConfig{})

	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			opID := fmt.Sprintf("op-%d", i)
			res, err := e.Invoke(context.Background(), Request{ToolID: "probe", OperationID: opID, Args: []byte(`{}`)})
			if err != nil {
				errs <- err
				return
			}
			var r probeReport
			if err := json.Unmarshal(res.Stdout, &r); err != nil {
				errs <- err
				return
			}
			if r.Counter != 1 || len(r.Scratch.EntriesBefore) != 0 || r.Scratch.ReadBack != opID || !slices.Contains(r.Env, EnvOperationID+"="+opID) {
				errs <- fmt.Errorf("call %s saw counter %d, scratch %q, read back %q, env %q", opID, r.Counter, r.Scratch.EntriesBefore, r.Scratch.ReadBack, r.Env)
			}
		})
		wg.Go(func() {
			text := strings.Repeat("w ", i+1)
			res, err := e.Invoke(context.Background(), Request{ToolID: "wc", Args: fmt.Appendf(nil, `{"text":%q}`, text)})
			if err != nil {
				errs <- err
				return
			}
			var got struct{ Words int }
			if err := json.Unmarshal(res.Stdout, &got); err != nil || got.Words != i+1 {
				errs <- fmt.Errorf("wc call %d got %s (%v)", i, res.Stdout, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assertEmptyDir(t, root)
}

// TestScratch checks the scratch directory: present only when configured, empty,
// writable, metered by its quota, and removed after every call.
func TestScratch(t *testing.T) {
	root := t.TempDir()
	e := newTestEngine(t, EngineOptions{ScratchRoot: root})
	var mu sync.Mutex
	var dirs []string
	e.observe = func(r *callRecord) {
		mu.Lock()
		defer mu.Unlock()
		if r.scratchDir != "" {
			if _, err := os.Stat(r.scratchDir); err != nil {
				t.Errorf("scratch directory missing during the call: %v", err)
			}
			dirs = append(dirs, r.scratchDir)
		}
	}
	mustLoad(t, e, "plain", "probe", ModuleConfig{})
	mustLoad(t, e, "scratch", "probe", ModuleConfig{Scratch: true, ScratchMaxBytes: 1 << 20})

	t.Run("absent unless configured", func(t *testing.T) {
		if r := invokeProbe(t, e, "plain", "op", `{}`); r.Scratch.Present {
			t.Fatal("a module without Scratch sees /scratch")
		}
	})
	t.Run("empty and usable", func(t *testing.T) {
		for i := range 2 { // the second call must not see the first one's marker
			r := invokeProbe(t, e, "scratch", fmt.Sprintf("op-%d", i), `{}`)
			if !r.Scratch.Present || len(r.Scratch.EntriesBefore) != 0 || r.Scratch.ReadBack != fmt.Sprintf("op-%d", i) || r.Scratch.Error != "" {
				t.Fatalf("call %d: scratch %+v", i, r.Scratch)
			}
		}
	})
	t.Run("quota", func(t *testing.T) {
		r := invokeProbe(t, e, "scratch", "op", `{"fill_bytes":4194304}`)
		if r.Scratch.FillError == "" || r.Scratch.FillWritten > 1<<20 {
			t.Fatalf("wrote %d bytes with error %q, want the quota to stop it under 1 MiB", r.Scratch.FillWritten, r.Scratch.FillError)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if len(dirs) != 3 {
		t.Fatalf("%d scratch directories observed, want 3", len(dirs))
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("scratch directory %s not removed: %v", d, err)
		}
	}
	assertEmptyDir(t, root)
}

// TestMemoryLimit checks the limit both ways: an allocation that fits succeeds and
// reports its peak; the same allocation under a smaller limit fails with KindMemory.
func TestMemoryLimit(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	mustLoad(t, e, "fits", "membomb", ModuleConfig{MemoryLimitMiB: 128})
	mustLoad(t, e, "tight", "membomb", ModuleConfig{MemoryLimitMiB: 16})
	args := []byte(`{"mib":24}`)

	res, err := e.Invoke(context.Background(), Request{ToolID: "fits", Args: args})
	if err != nil {
		t.Fatalf("24 MiB under a 128 MiB limit: %v", err)
	}
	if res.PeakMemoryBytes < 24<<20 || res.PeakMemoryBytes > 128<<20 {
		t.Errorf("peak %d bytes, want between 24 and 128 MiB", res.PeakMemoryBytes)
	}
	_, err = e.Invoke(context.Background(), Request{ToolID: "tight", Args: args})
	if me := asModuleError(t, err); me.Kind != KindMemory {
		t.Fatalf("kind %s, want memory: %v", me.Kind, err)
	}
}

// TestCancellation separates the caller giving up from the tool's own time limit.
func TestCancellation(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	mustLoad(t, e, "loop", "loop", ModuleConfig{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := e.Invoke(ctx, Request{ToolID: "loop"})
	me := asModuleError(t, err)
	if me.Kind != KindCanceled || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("kind %s, deadline %v: %v", me.Kind, errors.Is(err, context.DeadlineExceeded), err)
	}
}

// startHeld invokes req on e in the background and returns once the call is about to run
// its module's _start, where it waits until release is called; later calls are not held.
// The call's error arrives on result.
func startHeld(e *Engine, req Request) (result <-chan error, release func()) {
	started, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.beforeStart = func() {
		once.Do(func() {
			close(started)
			<-proceed
		})
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Invoke(context.Background(), req)
		done <- err
	}()
	<-started
	return done, sync.OnceFunc(func() { close(proceed) })
}

// TestCloseStopsRunningCalls closes the engine while a call loops: the call ends with
// KindCanceled wrapping ErrClosed, and later calls and loads get ErrClosed.
func TestCloseStopsRunningCalls(t *testing.T) {
	e, err := NewEngine(context.Background(), EngineOptions{CacheDir: sharedCacheDir})
	if err != nil {
		t.Fatal(err)
	}
	mustLoad(t, e, "loop", "loop", ModuleConfig{Timeout: time.Minute})
	result, release := startHeld(e, Request{ToolID: "loop"})
	release() // the call runs on into its endless loop
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	err = <-result
	if me := asModuleError(t, err); me.Kind != KindCanceled || !errors.Is(err, ErrClosed) {
		t.Fatalf("running call ended with %v", err)
	}
	if _, err := e.Invoke(context.Background(), Request{ToolID: "loop"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Invoke after Close: %v", err)
	}
	if err := e.Load(context.Background(), "x", ModuleConfig{Path: modulePath("wc")}); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close: %v", err)
	}
	if err := e.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestUnloadWhileRunning holds a call inside the module while its tool is unloaded: the
// call still completes on the module it started with, which is freed afterwards.
func TestUnloadWhileRunning(t *testing.T) {
	e := newTestEngine(t, EngineOptions{})
	mustLoad(t, e, "wc", "wc", ModuleConfig{})
	result, release := startHeld(e, Request{ToolID: "wc", Args: []byte(`{"text":"a b"}`)})
	e.Unload("wc")
	if st := e.Stats(); st.CachedModules != 1 || st.LoadedTools != 0 {
		t.Fatalf("while running: %+v, want the module kept for the call", st)
	}
	release()
	if err := <-result; err != nil {
		t.Fatalf("call on an unloaded tool: %v", err)
	}
	if st := e.Stats(); st.CachedModules != 0 {
		t.Fatalf("after the call: %+v, want the module freed", st)
	}
}

// TestConcurrencyLimit holds one call in the only slot: a second call waits and gives
// up with its context, as KindCanceled.
func TestConcurrencyLimit(t *testing.T) {
	e := newTestEngine(t, EngineOptions{MaxConcurrentCalls: 1})
	mustLoad(t, e, "wc", "wc", ModuleConfig{})
	first, release := startHeld(e, Request{ToolID: "wc", Args: []byte(`{"text":""}`)})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := e.Invoke(ctx, Request{ToolID: "wc", Args: []byte(`{"text":""}`)})
	if me := asModuleError(t, err); me.Kind != KindCanceled || !errors.Is(err, context.Canceled) || !strings.Contains(me.Detail, "call slot") {
		t.Fatalf("second call: %v", err)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// TestNewEngineRejectsBadOptions checks option validation: every limit out of range is
// refused with ErrInvalidConfig and an error that names it.
func TestNewEngineRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    EngineOptions
		wantMsg string
	}{
		{name: "memory above 4 GiB", opts: EngineOptions{DefaultMemoryLimitMiB: 5000}, wantMsg: "DefaultMemoryLimitMiB 5000 outside 1..4096"},
		{name: "negative timeout", opts: EngineOptions{DefaultTimeout: -1}, wantMsg: "DefaultTimeout -1ns is negative"},
		{name: "negative output", opts: EngineOptions{DefaultMaxOutputBytes: -1}, wantMsg: "DefaultMaxOutputBytes -1 is negative"},
		{name: "negative scratch", opts: EngineOptions{DefaultScratchMaxBytes: -2}, wantMsg: "DefaultScratchMaxBytes -2 is negative"},
		{name: "negative stderr", opts: EngineOptions{MaxStderrBytes: -1}, wantMsg: "MaxStderrBytes -1 is negative"},
		{name: "negative module size", opts: EngineOptions{MaxModuleBytes: -1}, wantMsg: "MaxModuleBytes -1 is negative"},
		{name: "negative concurrency", opts: EngineOptions{MaxConcurrentCalls: -1}, wantMsg: "MaxConcurrentCalls -1 is negative"},
		{name: "negative compilation workers", opts: EngineOptions{CompilationWorkers: -1}, wantMsg: "CompilationWorkers -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewEngine(context.Background(), tt.opts)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q, want it to name %q", err, tt.wantMsg)
			}
		})
	}
}

// TestModuleConfigRejectsBadLimits checks a module's limits the same way.
func TestModuleConfigRejectsBadLimits(t *testing.T) {
	tests := []struct {
		cfg     ModuleConfig
		wantMsg string
	}{
		{ModuleConfig{Path: "m.wasm", MemoryLimitMiB: -1}, "MemoryLimitMiB -1 outside 1..4096"},
		{ModuleConfig{Path: "m.wasm", Timeout: -time.Second}, "Timeout -1s is negative"},
		{ModuleConfig{Path: "m.wasm", MaxOutputBytes: -1}, "MaxOutputBytes -1 is negative"},
		{ModuleConfig{Path: "m.wasm", ScratchMaxBytes: -1}, "ScratchMaxBytes -1 is negative"},
	}
	for _, tt := range tests {
		_, err := tt.cfg.resolve(EngineOptions{DefaultMemoryLimitMiB: 64})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantMsg) {
			t.Errorf("resolve(%+v) = %v, want ErrInvalidConfig naming %q", tt.cfg, err, tt.wantMsg)
		}
	}
}

func assertJSONEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output %q is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Fatalf("output %s, want %s", gb, wb)
	}
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("%s not empty: %v", dir, entries)
	}
}
